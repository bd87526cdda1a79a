// turnledger console. Plain JavaScript, no dependencies, no build step.
// Every call goes to the public HTTP API of the server that served this file,
// with the credential the user signed in with (kept in sessionStorage only).
'use strict';
(() => {
  const AUTH_KEY = 'turnledger.console.auth';
  const STATES = ['queued', 'claimed', 'suspended', 'finished'];
  const OUTCOMES = ['succeeded', 'failed', 'stopped', 'dead', 'expired', 'timed_out'];
  // The outcomes a Turn can be retried from (POST .../turns/{id}:retry).
  const RETRYABLE = ['failed', 'dead', 'expired', 'timed_out', 'stopped'];
  const PRIORITIES = ['1', '2', '3', '4', '5'];
  // The most Turns one bulk-stop or bulk-retry call acts on (the API's default).
  const BULK_LIMIT = 100;
  const mainEl = document.getElementById('main');
  let routeGen = 0; // each route renders into its own view; a stale one writes to a detached element
  let auth = loadAuth();
  let disposers = []; // stop timers and followers of the page being left
  let projects = [];
  // The answer of the last bulk action, shown on the Turn list it was made
  // from (the list is read again after it): {hash, verb, n, more, body}.
  let lastBulk = null;

  // ---- small helpers -------------------------------------------------------

  function loadAuth() {
    try { return JSON.parse(sessionStorage.getItem(AUTH_KEY)); } catch { return null; }
  }

  // h builds an element: h('a', {href: '#', class: 'x', onclick: fn}, 'text', child…).
  function h(tag, attrs, ...children) {
    const el = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
      else if (k === 'class') el.className = v;
      else if (k === 'text') el.textContent = v;
      else el.setAttribute(k, v === true ? '' : v);
    }
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    }
    return el;
  }

  const enc = encodeURIComponent;
  const pp = (p) => `/v3r1/projects/${enc(p)}`;
  const link = (p, ...rest) => '#/p/' + [p, ...rest].map(enc).join('/');
  const turnLink = (p, id) => h('a', {href: link(p, 'turns', id), class: 'mono turn-link'}, id);
  const agentLink = (p, id) => h('a', {href: link(p, 'agents', id)}, id);
  const badge = (v, cls) => h('span', {class: `badge ${cls || v}`}, v);
  // tagList shows a Turn's tags, each a link to the Turns carrying it.
  const tagList = (p, tags) => (tags && tags.length) ? h('span', {class: 'row tags'},
    tags.map((g) => h('a', {class: 'tag', href: link(p, 'turns') + qs({tag: g}), 'data-tag': g}, g))) : '—';
  const json = (v) => h('pre', {class: 'json'}, JSON.stringify(v, null, 2));
  const when = (t) => t ? h('time', {datetime: t, title: t}, new Date(t).toLocaleString()) : '—';
  // attempts is "claims so far / max_attempts".
  const attempts = (t) => `${t.attempts} / ${t.max_attempts === null || t.max_attempts === undefined ? 'no limit' : t.max_attempts}`;
  // backoff reads a retry_backoff: the delay after attempt n is
  // initial_s × factor^(n−1), at most max_s.
  const backoff = (b) => `${b.initial_s} s after the first attempt, ×${b.factor} for each further one, at most ${b.max_s} s`;

  function qs(params) {
    const u = new URLSearchParams();
    for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '' && v !== false) u.set(k, v);
    const s = u.toString();
    return s ? '?' + s : '';
  }

  class APIError extends Error {
    constructor(status, name, message) { super(message); this.status = status; this.name = name; }
  }

  function headers(extra) {
    const hd = Object.assign({}, extra);
    if (!auth) return hd;
    hd.Authorization = 'Bearer ' + auth.token;
    if (auth.mode === 'agent') {
      hd['X-Svc-Project-Id'] = auth.project;
      hd['X-Svc-Agent-Id'] = auth.agent;
    }
    return hd;
  }

  async function api(method, path, body) {
    const init = {method, headers: headers(body === undefined ? {} : {'Content-Type': 'application/json'}), cache: 'no-store'};
    if (body !== undefined) init.body = JSON.stringify(body);
    const resp = await fetch(path, init);
    const text = await resp.text();
    let data = null;
    try { data = text ? JSON.parse(text) : null; } catch { /* not JSON */ }
    if (!resp.ok) {
      if (resp.status === 401 && auth) flash('The server refused the credential (401). Sign in again if it was revoked.', true);
      throw new APIError(resp.status, (data && data.error) || 'HTTPError', (data && data.message) || text || resp.statusText);
    }
    return data;
  }

  // pages follows a projection list's cursor until has_more is false, at
  // most max pages. complete says whether the list was read to its end;
  // when it was not, next is the cursor where the reading stopped.
  async function pages(path, params, max) {
    let after = 0, items = [], page;
    for (let i = 0; i < (max || 5); i++) {
      page = await api('GET', path + qs(Object.assign({}, params, {after_ledger_seq: after || undefined})));
      items = items.concat(page.items);
      if (!page.has_more) return {items, diagnostics: page.diagnostics, complete: true};
      after = page.next_after_ledger_seq;
    }
    return {items, diagnostics: page.diagnostics, complete: false, next: after};
  }

  // intParam reads a whole number from the route's query, within [lo, hi].
  function intParam(q, name, lo, hi, def) {
    const n = Number(q.get(name));
    return q.has(name) && Number.isInteger(n) ? Math.min(hi, Math.max(lo, n)) : def;
  }

  function flash(msg, bad) {
    const f = document.getElementById('flash');
    f.replaceChildren(h('div', {class: bad ? 'bad' : 'ok'}, msg));
    clearTimeout(flash.t);
    flash.t = setTimeout(() => f.replaceChildren(), 8000);
  }

  function errorBox(e) {
    return h('p', {class: 'error', role: 'alert'}, e instanceof APIError ? `${e.status} ${e.name}: ${e.message}` : String(e));
  }

  // confirmAction asks before an operator action; Esc or Cancel answers false.
  function confirmAction(title, text, okLabel) {
    const d = document.getElementById('confirm');
    document.getElementById('confirm-title').textContent = title;
    document.getElementById('confirm-text').textContent = text;
    document.getElementById('confirm-ok').textContent = okLabel || 'Confirm';
    d.returnValue = 'cancel';
    if (d.open) return Promise.resolve(false);
    return new Promise((resolve) => {
      // A close event of an earlier opening may still be on its way when
      // the dialog opens again: only a close that leaves it shut counts.
      const onClose = () => {
        if (d.open) return;
        d.removeEventListener('close', onClose);
        resolve(d.returnValue === 'ok');
      };
      d.addEventListener('close', onClose);
      d.showModal();
      document.getElementById('confirm-cancel').focus();
    });
  }

  // act runs an operator action after confirmation and reports the outcome.
  // When the page redrawn after it no longer holds the button that was
  // pressed (Stop goes once a stop is asked), the keyboard focus goes to the
  // page's content rather than back to the document's start.
  async function act(title, text, okLabel, fn, after) {
    if (!await confirmAction(title, text, okLabel)) return;
    try {
      const msg = await fn();
      flash(typeof msg === 'string' ? msg : title + ': done.');
    } catch (e) {
      flash(`${title} failed: ${e instanceof APIError ? e.status + ' ' + e.name + ': ' : ''}${e.message}`, true);
    }
    if (after) {
      try { await after(); } catch (e) { flash(e.message, true); }
    }
    if (document.activeElement === document.body || !document.activeElement) mainEl.focus({preventScroll: true});
  }

  // The actor an operator action names in requested_by: an agent acts as
  // itself; the admin acts on behalf of an agent of the project (the API
  // requires an existing agent there).
  function actor(project, fallback) {
    return auth.mode === 'agent' ? {project_id: project, agent_id: auth.agent} : {project_id: project, agent_id: fallback};
  }

  // ---- live feeds ----------------------------------------------------------

  // follow reads a ledger feed from the cursor `after` on and hands new items
  // to onItems in ledger order. It first asks for Server-Sent Events
  // (Accept: text/event-stream, id = ledger_seq); when the server answers
  // with a JSON page instead, it polls the page with the cursor every second.
  // pause() stops reading; resume() goes on from the last item seen. A
  // refusal that asking again cannot change (401, 403, 404, 422: a revoked
  // credential, a read the policy does not allow) ends the following, and
  // onError hears it with final set; any other error is retried.
  function follow(path, after, onItems, onError, onGone, onCaughtUp) {
    let cursor = after || 0, paused = false, stopped = false, timer = null, ctrl = null, sse = null;
    const schedule = (ms) => { clearTimeout(timer); if (!stopped && !paused) timer = setTimeout(tick, ms); };
    const deliver = (items) => {
      items = items.filter((it) => it.ledger_seq > cursor);
      if (!items.length) return;
      cursor = items[items.length - 1].ledger_seq;
      onItems(items);
    };
    async function tick() {
      if (stopped || paused) return;
      ctrl = new AbortController();
      try {
        const url = path + qs({after_ledger_seq: cursor, limit: 200});
        const accept = sse === false ? 'application/json' : 'text/event-stream, application/json;q=0.5';
        const resp = await fetch(url, {headers: headers({Accept: accept}), signal: ctrl.signal, cache: 'no-store'});
        if (!resp.ok) {
          const t = await resp.text();
          let d = {};
          try { d = JSON.parse(t); } catch { /* keep {} */ }
          throw Object.assign(new APIError(resp.status, d.error || 'HTTPError', d.message || t), {horizon: d.horizon_ledger_seq});
        }
        if ((resp.headers.get('Content-Type') || '').startsWith('text/event-stream')) {
          sse = true;
          await readSSE(resp, deliver, onCaughtUp);
          schedule(500); // the stream ended: reconnect from the cursor
          return;
        }
        sse = false;
        const page = await resp.json();
        deliver(page.items || []);
        if (page.items && page.items.length) cursor = Math.max(cursor, page.next_after_ledger_seq || 0);
        schedule(page.has_more ? 0 : 1000);
      } catch (e) {
        if (e.name === 'AbortError') return;
        if (e.horizon > cursor + 1) {
          // Below the retention horizon: the older events are in the
          // archive only. Say so once, and go on from the horizon.
          cursor = e.horizon - 1;
          if (onGone) onGone(e);
          schedule(0);
          return;
        }
        const final = e instanceof APIError && [401, 403, 404, 422].includes(e.status);
        if (final) stopped = true;
        if (onError) onError(e, final);
        schedule(3000);
      }
    }
    tick();
    const c = {
      get paused() { return paused; },
      get mode() { return sse === true ? 'stream' : sse === false ? 'polling' : 'connecting'; },
      pause() { paused = true; clearTimeout(timer); if (ctrl) ctrl.abort(); },
      resume() { if (!paused) return; paused = false; tick(); },
      stop() { stopped = true; c.pause(); },
    };
    disposers.push(() => c.stop());
    return c;
  }

  // readSSE reads an event stream, handing the JSON data of its events (a
  // feed item each, or a page of them) to deliver, until the stream ends.
  // What arrives together is delivered together: the page the server sends
  // to catch up is one delivery, not one per event, so the feed shows it as
  // history rather than as events appended one by one. An "error" event (the
  // server ends the stream with one when, say, the credential no longer
  // holds) is thrown as an APIError of status 0: the caller asks again and
  // hears the refusal's status then.
  async function readSSE(resp, deliver, onCaughtUp) {
    const reader = resp.body.getReader();
    const dec = new TextDecoder();
    let buf = '', data = [], id = '', event = '';
    for (;;) {
      const {value, done} = await reader.read();
      if (done) return;
      buf += dec.decode(value, {stream: true});
      const batch = [];
      let nl;
      while ((nl = buf.search(/\r\n|\n|\r/)) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith('\r\n', nl) ? 2 : 1));
        if (line === '') {
          if (data.length && event === 'error') {
            let d = {};
            try { d = JSON.parse(data.join('\n')); } catch { /* keep {} */ }
            reader.cancel().catch(() => {});
            if (batch.length) deliver(batch);
            throw Object.assign(new APIError(0, d.error || 'StreamError', d.message || 'the event stream ended with an error'), {horizon: d.horizon_ledger_seq});
          }
          if (data.length) {
            try {
              const v = JSON.parse(data.join('\n'));
              if (Array.isArray(v.items)) batch.push(...v.items);
              else if (v && v.ledger_seq !== undefined) batch.push(v);
              else if (id) batch.push(Object.assign({ledger_seq: Number(id)}, v));
            } catch { /* not JSON: ignore */ }
          }
          data = []; id = ''; event = '';
        } else if (line.startsWith(':')) {
          // A comment: a heartbeat, or the end of the catch-up, which
          // follows every item sent before it.
          if (line === ': caught up' && onCaughtUp) {
            if (batch.length) deliver(batch.splice(0));
            onCaughtUp();
          }
        } else {
          const i = line.indexOf(':');
          const field = i < 0 ? line : line.slice(0, i);
          const val = i < 0 ? '' : line.slice(i + 1).replace(/^ /, '');
          if (field === 'data') data.push(val);
          else if (field === 'id') id = val;
          else if (field === 'event') event = val;
        }
      }
      if (batch.length) deliver(batch);
    }
  }

  function feedItem(project, it, isNew, self) {
    const actorText = it.actor ? (it.actor.agent_id || it.actor.kind) : '';
    const target = it.id === self ? '' : it.aggregate === 'turn' ? turnLink(project, it.id) : it.aggregate === 'agent' ? agentLink(project, it.id) : h('span', {class: 'mono'}, it.id);
    return h('li', {class: isNew ? 'new' : '', 'data-seq': it.ledger_seq, 'data-type': it.type},
      h('span', {class: 'seq'}, '#' + it.ledger_seq),
      h('span', {class: 'what'}, h('span', {class: 'type'}, it.type), ' ', target, actorText ? h('span', {class: 'muted'}, ' by ' + actorText) : ''),
      h('time', {class: 'at muted', datetime: it.at, title: it.at}, new Date(it.at).toLocaleTimeString()),
      h('details', {}, h('summary', {}, 'data'), json({data: it.data, meta: it.meta, trace: it.trace})));
  }

  // feedPanel shows a live feed, newest first, with a pause button.
  function feedPanel(project, path, after, opts) {
    const list = h('ol', {class: 'feed', id: opts.id, 'aria-live': 'polite', reversed: true});
    const status = h('span', {class: 'muted feed-status', id: opts.id + '-status'}, 'connecting…');
    const btn = h('button', {type: 'button', class: 'quiet', id: opts.id + '-pause', 'aria-pressed': 'false'}, 'Pause');
    // What the feed held when it opened shows as history, not as new
    // arrivals: over a stream, every item before its ": caught up"; polling,
    // the first page.
    let history = true;
    const f = follow(path, after, (items) => {
      for (const it of items) list.prepend(feedItem(project, it, !history, opts.self));
      while (list.children.length > 500) list.lastChild.remove();
      if (f.mode !== 'stream') history = false;
      if (opts.onItems) opts.onItems(items);
      status.textContent = `live (${f.mode}), ${list.children.length} events shown`;
      list.dataset.mode = f.mode;
    }, (e, final) => {
      if (!final) { status.textContent = 'error: ' + e.message + ' (retrying)'; return; }
      // The API refuses this feed to the credential: say so and stop.
      status.replaceWith(h('p', {class: 'error', role: 'alert', id: opts.id + '-status'}, `${e.status} ${e.name}: ${e.message}`));
      btn.disabled = true;
      list.dataset.mode = 'refused';
    }, (e) => {
      // Retention moved the older events to the archive: the feed starts at its horizon.
      if (!list.parentNode || list.parentNode.querySelector('.gone')) return;
      list.before(h('p', {class: 'muted gone', id: opts.id + '-gone'}, `Events before #${e.horizon} are in the archive only (retention): the feed starts there.`));
    }, () => { history = false; });
    btn.addEventListener('click', () => {
      if (f.paused) { f.resume(); btn.textContent = 'Pause'; status.textContent = 'live'; } else { f.pause(); btn.textContent = 'Resume'; status.textContent = 'paused'; }
      btn.setAttribute('aria-pressed', String(f.paused));
    });
    setTimeout(() => { if (!list.children.length) status.textContent = `live (${f.mode}), no events yet`; }, 1500);
    return h('section', {class: 'panel'}, h('div', {class: 'row'}, h('h2', {}, opts.title), btn, status), list);
  }

  // startSeq is where a long feed starts showing: a little before the ledger head.
  async function startSeq(back) {
    try {
      const r = await api('GET', '/readyz');
      return Math.max(0, ((r && r.backend && r.backend.ledger_head) || 0) - back);
    } catch { return 0; }
  }

  // ---- pages ---------------------------------------------------------------

  function signIn(view) {
    setNav(null);
    const frag = document.getElementById('signin').content.cloneNode(true);
    view.replaceChildren(frag);
    const sec = view.querySelector('.signin');
    const form = document.getElementById('signin-form');
    form.addEventListener('change', () => sec.classList.toggle('agent', form.mode.value === 'agent'));
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      const err = document.getElementById('signin-error');
      err.textContent = '';
      const a = {mode: form.mode.value, token: form.token.value.trim()};
      if (a.mode === 'agent') { a.project = form.project.value.trim(); a.agent = form.agent.value.trim(); }
      auth = a;
      try {
        if (a.mode === 'admin') await api('GET', '/admin/v1/projects');
        else await api('GET', `${pp(a.project)}/agents/${enc(a.agent)}`);
      } catch (e) {
        auth = null;
        err.textContent = e instanceof APIError ? `${e.status} ${e.name}: ${e.message}` : String(e);
        return;
      }
      sessionStorage.setItem(AUTH_KEY, JSON.stringify(a));
      clearTimeout(flash.t);
      document.getElementById('flash').replaceChildren(); // a refusal of an earlier try no longer holds
      form.token.value = '';
      if (location.hash === '#/' || location.hash === '') route(); else location.hash = '#/';
    });
    form.querySelector('input[name=token]').focus();
  }

  async function loadProjects() {
    if (auth.mode === 'agent') { projects = [auth.project]; return; }
    const r = await api('GET', '/admin/v1/projects');
    projects = r.items.map((p) => p.project_id);
  }

  function setNav(project, section) {
    const nav = document.getElementById('nav');
    document.getElementById('signout').hidden = !auth;
    const ov = document.getElementById('overview-link');
    ov.hidden = !auth || auth.mode !== 'admin';
    if (section === 'overview') ov.setAttribute('aria-current', 'page'); else ov.removeAttribute('aria-current');
    document.getElementById('who').textContent = !auth ? '' : auth.mode === 'admin' ? 'signed in as admin' : `signed in as agent ${auth.agent} of ${auth.project}`;
    nav.hidden = !auth || !project;
    if (!project) return;
    const sel = document.getElementById('project');
    const list = projects.includes(project) ? projects : projects.concat([project]);
    sel.replaceChildren(...list.map((p) => h('option', {value: p, selected: p === project}, p)));
    sel.disabled = list.length < 2;
    for (const a of nav.querySelectorAll('[data-nav]')) {
      const s = a.dataset.nav;
      a.href = s === 'stuck' ? link(project) : link(project, s);
      if (s === section) a.setAttribute('aria-current', 'page'); else a.removeAttribute('aria-current');
    }
  }

  async function home(view) {
    setNav(null);
    if (auth.mode === 'agent') { location.replace(link(auth.project)); return; }
    view.replaceChildren(h('h1', {}, 'Projects'), h('p', {class: 'muted'}, 'Every project with an event on the ledger. ',
      h('a', {href: '#/overview', id: 'home-overview'}, 'How has the service been this last hour?')));
    if (!projects.length) { view.append(h('p', {}, 'No project yet. Register an agent (see the README walk-through) and it appears here.')); return; }
    view.append(h('ul', {class: 'cards', id: 'projects'}, projects.map((p) => h('li', {class: 'card'}, h('a', {href: link(p)}, p)))));
  }

  // stuck is the first page of a project: what does not move, and why.
  // Each category is read with the Turn list's own filters, so every Turn
  // read is one of it: queued Turns (state=queued), claimed ones for expired
  // claims (state=claimed), pending stops (state=claimed and
  // stop_requested_only: a stop asked of a Turn that is not claimed stops it
  // at once). Each list is read at most `pages` pages of `limit` (the route's
  // ?limit= and ?pages=, 500 and 4 by default); every list that goes on
  // beyond that is named in a note, with a link to the rest.
  async function stuck(view, p, q) {
    setNav(p, 'stuck');
    const limit = intParam(q, 'limit', 1, 500, 500), max = intParam(q, 'pages', 1, 64, 4);
    view.replaceChildren(h('h1', {}, `Stuck work in ${p}`), h('p', {class: 'muted'}, 'loading…'));
    const turns = `${pp(p)}/projection/turns`;
    const [dir, queued, claimed, stops, ready] = await Promise.all([
      api('GET', `${pp(p)}/projection/agents${qs({limit: 500})}`),
      pages(turns, {state: 'queued', limit}, max),
      pages(turns, {state: 'claimed', limit}, max),
      pages(turns, {state: 'claimed', stop_requested_only: 'true', limit}, max),
      api('GET', '/readyz').catch((e) => ({error: e.message})),
    ]);
    // The directory answers at most 500 agents (projection/agents has no
    // cursor): a target beyond them is read on its own, up to 100 of them.
    const agents = new Map(dir.items.map((a) => [a.agent_id, a]));
    const missing = [...new Set(queued.items.map((t) => t.target_agent.agent_id))].filter((id) => !agents.has(id));
    await Promise.all(missing.slice(0, 100).map((id) => api('GET', `${pp(p)}/agents/${enc(id)}`).then((a) => agents.set(id, a), () => {})));
    const unread = missing.length > 100 ? new Set(missing.slice(100)) : new Set();
    const now = Date.now();
    const blocked = [];
    for (const t of queued.items) {
      const id = t.target_agent.agent_id;
      const a = agents.get(id);
      const why = [];
      if (unread.has(id)) why.push('agent not read');
      else if (!a) why.push('unknown agent');
      else {
        if (!a.enabled) why.push('disabled');
        if (a.drained) why.push('drained');
        if (!a.accepts_work) why.push('not accepting work');
        if (a.free_capacity <= 0) why.push('at capacity');
        if (a.presence !== 'online') why.push(a.presence === 'never' ? 'never seen' : 'offline');
      }
      if (why.length) blocked.push({t, a, why});
    }
    const expired = claimed.items.filter((t) => t.claim && Date.parse(t.claim.expires_at) < now);
    const pendingStops = stops.items.filter((t) => t.state !== 'finished');
    const lag = ready.projections ? ready.projections.lag : null;
    const diags = [];
    for (const d of [dir, queued, claimed, stops].flatMap((l) => l.diagnostics || [])) {
      if (!diags.some((x) => x.code === d.code && x.message === d.message)) diags.push(d);
    }

    // The lists read only in part, each with where the reading stopped.
    const cut = [];
    const cutList = (id, list, what, filters) => {
      if (!list.complete) cut.push({id, what, n: list.items.length, href: link(p, 'turns') + qs(Object.assign({}, filters, {after: list.next, order: 'oldest'}))});
    };
    cutList('queued', queued, 'queued Turns (for targets that cannot take them)', {state: 'queued'});
    cutList('claimed', claimed, 'claimed Turns (for claims past their expiry)', {state: 'claimed'});
    cutList('stops', stops, 'claimed Turns with a stop requested', {state: 'claimed', stop_requested_only: 'true'});
    const more = (list, n) => list.complete ? String(n) : `${n}+`;

    const card = (n, label, href, warn) => h(href ? 'a' : 'div', {class: 'card ' + (n !== '0' && n !== 0 ? (warn ? 'warn' : '') : 'good'), href}, h('div', {class: 'n'}, n), h('div', {}, label));
    view.replaceChildren(
      h('h1', {}, `Stuck work in ${p}`),
      h('div', {class: 'row'}, h('span', {class: 'muted', id: 'stuck-asof'}, `As of ${new Date().toLocaleTimeString()}.`),
        h('button', {type: 'button', class: 'quiet', id: 'refresh', onclick: () => route()}, 'Refresh')),
      h('div', {class: 'cards', id: 'stuck-summary'},
        card(more(queued, blocked.length), `queued Turns that cannot start (of ${more(queued, queued.items.length)} queued)`, link(p, 'turns') + '?state=queued', true),
        card(more(claimed, expired.length), 'claims past expiry awaiting release', link(p, 'turns') + '?state=claimed', true),
        card(more(stops, pendingStops.length), 'stops requested, not yet stopped', link(p, 'turns') + '?state=claimed&stop_requested_only=true', true),
        card(lag === null ? '?' : lag, 'projection lag (events)', null, true)),
      cut.length || unread.size ? h('section', {class: 'panel note', id: 'stuck-cut'},
        h('h2', {}, 'Not every Turn was read'),
        h('p', {}, `Each list is read at most ${max} page(s) of ${limit} Turn(s). These go on beyond that, so their counts above are lower bounds:`),
        h('ul', {}, cut.map((c) => h('li', {'data-list': c.id}, `${c.what}: ${c.n.toLocaleString()} read; `, h('a', {href: c.href}, 'the rest in the Turns list'))),
          unread.size ? h('li', {'data-list': 'agents'}, `targets: the directory answers at most 500 agents and ${unread.size} more were not looked up`) : ''),
        max < 64 ? h('p', {}, h('a', {id: 'read-more', href: link(p) + qs({limit: limit === 500 ? '' : limit, pages: Math.min(64, max * 4)})}, `Read up to ${Math.min(64, max * 4)} pages of each`)) : '') : '',
      diags.length ? h('div', {class: 'panel'}, h('h2', {}, 'Diagnostics'), h('ul', {}, diags.map((d) => h('li', {}, h('code', {}, d.code), ' ', d.message)))) : '',
      ready.projections && ready.projections.failing ? h('p', {class: 'error'}, 'The projector is failing: ' + ready.projections.last_error) : '',
      ready.retention && ready.retention.enabled ? h('p', {class: 'muted', id: 'retention'}, `Retention keeps ${ready.retention.retain_finished}: the feeds begin at #${ready.retention.horizon_ledger_seq || 1}, the archive holds ${((ready.retention.archive_bytes || 0) / 1048576).toFixed(1)} MiB, last run ${ready.retention.last_run_at ? ago(ready.retention.last_run_at) : 'not yet'}${ready.retention.last_error ? ' (failed: ' + ready.retention.last_error + ')' : ''}.`) : '',
      section('Queued Turns whose target cannot take them', 'blocked', blocked.length === 0 ? 'None: every queued Turn has an admitting, online target with free capacity.' :
        table(['Turn', 'Kind', 'Target', 'Why', 'Queued since'], blocked.map(({t, a, why}) => [
          turnLink(p, t.turn_id), t.turn_kind, agentLink(p, t.target_agent.agent_id),
          h('span', {class: 'row why'}, why.map((w) => h('span', {class: 'badge reason', title: w === 'offline' && a && a.last_seen_at ? `last seen ${a.last_seen_at}` : null}, w))),
          when(t.updated_at)]))),
      section('Claims past their expiry', 'expired', [
        expired.length === 0 ? h('p', {class: 'muted'}, 'None.') :
          table(['Turn', 'Holder', 'Expired'], expired.map((t) => [turnLink(p, t.turn_id), agentLink(p, t.claim.agent_id), countdown(t.claim.expires_at)])),
        h('p', {class: 'muted'}, ready.reaper && ready.reaper.enabled ? `The reaper releases expired claims every ${ready.reaper.interval}.` : 'The reaper is off: expired claims wait for a reconcile.'),
        h('div', {class: 'actions'}, h('button', {type: 'button', id: 'reconcile', onclick: () =>
          act('Reconcile expired claims', `Release every expired claim of ${p}? Their Turns go back to the queue (or stop, when a stop was requested).`, 'Reconcile',
            async () => { const r = await api('POST', `${pp(p)}/claims:reconcile-expired`, {}); const n = (r.released_turn_ids || []).length; return `Released ${n} expired claim(s).`; }, () => route())}, 'Reconcile expired claims'))]),
      section('Stops requested, not yet stopped', 'stops', pendingStops.length === 0 ? 'None.' :
        table(['Turn', 'State', 'Holder', 'Asked'], pendingStops.map((t) => [turnLink(p, t.turn_id), badge(t.state), t.claim ? agentLink(p, t.claim.agent_id) : '—', t.stop_requested_at ? ago(t.stop_requested_at) : '—']))));
  }

  function section(title, id, body) {
    return h('section', {class: 'panel', id}, h('h2', {}, title), typeof body === 'string' ? h('p', {class: 'muted'}, body) : body);
  }

  function table(cols, rows, id) {
    return h('div', {class: 'scroll'}, h('table', {class: 'responsive', id},
      h('thead', {}, h('tr', {}, cols.map((c) => h('th', {scope: 'col'}, c)))),
      h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c, i) => h('td', {'data-label': cols[i]}, c)))))));
  }

  function ago(t) {
    const s = Math.round((Date.now() - Date.parse(t)) / 1000);
    return h('span', {title: t}, s < 90 ? `${s} s ago` : s < 5400 ? `${Math.round(s / 60)} min ago` : `${Math.round(s / 3600)} h ago`);
  }

  // countdown is refreshed every second by the ticker below.
  function countdown(until) {
    const el = h('span', {class: 'countdown', 'data-until': until, title: until});
    tickCountdown(el);
    return el;
  }
  function tickCountdown(el) {
    const s = Math.round((Date.parse(el.dataset.until) - Date.now()) / 1000);
    el.textContent = s >= 0 ? `expires in ${s} s` : `expired ${-s} s ago`;
    el.classList.toggle('late', s < 0);
  }
  setInterval(() => document.querySelectorAll('.countdown').forEach(tickCountdown), 1000);

  async function agentsPage(view, p) {
    setNav(p, 'agents');
    const dir = await api('GET', `${pp(p)}/projection/agents${qs({limit: 500})}`);
    view.replaceChildren(h('h1', {}, `Agents of ${p}`),
      dir.items.length === 0 ? h('p', {}, 'No agent registered.') :
        table(['Agent', 'Role', 'Capabilities', 'Admission', 'Capacity used / free', 'Presence'], dir.items.map((a) => [
          agentLink(p, a.agent_id), a.role, a.capabilities.join(', ') || '—',
          h('span', {class: 'row'}, a.enabled ? '' : badge('disabled'), a.drained ? badge('drained') : '', !a.accepts_work ? badge('not accepting', 'stopped') : '', a.admitting ? badge('admitting', 'online') : ''),
          `${a.active_claims} / ${a.free_capacity} (of ${a.capacity})`, badge(a.presence)]), 'agents-table'));
  }

  async function agentPage(view, p, id) {
    setNav(p, 'agents');
    const a = await api('GET', `${pp(p)}/agents/${enc(id)}`);
    const body = {agent: {project_id: p, agent_id: id}, requested_by: actor(p, id), meta: {note: 'from the web console'}, trace: null};
    view.replaceChildren(
      h('h1', {}, `Agent ${id}`),
      h('div', {class: 'grid'},
        h('section', {class: 'panel'}, h('h2', {}, 'Snapshot'), h('dl', {class: 'kv'},
          kv('Role', a.role), kv('Description', a.description || '—'), kv('Presence', badge(a.presence)), kv('Last seen', when(a.last_seen_at)),
          kv('Enabled', a.enabled ? 'yes' : badge('disabled')), kv('Accepts work', a.accepts_work ? 'yes' : 'no'), kv('Drained', a.drained ? badge('drained') : 'no'),
          kv('Capacity', `${a.active_claims} used, ${a.free_capacity} free, of ${a.capacity}`),
          kv('Capabilities', a.capabilities.join(', ') || '—'), kv('Grants', a.grants.join(', ') || '—'),
          kv('Registered', when(a.registered_at)), kv('Provenance', `${a.provenance.kind} ${a.provenance.external_ref}`), kv('ledger_seq', a.ledger_seq)),
        h('h3', {}, 'Public metadata'), json(a.public_metadata),
        h('div', {class: 'actions'},
          h('a', {class: 'button', href: link(p, 'turns') + qs({target_agent_id: id})}, 'Turns targeting it'),
          a.drained
            ? h('button', {type: 'button', id: 'resume-agent', onclick: () => act('Resume agent', `Admit new Turns to ${id} again?`, 'Resume', () => api('POST', `${pp(p)}/management/agents/${enc(id)}:resume`, body), () => route())}, 'Resume admitting')
            : h('button', {type: 'button', class: 'danger', id: 'drain-agent', onclick: () => act('Drain agent', `Stop admitting new Turns to ${id}? Its queued Turns stay queued until it is resumed.` + (auth.mode === 'admin' ? ` (requested_by: ${id})` : ''), 'Drain', () => api('POST', `${pp(p)}/management/agents/${enc(id)}:drain`, body), () => route())}, 'Drain'))),
        feedPanel(p, `${pp(p)}/agents/${enc(id)}/feed`, await startSeq(500), {title: 'Agent feed (live)', id: 'agent-feed', self: id})));
  }

  // kv is a term and its value; field, when given, names the value
  // (data-field) for tests and styles.
  function kv(k, v, field) { return [h('dt', {}, k), h('dd', {'data-field': field}, v === undefined || v === null ? '—' : v)]; }

  async function turnsPage(view, p, q) {
    setNav(p, 'turns');
    const f = {state: q.get('state') || '', outcome: q.get('outcome') || '', turn_kind: q.get('turn_kind') || '',
      priority: PRIORITIES.includes(q.get('priority')) ? q.get('priority') : '',
      target_agent_id: q.get('target_agent_id') || '', tag: q.get('tag') || '',
      awaiting_input: q.get('awaiting_input') === 'true' ? 'true' : '',
      stop_requested_only: q.get('stop_requested_only') === 'true' ? 'true' : '', limit: q.get('limit') || '50'};
    const after = q.get('after') || '';
    // Newest first unless the route asks for oldest (the API's own default
    // is oldest first: the console asks for order=newest).
    const order = q.get('order') === 'oldest' ? 'oldest' : 'newest';
    const hashOrder = order === 'oldest' ? 'oldest' : '';
    const opt = (v, cur) => h('option', {value: v, selected: v === cur}, v || 'any');
    const form = h('form', {class: 'filters', id: 'turn-filters', role: 'search'},
      h('label', {}, 'State', h('select', {name: 'state'}, ['', ...STATES].map((v) => opt(v, f.state)))),
      h('label', {}, 'Outcome', h('select', {name: 'outcome'}, ['', ...OUTCOMES].map((v) => opt(v, f.outcome)))),
      h('label', {}, 'Priority', h('select', {name: 'priority', title: '1 runs first, 5 last'}, ['', ...PRIORITIES].map((v) => opt(v, f.priority)))),
      h('label', {}, 'Kind', h('input', {name: 'turn_kind', value: f.turn_kind, size: 12, spellcheck: 'false'})),
      h('label', {}, 'Target agent', h('input', {name: 'target_agent_id', value: f.target_agent_id, size: 12, spellcheck: 'false'})),
      h('label', {}, 'Tag', h('input', {name: 'tag', value: f.tag, size: 12, spellcheck: 'false'})),
      h('label', {class: 'check'}, h('input', {type: 'checkbox', name: 'awaiting_input', checked: f.awaiting_input === 'true'}), 'waiting for input'),
      h('label', {class: 'check'}, h('input', {type: 'checkbox', name: 'stop_requested_only', checked: f.stop_requested_only === 'true'}), 'stop requested'),
      h('label', {}, 'Per page', h('select', {name: 'limit'}, [...new Set(['25', '50', '100', '200', f.limit])].map((v) => opt(v, f.limit)))),
      h('button', {type: 'submit'}, 'Filter'));
    form.addEventListener('submit', (ev) => {
      ev.preventDefault();
      const n = {state: form.state.value, outcome: form.outcome.value, priority: form.priority.value, turn_kind: form.turn_kind.value.trim(),
        target_agent_id: form.target_agent_id.value.trim(), tag: form.tag.value.trim(), awaiting_input: form.awaiting_input.checked ? 'true' : '',
        stop_requested_only: form.stop_requested_only.checked ? 'true' : '', limit: form.limit.value === '50' ? '' : form.limit.value, order: hashOrder};
      location.hash = link(p, 'turns') + qs(n);
    });
    view.replaceChildren(h('h1', {}, `Turns of ${p}`), form, h('p', {class: 'muted'}, 'loading…'));
    let page;
    try {
      page = await api('GET', `${pp(p)}/projection/turns` + qs(Object.assign({}, f, {after_ledger_seq: after, order})));
    } catch (e) { view.lastChild.replaceWith(errorBox(e)); return; }
    const here = Object.assign({}, f, {limit: f.limit === '50' ? '' : f.limit, order: hashOrder});
    // The order control flips the order and starts again from the first page.
    const sort = h('a', {class: 'button quiet', id: 'sort-order', 'data-order': order, title: 'Change the order',
      href: link(p, 'turns') + qs(Object.assign({}, here, {order: order === 'newest' ? 'oldest' : ''}))},
    order === 'newest' ? 'Newest first ↓' : 'Oldest first ↑');
    const pager = h('nav', {class: 'pager', 'aria-label': 'Pages'},
      after ? h('a', {class: 'button quiet', href: link(p, 'turns') + qs(here)}, 'First page') : '',
      page.has_more ? h('a', {class: 'button', id: 'next-page', href: link(p, 'turns') + qs(Object.assign({}, here, {after: page.next_after_ledger_seq}))}, 'Next page') : '',
      h('span', {class: 'muted'}, `${page.items.length} shown` + (after ? `, dispatched ${order === 'newest' ? 'before' : 'after'} ledger_seq ${after}` : '') + (page.has_more ? '; more follow' : '; end of list')));
    view.lastChild.replaceWith(
      h('div', {class: 'row list-head'}, h('span', {class: 'muted'}, 'Order of dispatch:'), sort),
      page.items.length === 0 ? h('p', {id: 'turns-empty'}, page.has_more ? 'None on this stretch of the ledger; follow Next page.' : 'No Turn matches.') :
        table(['Turn', 'Kind', 'Priority', 'State', 'Outcome', 'Target', 'Requested by', 'Tags', 'Attempts', 'Updated'], page.items.map((t) => [
          turnLink(p, t.turn_id), t.turn_kind, h('span', {class: 'priority'}, t.priority),
          h('span', {class: 'row'}, badge(t.state), t.stop_requested ? badge('stop requested', 'stop') : '', t.awaiting_input ? badge('waiting for input', 'input') : ''),
          t.outcome ? badge(t.outcome) : '—', agentLink(p, t.target_agent.agent_id), agentLink(p, t.requested_by.agent_id),
          tagList(p, t.tags), t.max_attempts ? `${t.attempts} / ${t.max_attempts}` : t.attempts, when(t.updated_at)]), 'turns-table'),
      pager, bulkPanel(p, f, page.items));
  }

  // bulkPanel offers Stop all and Retry all for the list's filter, through
  // management/turns:bulk-stop and :bulk-retry. Their filter is the list's
  // (state, outcome, kind, target, tag, waiting for input); a list also
  // filtered by priority or stop requested offers neither, since the bulk
  // action would match more than the list shows. Each call acts on the
  // oldest matching Turns first, at most BULK_LIMIT; the answer says
  // whether more match, and the panel then offers to go on. requested_by:
  // an agent acts as itself; the admin names the requester of the first
  // Turn of the page (the API wants an existing agent there).
  function bulkPanel(p, f, items) {
    const filter = {};
    for (const k of ['state', 'outcome', 'turn_kind', 'target_agent_id', 'tag']) if (f[k]) filter[k] = f[k];
    if (f.awaiting_input === 'true') filter.awaiting_input = true;
    const described = Object.entries(filter).map(([k, v]) => `${k}=${v}`).join(', ') || 'no filter: every Turn';
    const narrower = f.priority || f.stop_requested_only ? 'Remove the priority and stop requested filters to act on the Turns of a filter: bulk actions filter by state, outcome, kind, target, tag and waiting for input.' : '';
    const by = items.length ? actor(p, items[0].requested_by.agent_id) : auth.mode === 'agent' ? actor(p) : null;
    const stoppable = items.filter((t) => t.state !== 'finished' && !(t.state === 'claimed' && t.stop_requested)).length;
    const retryable = items.filter((t) => t.state === 'finished' && RETRYABLE.includes(t.outcome)).length;
    const noStop = narrower || !by || f.state === 'finished' || f.outcome ? true : false;
    const noRetry = narrower || !by || (f.state && f.state !== 'finished') || (f.outcome && !RETRYABLE.includes(f.outcome)) ? true : false;
    const body = {requested_by: by, filter, limit: BULK_LIMIT, reason: 'from the web console'};
    const here = location.hash;
    const run = (verb) => {
      const stop = verb === 'stop';
      const n = stop ? stoppable : retryable;
      const what = stop ? `Stop the ${n} Turn(s) of this page that match ${described}?` :
        `Retry the ${n} Turn(s) of this page that match ${described}? (A Turn retried before is skipped.)`;
      const more = ` The server acts on the oldest matching Turns first, up to ${BULK_LIMIT} per call, and says whether more match.` +
        (auth.mode === 'admin' ? ` As admin, the request names ${by.agent_id} (the requester of the page's first Turn) in requested_by.` : '');
      act(stop ? 'Stop all' : 'Retry all', what + more, stop ? 'Stop all' : 'Retry all', () => bulkCall(p, verb, body, here), () => route());
    };
    let result = '';
    if (lastBulk && lastBulk.hash === here) {
      const b = lastBulk;
      lastBulk = null; // shown once, after the list is read again
      result = h('p', {id: 'bulk-result', role: 'status'}, `${b.verb === 'stop' ? 'Stopped' : 'Retried'} ${b.n} Turn(s).`,
        b.more ? [' More match: ', h('button', {type: 'button', id: 'bulk-continue', onclick: () =>
          act(b.verb === 'stop' ? 'Stop all' : 'Retry all', `Go on with the next ${BULK_LIMIT} matching ${described}?`, 'Go on', () => bulkCall(p, b.verb, b.body, here), () => route())}, 'Go on')] : ' None left to act on.');
    }
    return h('section', {class: 'panel', id: 'bulk'}, h('h2', {}, 'Bulk actions'),
      h('p', {class: 'muted'}, `On every Turn that matches ${described}, not only this page's: the oldest first, up to ${BULK_LIMIT} a call. ` +
        (auth.mode === 'admin' ? 'As admin, the console names the requester of the first Turn shown in requested_by.' : `As ${auth.agent}, which needs the management grant.`)),
      narrower ? h('p', {class: 'muted'}, narrower) : '',
      h('div', {class: 'actions'},
        h('button', {type: 'button', class: 'danger', id: 'bulk-stop', disabled: noStop, onclick: () => run('stop')}, 'Stop all'),
        h('button', {type: 'button', id: 'bulk-retry', disabled: noRetry, onclick: () => run('retry')}, 'Retry all')),
      result);
  }

  // bulkCall makes one bulk call and keeps its answer for the list at hash.
  async function bulkCall(p, verb, body, hash) {
    lastBulk = null;
    const r = await api('POST', `${pp(p)}/management/turns:bulk-${verb}`, body);
    const ids = verb === 'stop' ? r.stopped : r.retried;
    lastBulk = {hash, verb, n: ids.length, more: r.has_more, body};
    return `${verb === 'stop' ? 'Stopped' : 'Retried'} ${ids.length} Turn(s)` + (r.has_more ? '; more match.' : '.');
  }

  async function turnPage(view, p, id) {
    setNav(p, 'turns');
    const path = `${pp(p)}/turns/${enc(id)}`;
    const snap = h('section', {class: 'panel', id: 'turn-snapshot'});
    const tree = h('section', {class: 'panel', id: 'lineage'});
    const ctx = h('section', {class: 'panel', id: 'turn-context'});
    let refreshing = null;
    async function refresh() {
      const [t, lin, c] = await Promise.all([
        api('GET', path), api('GET', `${pp(p)}/projection/turns/${enc(id)}/lineage${qs({limit: 500})}`), api('GET', `${path}/context${qs({limit: 200})}`)]);
      renderSnapshot(snap, p, t, refresh);
      renderLineage(tree, p, id, lin.items);
      ctx.replaceChildren(h('h2', {}, 'Semantic context'), c.items.length === 0 ? h('p', {class: 'muted'}, 'No record yet.') :
        h('ol', {class: 'feed'}, c.items.map((r) => h('li', {'data-turn-seq': r.turn_seq}, h('span', {class: 'seq', title: 'turn_seq'}, '#' + r.turn_seq),
          h('span', {class: 'what'}, h('span', {class: 'type'}, r.role), ' by ', agentLink(p, r.agent_id)),
          h('time', {class: 'at muted', datetime: r.at, title: r.at}, new Date(r.at).toLocaleTimeString()),
          h('details', {open: true}, h('summary', {}, 'payload'), json(r.payload))))),
        c.has_more ? h('p', {class: 'muted'}, 'More records follow; the first 200 are shown.') : '');
    }
    view.replaceChildren(h('h1', {}, 'Turn ', h('span', {class: 'mono'}, id)), h('p', {class: 'muted'}, 'loading…'));
    await refresh();
    const feed = feedPanel(p, `${path}/feed`, 0, {title: 'Turn feed (live)', id: 'turn-feed', self: id, onItems: () => {
      // A new event may change the snapshot and the tree: read them again.
      if (!refreshing) refreshing = refresh().catch((e) => flash(e.message, true)).finally(() => { refreshing = null; });
    }});
    view.replaceChildren(h('h1', {}, 'Turn ', h('span', {class: 'mono'}, id)), h('div', {class: 'grid'}, snap, h('div', {}, tree, feed)), ctx);
  }

  function renderSnapshot(el, p, t, refresh) {
    const by = actor(p, t.requested_by.agent_id);
    const body = {requested_by: by, meta: {note: 'from the web console'}, trace: null};
    const onBehalf = auth.mode === 'admin' ? ` As admin, the request names ${by.agent_id} (the Turn's requester) in requested_by.` : '';
    const canStop = t.state !== 'finished' && !t.stop_requested;
    const canRetry = t.state === 'finished' && RETRYABLE.includes(t.outcome);
    let retried = null; // the new Turn of a retry, to go to
    el.replaceChildren(h('h2', {}, 'Snapshot'),
      h('dl', {class: 'kv'},
        kv('State', h('span', {class: 'row'}, h('span', {id: 'turn-state', class: `badge ${t.state}`}, t.state), t.stop_requested ? badge('stop requested', 'stop') : '')),
        kv('Outcome', t.outcome ? h('span', {id: 'turn-outcome', class: `badge ${t.outcome}`}, t.outcome) : '—'),
        kv('Kind', t.turn_kind), kv('Target', agentLink(p, t.target_agent.agent_id)), kv('Requested by', agentLink(p, t.requested_by.agent_id)),
        kv('Authority', t.authority.mode + (t.authority.request_id ? ` (${t.authority.request_id})` : '')),
        kv('Parent', t.parent ? turnLink(p, t.parent.turn_id) : '—'), kv('Root', t.root_turn_id === t.turn_id ? 'itself' : turnLink(p, t.root_turn_id)), kv('Depth', t.depth),
        kv('Dispatch key', h('code', {}, t.dispatch_key)), kv('Tags', tagList(p, t.tags), 'tags'), kv('Records', t.last_turn_seq),
        kv('Created', when(t.created_at)), kv('Updated', when(t.updated_at)), kv('Finished', when(t.finished_at)),
        kv('Stop asked', t.stop_requested_at ? when(t.stop_requested_at) : '—'), kv('ledger_seq', t.ledger_seq)),
      h('h3', {}, 'Schedule'),
      h('dl', {class: 'kv', id: 'turn-schedule'},
        kv('Priority', t.priority, 'priority'), kv('Not before', when(t.not_before), 'not_before'),
        kv('Claim by', when(t.claim_by), 'claim_by'), kv('Deadline', when(t.deadline), 'deadline'),
        kv('Attempts', attempts(t), 'attempts'),
        t.retry_backoff ? kv('Retry backoff', backoff(t.retry_backoff), 'retry_backoff') : '',
        t.retry_of ? kv('Retry of', turnLink(p, t.retry_of), 'retry_of') : ''),
      h('h3', {}, 'Claim'),
      t.claim ? h('dl', {class: 'kv', id: 'turn-claim'}, kv('Holder', agentLink(p, t.claim.agent_id)), kv('Claim id', h('code', {}, t.claim.claim_id)),
        kv('Claimed', when(t.claim.claimed_at)), kv('Expires', [when(t.claim.expires_at), ' ', countdown(t.claim.expires_at)])) : h('p', {class: 'muted'}, 'Not claimed.'),
      h('div', {class: 'actions'},
        canStop ? h('button', {type: 'button', class: 'danger', id: 'stop-turn', onclick: () => act('Stop Turn',
          `Request a stop of ${t.turn_id}? ${t.state === 'claimed' ? 'Its claim holder sees the request and should stop; the Turn stays claimed until then.' : 'It finishes now with outcome stopped.'}${onBehalf}`,
          'Stop', () => api('POST', `${pp(p)}/management/turns/${enc(t.turn_id)}:stop`, body), refresh)}, 'Stop') : '',
        t.state !== 'finished' ? h('button', {type: 'button', class: 'danger', id: 'stop-tree', onclick: () => act('Stop tree',
          `Stop ${t.turn_id} and every Turn under it that is not finished, all or none? A claimed Turn gets a stop request its holder sees; the others finish now with outcome stopped. A child dispatched under the tree afterwards is refused.${onBehalf}`,
          'Stop tree', () => api('POST', `${pp(p)}/management/turns/${enc(t.turn_id)}:stop`, Object.assign({}, body, {cascade: true})).then(() => 'Stop tree: asked of the Turn and its descendants.'), refresh)}, 'Stop tree') : '',
        t.state === 'suspended' ? h('button', {type: 'button', id: 'resume-turn', onclick: () => act('Resume Turn', `Put ${t.turn_id} back in the queue?${onBehalf}`, 'Resume',
          () => api('POST', `${pp(p)}/turns/${enc(t.turn_id)}:resume`, body), refresh)}, 'Resume') : '',
        canRetry ? h('button', {type: 'button', id: 'retry-turn', onclick: () => act('Retry Turn',
          `Dispatch a new Turn from ${t.turn_id}, with its target, kind, input and schedule? A Turn is retried once.${onBehalf}`, 'Retry',
          async () => { retried = await api('POST', `${pp(p)}/turns/${enc(t.turn_id)}:retry`, body); return `Retried as ${retried.turn_id}.`; },
          () => { if (retried) location.hash = link(p, 'turns', retried.turn_id); else return refresh(); })}, 'Retry') : ''),
      t.awaiting_input ? keepPanel(el, '#awaiting-input', t.ledger_seq, () => inputPanel(p, t, refresh)) : '',
      h('h3', {}, 'Input'), json(t.input),
      ...(t.final_payload !== null && t.final_payload !== undefined ? [h('h3', {}, `Final payload (${t.final_record_role || 'no role'})`), json(t.final_payload)] : []));
  }

  // keepPanel returns the panel sel that el already shows for the same
  // version of the Turn (key), so that a snapshot drawn again while the
  // operator fills a form keeps what was typed; else a new one from make.
  function keepPanel(el, sel, key, make) {
    const old = el.querySelector(sel);
    if (old && old.dataset.key === String(key)) return old;
    const panel = make();
    panel.dataset.key = String(key);
    return panel;
  }

  // inputPanel shows what a Turn suspended for input asks (prompt, schema,
  // input_by) and answers it through POST …/turns/{id}:provide-input with
  // the console's credential (the admin, or an agent that is the Turn's
  // requester or has the management grant). A simple schema — an object
  // whose properties are strings, numbers, integers or booleans, an enum
  // as a select — becomes a form; any other answer is written as JSON.
  function inputPanel(p, t, refresh) {
    const w = t.awaiting_input;
    const fields = simpleSchema(w.schema);
    const error = h('p', {class: 'error', role: 'alert', id: 'input-error'});
    const form = h('form', {class: 'input-form', id: 'input-form', novalidate: fields ? null : true});
    if (fields) {
      for (const fd of fields) {
        const id = 'input-' + fd.name;
        const label = h('span', {}, fd.title, fd.required ? h('span', {class: 'req', title: 'required'}, ' *') : '');
        let ctl;
        if (fd.enum) {
          ctl = h('select', {id, name: fd.name, required: fd.required}, fd.required ? '' : h('option', {value: ''}, '—'),
            fd.enum.map((v, i) => h('option', {value: String(i), selected: fd.default === v}, String(v))));
        } else if (fd.type === 'boolean') {
          ctl = h('input', {id, name: fd.name, type: 'checkbox', checked: fd.default === true});
        } else if (fd.type === 'number' || fd.type === 'integer') {
          ctl = h('input', {id, name: fd.name, type: 'number', step: fd.type === 'integer' ? '1' : 'any', required: fd.required,
            min: fd.minimum, max: fd.maximum, value: fd.default});
        } else {
          ctl = h('input', {id, name: fd.name, type: 'text', required: fd.required, minlength: fd.minLength, maxlength: fd.maxLength, value: fd.default, spellcheck: 'false'});
        }
        form.append(fd.type === 'boolean' && !fd.enum ? h('label', {class: 'check', for: id}, ctl, label) :
          h('label', {for: id}, label, ctl), fd.description ? h('p', {class: 'muted hint'}, fd.description) : '');
      }
    } else {
      form.append(h('label', {for: 'input-json'}, 'Answer (a JSON object)',
        h('textarea', {id: 'input-json', name: 'json', rows: 6, spellcheck: 'false'}, '{}')));
    }
    const submit = h('button', {type: 'submit', id: 'input-submit'}, 'Send the answer');
    form.append(h('div', {class: 'actions'}, submit), error);
    form.addEventListener('submit', async (ev) => {
      ev.preventDefault();
      error.textContent = '';
      let input;
      if (fields) {
        if (!form.reportValidity()) return;
        input = {};
        for (const fd of fields) {
          const el = form.elements[fd.name];
          if (fd.enum) { if (el.value !== '') input[fd.name] = fd.enum[Number(el.value)]; }
          else if (fd.type === 'boolean') input[fd.name] = el.checked;
          else if (fd.type === 'number' || fd.type === 'integer') { if (el.value !== '') input[fd.name] = Number(el.value); }
          else if (el.value !== '' || fd.required) input[fd.name] = el.value;
        }
      } else {
        try { input = JSON.parse(form.elements.json.value); } catch (e) { error.textContent = 'Not JSON: ' + e.message; return; }
        if (!input || typeof input !== 'object' || Array.isArray(input)) { error.textContent = 'The answer must be a JSON object.'; return; }
      }
      submit.disabled = true;
      try {
        const after = await api('POST', `${pp(p)}/turns/${enc(t.turn_id)}:provide-input`, {input, meta: {note: 'from the web console'}, trace: null});
        flash(`Answer sent: the Turn is ${after.state} again.`);
        await refresh();
        mainEl.focus({preventScroll: true});
      } catch (e) {
        submit.disabled = false;
        error.textContent = e instanceof APIError ? `${e.status} ${e.name}: ${e.message}` : String(e);
      }
    });
    return h('section', {class: 'panel input-wait', id: 'awaiting-input'},
      h('h3', {}, 'Waiting for input'),
      h('p', {class: 'prompt', id: 'input-prompt'}, w.prompt),
      h('dl', {class: 'kv'}, kv('Answer by', w.input_by ? [when(w.input_by), ' ', countdown(w.input_by)] : 'no limit', 'input_by')),
      w.schema ? h('details', {}, h('summary', {}, 'schema'), json(w.schema)) : '',
      h('p', {class: 'muted'}, (auth.mode === 'admin' ? 'You answer as the admin' : `You answer as ${auth.agent} (the Turn's requester or an agent with the management grant)`) +
        '; the Turn then goes back to its queue with the answer in its context (role input). Whoever holds the input token the agent received can answer too.'),
      form);
  }

  // simpleSchema reads a JSON Schema an input form can show: an object
  // whose properties are each a string, number, integer or boolean (an enum
  // of such values too). It returns the fields, or null for any other schema.
  function simpleSchema(schema) {
    if (!schema || schema.type !== 'object' || !schema.properties || typeof schema.properties !== 'object') return null;
    const req = Array.isArray(schema.required) ? schema.required : [];
    const out = [];
    for (const [name, ps] of Object.entries(schema.properties)) {
      if (!ps || typeof ps !== 'object') return null;
      const en = Array.isArray(ps.enum) && ps.enum.length && ps.enum.every((v) => ['string', 'number', 'boolean'].includes(typeof v)) ? ps.enum : null;
      if (!en && !['string', 'number', 'integer', 'boolean'].includes(ps.type)) return null;
      const num = (v) => typeof v === 'number' ? v : undefined;
      const str = (v) => typeof v === 'string' ? v : undefined;
      const prim = (v) => ['string', 'number', 'boolean'].includes(typeof v) ? v : undefined;
      out.push({name, type: en ? typeof en[0] : ps.type, enum: en, required: req.includes(name), title: str(ps.title) || name, description: str(ps.description),
        default: prim(ps.default), minimum: num(ps.minimum), maximum: num(ps.maximum), minLength: num(ps.minLength), maxLength: num(ps.maxLength)});
    }
    return out.length ? out : null;
  }

  // renderLineage draws the lineage as a tree: ancestors from the root down,
  // the Turn itself, its descendants; each node coloured by state.
  function renderLineage(el, p, self, items) {
    const kids = new Map();
    const ids = new Set(items.map((i) => i.turn_id));
    let roots = [];
    for (const it of items) {
      if (it.parent_turn_id && ids.has(it.parent_turn_id)) {
        if (!kids.has(it.parent_turn_id)) kids.set(it.parent_turn_id, []);
        kids.get(it.parent_turn_id).push(it);
      } else roots.push(it);
    }
    const node = (it) => h('li', {'data-turn': it.turn_id, 'data-relation': it.relation},
      h('span', {class: `node ${it.state}` + (it.turn_id === self ? ' self' : '')},
        it.turn_id === self ? h('span', {class: 'mono', 'aria-current': 'page'}, it.turn_id) : turnLink(p, it.turn_id),
        h('span', {class: 'muted'}, it.turn_kind), badge(it.state), it.outcome ? badge(it.outcome) : '', h('span', {class: 'muted'}, '→ ' + it.target_agent.agent_id)),
      kids.has(it.turn_id) ? h('ul', {}, kids.get(it.turn_id).map(node)) : '');
    el.replaceChildren(h('h2', {}, 'Lineage'),
      h('ul', {class: 'tree', 'aria-label': 'Lineage tree'}, roots.map(node)),
      h('p', {class: 'muted'}, `${items.length} Turn(s): ancestors, this Turn, descendants.`));
  }

  async function feedPage(view, p) {
    setNav(p, 'feed');
    view.replaceChildren(h('h1', {}, `Live feed of ${p}`),
      h('p', {class: 'muted'}, 'Every event of the project as it is appended to the ledger, newest first. Pausing keeps your place; resuming catches up from it.'),
      feedPanel(p, `${pp(p)}/projection/feed`, await startSeq(200), {title: 'Project feed', id: 'project-feed'}));
  }

  // ---- overview: the last hour in charts ----------------------------------

  // The overview draws GET /admin/v1/trends (the instance's last hour, a
  // point a minute, oldest first) as small SVG charts of its own: bars for
  // counts per minute, stacked by series; lines for levels and durations,
  // broken where a minute has no value. The scales and labels are HTML
  // around the SVG, so the text keeps its size at any width; the SVG
  // stretches to the panel. Every bar and line carries its series and
  // values (data-series, data-v, data-values) and a <title> for pointing.
  const SVGNS = 'http://www.w3.org/2000/svg';
  function svg(tag, attrs, ...children) {
    const el = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) if (v !== undefined && v !== null) el.setAttribute(k, v);
    for (const c of children.flat()) if (c !== undefined && c !== null && c !== false) el.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return el;
  }
  const CHART_W = 600, CHART_H = 140;
  const fmtNum = (v, unit) => v === null || v === undefined ? '—' : unit === 's' ? fmtSeconds(v) : String(Math.round(v * 100) / 100);
  function fmtSeconds(v) {
    if (v < 1) return `${Math.round(v * 1000)} ms`;
    if (v < 120) return `${Math.round(v * 10) / 10} s`;
    return `${Math.round(v / 6) / 10} min`;
  }
  // niceMax rounds a chart's top up to 1, 2 or 5 times a power of ten.
  function niceMax(v) {
    if (!(v > 0)) return 1;
    const p = Math.pow(10, Math.floor(Math.log10(v)));
    return [1, 2, 5, 10].map((m) => m * p).find((m) => m >= v);
  }
  const minuteLabel = (t) => new Date(t).toLocaleTimeString([], {hour: '2-digit', minute: '2-digit'});

  // chart is one panel: title, legend with each series' last value, the
  // SVG, and the time axis. kind 'bars' stacks the series per minute;
  // 'lines' draws each series as a line.
  function chart(id, title, kind, unit, points, series) {
    const n = points.length, slot = CHART_W / Math.max(n, 1);
    const vals = series.map((sr) => points.map((p) => { const v = sr.get(p); return v === null || v === undefined ? null : Number(v); }));
    let top = 0;
    if (kind === 'bars') for (let i = 0; i < n; i++) top = Math.max(top, vals.reduce((a, v) => a + (v[i] || 0), 0));
    else for (const v of vals) for (const x of v) if (x !== null) top = Math.max(top, x);
    top = niceMax(top);
    const y = (v) => CHART_H - (v / top) * CHART_H;
    const shapes = [];
    if (kind === 'bars') {
      const base = new Array(n).fill(0);
      series.forEach((sr, k) => vals[k].forEach((v, i) => {
        if (!v) return;
        const hgt = (v / top) * CHART_H;
        shapes.push(svg('rect', {class: `s-${sr.cls}`, x: (i * slot + slot * 0.1).toFixed(2), y: (CHART_H - base[i] - hgt).toFixed(2),
          width: (slot * 0.8).toFixed(2), height: hgt.toFixed(2), 'data-series': sr.name, 'data-i': i, 'data-v': v},
        svg('title', {}, `${minuteLabel(points[i].at)} ${sr.label}: ${fmtNum(v, unit)}`)));
        base[i] += hgt;
      }));
    } else {
      series.forEach((sr, k) => {
        let run = [];
        const flush = () => {
          if (run.length === 1) shapes.push(svg('circle', {class: `s-${sr.cls}`, cx: run[0][0], cy: run[0][1], r: 2.5, 'data-series': sr.name}));
          else if (run.length) shapes.push(svg('polyline', {class: `s-${sr.cls}`, fill: 'none', points: run.map((pt) => pt.join(',')).join(' '), 'data-series': sr.name}));
          run = [];
        };
        vals[k].forEach((v, i) => { if (v === null) flush(); else run.push([((i + 0.5) * slot).toFixed(2), y(v).toFixed(2)]); });
        flush();
      });
    }
    const last = (k) => { for (let i = n - 1; i >= 0; i--) if (vals[k][i] !== null && points[i].sampled) return vals[k][i]; return null; };
    const total = (k) => vals[k].reduce((a, v) => a + (v || 0), 0);
    const legend = h('ul', {class: 'legend'}, series.map((sr, k) => h('li', {'data-series': sr.name},
      h('span', {class: `key s-${sr.cls}`, 'aria-hidden': 'true'}), `${sr.label}: `,
      h('strong', {}, kind === 'bars' ? `${fmtNum(total(k), unit)} in the hour` : `${fmtNum(last(k), unit)} now`))));
    const values = series.map((sr, k) => `${sr.label} ${kind === 'bars' ? fmtNum(total(k), unit) + ' in the hour' : fmtNum(last(k), unit) + ' last'}`).join('; ');
    return h('section', {class: 'panel chart', id, 'data-kind': kind, 'data-top': top},
      h('h2', {}, title), legend,
      h('div', {class: 'plot'},
        h('span', {class: 'top muted'}, fmtNum(top, unit)),
        svg('svg', {viewBox: `0 0 ${CHART_W} ${CHART_H}`, preserveAspectRatio: 'none', role: 'img', 'aria-label': `${title}: ${values}`},
          svg('line', {class: 'grid', x1: 0, x2: CHART_W, y1: CHART_H / 2, y2: CHART_H / 2}),
          svg('line', {class: 'axis', x1: 0, x2: CHART_W, y1: CHART_H, y2: CHART_H}), shapes)),
      h('div', {class: 'axis-labels muted'}, h('span', {}, n ? minuteLabel(points[0].at) : ''), h('span', {}, 'now')));
  }

  async function overviewPage(view) {
    setNav(null, 'overview');
    view.replaceChildren(h('h1', {}, 'Overview: the last hour'),
      h('p', {class: 'muted'}, 'This server instance, a point a minute, kept in its memory from what /metrics counts (since it started, at most an hour).'));
    if (auth.mode !== 'admin') { view.append(h('p', {id: 'overview-admin-only'}, 'The overview covers every project of the instance: sign in as the admin to see it.')); return; }
    const tr = await api('GET', '/admin/v1/trends');
    const pts = tr.points;
    const fin = (o) => (p) => p.finished[o];
    view.append(h('div', {class: 'charts', id: 'overview'},
      chart('chart-dispatched', 'Turns dispatched per minute', 'bars', '', pts, [{name: 'dispatched', label: 'dispatched', cls: 'dispatched', get: (p) => p.dispatched}]),
      chart('chart-finished', 'Turns finished per minute, by outcome', 'bars', '', pts, OUTCOMES.map((o) => ({name: o, label: o, cls: o, get: fin(o)}))),
      chart('chart-waiting', 'Queued and waiting for input', 'lines', '', pts, [
        {name: 'queued', label: 'queued', cls: 'queued', get: (p) => p.queued},
        {name: 'awaiting_input', label: 'waiting for input', cls: 'suspended', get: (p) => p.awaiting_input}]),
      chart('chart-claim-wait', 'Claim wait (dispatch to claim)', 'lines', 's', pts, [
        {name: 'claim_wait_p50', label: 'p50', cls: 'p50', get: (p) => p.claim_wait_p50_s},
        {name: 'claim_wait_p95', label: 'p95', cls: 'p95', get: (p) => p.claim_wait_p95_s}]),
      chart('chart-run', 'Run time (claim to finish)', 'lines', 's', pts, [
        {name: 'run_p50', label: 'p50', cls: 'p50', get: (p) => p.run_p50_s},
        {name: 'run_p95', label: 'p95', cls: 'p95', get: (p) => p.run_p95_s}]),
      chart('chart-lag', 'Projection lag (events)', 'lines', '', pts, [{name: 'projection_lag', label: 'lag', cls: 'lag', get: (p) => p.projection_lag_events}]),
      chart('chart-refused', 'Commands refused per minute', 'bars', '', pts, [
        {name: 'shed', label: 'shed (503)', cls: 'shed', get: (p) => p.shed},
        {name: 'throttled', label: 'throttled (429)', cls: 'throttled', get: (p) => p.throttled}])));
    // Drawn again every minute while the page is open.
    const gen = routeGen;
    const t = setTimeout(() => { if (gen === routeGen) route(); }, 60000);
    disposers.push(() => clearTimeout(t));
  }

  // ---- routing -------------------------------------------------------------

  async function route() {
    for (const d of disposers) d();
    disposers = [];
    const gen = ++routeGen;
    const hash = location.hash;
    const view = h('div', {class: 'view'});
    mainEl.replaceChildren(view);
    mainEl.setAttribute('aria-busy', 'true');
    const done = () => {
      if (gen !== routeGen) return;
      mainEl.setAttribute('aria-busy', 'false');
      mainEl.dataset.rendered = hash;
    };
    if (!auth) { signIn(view); done(); return; }
    const raw = hash.replace(/^#/, '') || '/';
    const [path, query] = raw.split('?');
    const q = new URLSearchParams(query || '');
    const parts = path.split('/').filter(Boolean).map(decodeURIComponent);
    const notFound = () => view.replaceChildren(h('h1', {}, 'Not found'), h('p', {}, h('a', {href: '#/'}, 'Back to the start')));
    try {
      if (!projects.length) await loadProjects();
      if (parts.length === 0) await home(view);
      else if (parts[0] === 'overview' && parts.length === 1) await overviewPage(view);
      else if (parts[0] === 'p' && parts.length >= 2) {
        const p = parts[1];
        if (auth.mode === 'agent' && p !== auth.project) { location.replace(link(auth.project)); return; }
        const [, , sec, id] = parts;
        if (!sec) await stuck(view, p, q);
        else if (sec === 'agents' && id) await agentPage(view, p, id);
        else if (sec === 'agents') await agentsPage(view, p);
        else if (sec === 'turns' && id) await turnPage(view, p, id);
        else if (sec === 'turns') await turnsPage(view, p, q);
        else if (sec === 'feed') await feedPage(view, p);
        else notFound();
      } else notFound();
    } catch (e) {
      view.replaceChildren(h('h1', {}, 'Could not load this page'), errorBox(e), h('p', {}, h('a', {href: '#/'}, 'Back to the start')));
    }
    done();
    if (gen === routeGen && document.activeElement === document.body) mainEl.focus({preventScroll: true});
  }

  document.getElementById('signout').addEventListener('click', () => {
    sessionStorage.removeItem(AUTH_KEY);
    auth = null;
    projects = [];
    location.hash = '#/';
    route();
  });
  document.getElementById('project').addEventListener('change', (ev) => { location.hash = link(ev.target.value); });
  // The skip link moves the focus; it must not change the hash (the route).
  document.querySelector('.skip').addEventListener('click', (ev) => { ev.preventDefault(); mainEl.focus(); });
  window.addEventListener('hashchange', route);
  route();
})();
