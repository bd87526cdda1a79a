// turnledger runtime client. No framework, no build step: see the package
// doc of authn/webclient for what it does.
"use strict";

(function () {
  const cfg = window.TURNLEDGER_CONFIG;
  const SESSION = "turnledger.session";
  const CACHE = "turnledger.cache.";
  // The execution session this tab uses: made by the server on the first
  // dial and known only to this tab (sessionStorage is per tab; a tab
  // duplicated by the browser copies it), so a reload rejoins it. Cleared
  // with the rest.
  const WS_SESSION = "turnledger.ws-session";
  // setTimeout's longest delay (2^31-1 ms, about 24.8 days): a longer one
  // overflows and fires at once.
  const MAX_TIMEOUT = 2147483647;
  const root = document.getElementById("root");

  // Everything that must stop at sign-out: requests in flight, the socket,
  // the expiry timer.
  const live = { controllers: new Set(), socket: null, timer: null, ended: false };

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
    return e;
  }

  function tokenExp(token) {
    try {
      const part = token.split(".")[1].replace(/-/g, "+").replace(/_/g, "/");
      const claims = JSON.parse(atob(part + "===".slice((part.length + 3) % 4)));
      return typeof claims.exp === "number" ? claims.exp : 0;
    } catch (e) {
      return 0;
    }
  }

  function session() {
    try {
      const s = JSON.parse(sessionStorage.getItem(SESSION));
      if (s && s.token && s.exp * 1000 > Date.now()) return s;
    } catch (e) { /* no session */ }
    return null;
  }

  // clearAll forgets the session and every cached query, and stops all work.
  function clearAll() {
    live.ended = true;
    for (const c of live.controllers) c.abort();
    live.controllers.clear();
    if (live.socket) { live.socket.onclose = live.socket.onmessage = null; live.socket.close(1000, "signed out"); live.socket = null; }
    clearTimeout(live.timer);
    sessionStorage.clear();
    for (const k of Object.keys(localStorage)) if (k.startsWith("turnledger.")) localStorage.removeItem(k);
  }

  // signOut does not wait for anything: the provider is told by a beacon,
  // and the page leaves at once.
  function signOut(reason) {
    const had = sessionStorage.getItem(SESSION) !== null;
    clearAll();
    if (had && reason === "signed-out") {
      try { navigator.sendBeacon(cfg.hostedAuthURL + "/sign-out"); } catch (e) { /* best effort */ }
    }
    location.replace("/app/" + (reason ? "?reason=" + encodeURIComponent(reason) : ""));
  }

  async function api(method, path, body) {
    const s = session();
    if (!s) { signOut("expired"); throw new Error("signed out"); }
    const c = new AbortController();
    live.controllers.add(c);
    try {
      const opts = { method, headers: { Authorization: "Bearer " + s.token }, signal: c.signal, cache: "no-store" };
      if (body !== undefined) { opts.headers["Content-Type"] = "application/json"; opts.body = JSON.stringify(body); }
      const r = await fetch(path, opts);
      if (r.status === 401) { signOut("expired"); throw new Error("signed out"); }
      const data = r.status === 204 ? null : await r.json();
      if (!r.ok) throw new Error((data && data.message) || r.statusText);
      return data;
    } finally {
      live.controllers.delete(c);
    }
  }

  // query is a GET whose answer is cached for the session.
  async function query(key, path, show) {
    const cached = sessionStorage.getItem(CACHE + key);
    if (cached) show(JSON.parse(cached));
    const data = await api("GET", path);
    if (live.ended) return;
    sessionStorage.setItem(CACHE + key, JSON.stringify(data));
    show(data);
  }

  function redirectTo(page) {
    const back = location.origin + "/app/callback";
    location.assign(cfg.hostedAuthURL + "/" + page + "?redirect_uri=" + encodeURIComponent(back));
  }

  function signInPage() {
    const reason = new URLSearchParams(location.search).get("reason");
    const note = { expired: "Your session has expired. Sign in again.", "signed-out": "You are signed out.", callback: "Sign-in did not return a token." }[reason];
    root.replaceChildren(el("div", { class: "signin" },
      el("h1", {}, "turnledger"),
      note ? el("p", { id: "notice" }, note) : "",
      el("button", { id: "sign-in", onclick: () => redirectTo("sign-in") }, "Sign in"),
      el("button", { id: "sign-up", onclick: () => redirectTo("sign-up") }, "Sign up")));
  }

  function callback() {
    const frag = new URLSearchParams(location.hash.slice(1));
    const token = frag.get("access_token");
    history.replaceState(null, "", "/app/callback"); // drop the token from the address bar and history
    const exp = token ? tokenExp(token) : 0;
    if (!token || exp * 1000 <= Date.now()) { clearAll(); location.replace("/app/?reason=callback"); return; }
    sessionStorage.setItem(SESSION, JSON.stringify({ token, exp }));
    location.replace("/app/workspace");
  }

  // armExpiry signs out when exp (seconds) passes. A token that lives
  // longer than setTimeout's longest delay gets a timer of that delay,
  // re-armed with what is left each time it fires.
  function armExpiry(exp) {
    const left = exp * 1000 - Date.now();
    if (left <= 0) { signOut("expired"); return; }
    live.timer = setTimeout(() => armExpiry(exp), Math.min(left, MAX_TIMEOUT));
  }

  function workspace() {
    const s = session();
    if (!s) { clearAll(); location.replace("/app/"); return; }
    armExpiry(s.exp);
    document.addEventListener("visibilitychange", () => { if (!session() && !live.ended) signOut("expired"); });

    const identity = el("dl", { id: "identity" });
    const wsState = el("span", { id: "ws-state" }, "connecting");
    const wsSession = el("code", { id: "ws-session" });
    const messages = el("ul", { id: "messages" });
    const profiles = el("tbody", { id: "profiles" });
    const profileError = el("p", { id: "profile-error", class: "error" });
    const msgInput = el("input", { id: "message", placeholder: "message", autocomplete: "off" });
    const f = {
      provider: el("input", { id: "profile-provider", placeholder: "provider", required: "" }),
      model: el("input", { id: "profile-model", placeholder: "model" }),
      base_url: el("input", { id: "profile-base-url", placeholder: "https://… (optional)" }),
      api_key: el("input", { id: "profile-api-key", type: "password", placeholder: "API key (write-only)", autocomplete: "off" }),
    };

    root.replaceChildren(
      el("header", {}, el("strong", {}, "turnledger"), el("button", { id: "sign-out", onclick: () => signOut("signed-out") }, "Sign out")),
      el("section", {}, el("h2", {}, "Identity"), identity),
      el("section", {}, el("h2", {}, "Execution websocket: ", wsState), el("p", {}, "Session: ", wsSession), messages,
        el("form", { id: "send-form", onsubmit: (e) => {
          e.preventDefault();
          if (live.socket && live.socket.readyState === WebSocket.OPEN && msgInput.value) {
            live.socket.send(JSON.stringify({ text: msgInput.value }));
            msgInput.value = "";
          }
        } }, msgInput, el("button", { id: "send", type: "submit" }, "Send"))),
      el("section", {}, el("h2", {}, "Provider profiles"),
        el("table", {}, el("thead", {}, el("tr", {}, el("th", {}, "Provider"), el("th", {}, "Model"), el("th", {}, "Base URL"), el("th", {}, "API key"), el("th", {}))), profiles),
        el("form", { id: "profile-form", onsubmit: saveProfile }, f.provider, f.model, f.base_url, f.api_key, el("button", { id: "profile-save", type: "submit" }, "Save")),
        profileError));

    function showIdentity(me) {
      const rows = [["Email", me.email], ["Name", me.name], ["Tenant claim", me.tenant_claim], ["User claim", me.user_claim], ["Tenant id", me.tenant_id], ["User id", me.user_id]];
      identity.replaceChildren(...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", { "data-field": k }, v || "—")]));
    }
    function showProfiles(list) {
      profiles.replaceChildren(...(list.profiles || list || []).map((p) => el("tr", { "data-provider": p.provider },
        el("td", {}, p.provider), el("td", {}, p.model || ""), el("td", {}, p.base_url || ""),
        el("td", { class: "key" }, p.has_api_key ? "••••" + (p.api_key_hint || "").replace(/^…/, "") : "none"),
        el("td", {}, el("button", { onclick: () => removeProfile(p.provider) }, "Delete")))));
    }
    async function refreshProfiles() {
      try { await query("profiles", "/api/v1/provider-profiles", showProfiles); } catch (e) { if (!live.ended) profileError.textContent = e.message; }
    }
    async function saveProfile(e) {
      e.preventDefault();
      profileError.textContent = "";
      const body = { model: f.model.value, base_url: f.base_url.value };
      if (f.api_key.value) body.api_key = f.api_key.value;
      f.api_key.value = ""; // the key leaves the page once and is never shown again
      try {
        await api("PUT", "/api/v1/provider-profiles/" + encodeURIComponent(f.provider.value), body);
        await refreshProfiles();
      } catch (err) { if (!live.ended) profileError.textContent = err.message; }
    }
    async function removeProfile(provider) {
      try { await api("DELETE", "/api/v1/provider-profiles/" + encodeURIComponent(provider)); await refreshProfiles(); } catch (err) { if (!live.ended) profileError.textContent = err.message; }
    }
    async function connect() {
      try {
        const t = await api("POST", "/api/v1/auth/ws-ticket");
        if (live.ended) return;
        const proto = location.protocol === "https:" ? "wss:" : "ws:";
        // Without a session of its own yet, the tab sends no session_id:
        // the server makes one and announces it in the first message.
        let sid = sessionStorage.getItem(WS_SESSION);
        let q = "ticket=" + encodeURIComponent(t.ticket);
        if (sid) q = "session_id=" + encodeURIComponent(sid) + "&" + q;
        const ws = new WebSocket(proto + "//" + location.host + "/api/v1/ws/execution?" + q);
        live.socket = ws;
        const ready = () => { wsSession.textContent = sid; wsState.textContent = "connected"; wsState.className = "state-connected"; };
        ws.onopen = () => { if (sid) ready(); };
        ws.onmessage = (m) => {
          if (!sid) {
            let first = null;
            try { first = JSON.parse(m.data); } catch (e) { /* not the announcement */ }
            if (!first || first.kind !== "session" || typeof first.session_id !== "string") { ws.close(); return; }
            sid = first.session_id;
            if (!live.ended) sessionStorage.setItem(WS_SESSION, sid);
            ready();
            return;
          }
          messages.append(el("li", {}, m.data));
        };
        ws.onclose = (c) => { wsState.textContent = "closed (" + c.code + ")"; wsState.className = "state-closed"; };
      } catch (e) {
        if (!live.ended) { wsState.textContent = "failed: " + e.message; wsState.className = "state-closed"; }
      }
    }

    query("me", "/api/v1/auth/me", showIdentity).catch((e) => { if (!live.ended) identity.replaceChildren(el("p", { class: "error" }, e.message)); });
    connect();
    refreshProfiles();
  }

  switch (location.pathname.replace(/\/+$/, "")) {
    case "/app/callback": callback(); break;
    case "/app/workspace": workspace(); break;
    default:
      if (session()) location.replace("/app/workspace");
      else signInPage();
  }
})();
