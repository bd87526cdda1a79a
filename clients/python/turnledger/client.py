"""The client: one method per route of the API."""

from __future__ import annotations

import datetime as _dt
import http.client
import json
import re
import secrets
import time
import urllib.parse
from typing import Any, Iterable, Iterator, Mapping, Optional, Union, cast

from . import types as t
from ._transport import Abort, Request, Transport, default_transport
from .errors import Error, error_from, error_of_event, refused_for_good, retryable

__all__ = ["Client", "Feed", "new_idempotency_key", "parse_time", "IDEMPOTENCY_HEADER"]

IDEMPOTENCY_HEADER = "Idempotency-Key"

Time = Union[str, _dt.datetime]
AgentLike = Union[str, t.AgentRef]


def new_idempotency_key() -> str:
    """A fresh random Idempotency-Key (32 hex digits)."""
    return secrets.token_hex(16)


_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def parse_time(s: str) -> _dt.datetime:
    """Reads an RFC 3339 time of the API (nanoseconds are cut to
    microseconds) as an aware datetime."""
    m = _TIME.match(s)
    if not m:
        raise ValueError(f"not an RFC 3339 time: {s!r}")
    frac = (m.group(2) or "")[:6].ljust(6, "0")
    zone = "+00:00" if m.group(3) == "Z" else m.group(3)
    return _dt.datetime.fromisoformat(f"{m.group(1)}.{frac}{zone}")


def _fmt_time(v: Optional[Time]) -> Optional[str]:
    if v is None or isinstance(v, str):
        return v
    if v.tzinfo is None:
        raise ValueError("turnledger: times must be timezone-aware datetimes")
    return v.astimezone(_dt.timezone.utc).isoformat().replace("+00:00", "Z")


def _seg(s: str) -> str:
    return urllib.parse.quote(s, safe="")


def _drop_none(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


class Feed:
    """A ledger feed to follow: :meth:`project`, :meth:`turn` or :meth:`agent`."""

    def __init__(self, path: str) -> None:
        self.path = path

    @staticmethod
    def project(project: str) -> "Feed":
        """Every event of a project (needs the projections:read grant or the admin)."""
        return Feed(f"/v3r1/projects/{_seg(project)}/projection/feed")

    @staticmethod
    def turn(project: str, turn_id: str) -> "Feed":
        """The events of one Turn."""
        return Feed(f"/v3r1/projects/{_seg(project)}/turns/{_seg(turn_id)}/feed")

    @staticmethod
    def agent(project: str, agent_id: str) -> "Feed":
        """The events of one agent."""
        return Feed(f"/v3r1/projects/{_seg(project)}/agents/{_seg(agent_id)}/feed")

    def __repr__(self) -> str:
        return f"Feed({self.path!r})"


class Client:
    """A client of the turnledger API at ``base_url`` (e.g.
    ``http://127.0.0.1:8000``); safe to share between threads.

    It authenticates as an agent (``project``, ``agent`` and ``token``: the
    headers ``X-Svc-Project-Id``, ``X-Svc-Agent-Id`` and ``Authorization:
    Bearer``) or as the admin (``admin_token``). Methods are named after the
    routes' OpenAPI operationIds in snake_case; their ``project`` (and, where
    a route names an agent, ``agent_id``) default to the client's own. Answers
    are the decoded JSON, typed by :mod:`turnledger.types`; a refusal raises
    :class:`turnledger.Error` (a subclass per error name), a network failure
    ``OSError``.

    Every mutating method takes ``idempotency_key=``: sent as the
    ``Idempotency-Key`` header, it makes a retry of the call after a lost
    answer or a 503 get the first answer instead of deciding again.
    ``retries`` (default 0, as the Go client) makes the client itself send a
    call again after a network failure, a 429, 502, 503 or 504, waiting
    ``retry_delay`` (doubling, at most 5s) or the service's ``Retry-After``
    when longer; a mutating call made without a key then gets a fresh one so
    that its retries are safe.

    ``timeout`` bounds each call in seconds (a long-poll claim gets its wait
    on top). ``transport`` replaces the HTTP layer (see
    :mod:`turnledger._transport`).
    """

    def __init__(
        self,
        base_url: str,
        *,
        project: Optional[str] = None,
        agent: Optional[str] = None,
        token: Optional[str] = None,
        admin_token: Optional[str] = None,
        timeout: float = 30.0,
        retries: int = 0,
        retry_delay: float = 0.5,
        user_agent: str = "turnledger-python-client",
        transport: Optional[Transport] = None,
    ) -> None:
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.netloc:
            raise ValueError(f"turnledger: base URL {base_url!r} must be an absolute http or https URL")
        if agent and not (project and token):
            raise ValueError("turnledger: an agent client needs project, agent and token")
        self.base_url = base_url.rstrip("/")
        self.project = project
        self.agent = agent
        self._token = token
        self._admin_token = admin_token
        self.timeout = timeout
        self.retries = retries
        self.retry_delay = retry_delay
        self.user_agent = user_agent
        self.transport: Transport = transport or default_transport

    def __repr__(self) -> str:
        who = f"agent {self.project}/{self.agent}" if self.agent else ("admin" if self._admin_token else "anonymous")
        return f"Client({self.base_url!r}, {who})"

    # ---- plumbing

    def _p(self, project: Optional[str]) -> str:
        p = project or self.project
        if not p:
            raise ValueError("turnledger: no project: pass project= or make the client with project=")
        return p

    def _a(self, agent_id: Optional[str]) -> str:
        a = agent_id or self.agent
        if not a:
            raise ValueError("turnledger: no agent: pass agent_id= or make the client with agent=")
        return a

    def _me(self, requested_by: Optional[AgentLike], project: str) -> t.AgentRef:
        if isinstance(requested_by, dict):
            return requested_by
        a = requested_by or self.agent
        if not a:
            raise ValueError("turnledger: requested_by is needed (the client is not an agent)")
        return {"project_id": project, "agent_id": a}

    def _pp(self, project: Optional[str], *parts: str) -> str:
        return f"/v3r1/projects/{_seg(self._p(project))}" + "".join(parts)

    def _headers(self, accept: str, body: bool, key: Optional[str], bearer: Optional[str]) -> dict[str, str]:
        h = {"Accept": accept, "User-Agent": self.user_agent, "Connection": "close"}
        if body:
            h["Content-Type"] = "application/json"
        if key:
            h[IDEMPOTENCY_HEADER] = key
        if bearer is not None:
            h["Authorization"] = "Bearer " + bearer
        elif self.agent:
            h["X-Svc-Project-Id"] = cast(str, self.project)
            h["X-Svc-Agent-Id"] = self.agent
            h["Authorization"] = "Bearer " + cast(str, self._token)
        elif self._admin_token:
            h["Authorization"] = "Bearer " + self._admin_token
        return h

    def _url(self, path: str, query: Optional[Mapping[str, Any]]) -> str:
        url = self.base_url + path
        if query:
            q: list[tuple[str, str]] = []
            for k, v in query.items():
                if v is None or v is False or v == "":
                    continue
                for one in v if isinstance(v, (list, tuple)) else [v]:
                    q.append((k, "true" if one is True else str(one)))
            if q:
                url += "?" + urllib.parse.urlencode(q)
        return url

    def _send_once(
        self,
        method: str,
        path: str,
        query: Optional[Mapping[str, Any]],
        body: Any,
        key: Optional[str],
        timeout: float,
        abort: Optional[Abort],
        bearer: Optional[str],
    ) -> Any:
        data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
        req = Request(method, self._url(path, query), self._headers("application/json", data is not None, key, bearer), data, timeout)
        raw = self._exchange(req, abort)
        if not raw.strip():
            return None
        return json.loads(raw)

    def _exchange(self, req: Request, abort: Optional[Abort]) -> bytes:
        """Sends req once and answers the body of a 200; any other status is
        raised as its error."""
        resp = self.transport(req, abort)
        try:
            raw = resp.read()
        finally:
            resp.close()
        if resp.status != 200:
            raise error_from(resp.status, raw, resp.header("Retry-After"))
        return raw

    def _call(
        self,
        method: str,
        path: str,
        *,
        query: Optional[Mapping[str, Any]] = None,
        body: Any = None,
        idempotency_key: Optional[str] = None,
        timeout: Optional[float] = None,
        abort: Optional[Abort] = None,
        bearer: Optional[str] = None,
    ) -> Any:
        mutating = method not in ("GET", "HEAD")
        key = idempotency_key if mutating else None
        if mutating and key is None and self.retries > 0:
            key = new_idempotency_key()
        delay = self.retry_delay
        for attempt in range(self.retries + 1):
            try:
                return self._send_once(method, path, query, body, key, timeout or self.timeout, abort, bearer)
            except Exception as e:
                if attempt >= self.retries or not retryable(e) or (abort is not None and abort.is_set()):
                    raise
                wait = max(delay, getattr(e, "retry_after", None) or 0.0)
                if abort is not None:
                    if abort.wait(wait):
                        raise
                else:
                    time.sleep(wait)
                delay = min(delay * 2, 5.0)
        raise AssertionError("unreachable")

    # ---- service

    def healthz(self) -> t.Health:
        """Liveness: ``{"status": "ok"}``."""
        return cast(t.Health, self._call("GET", "/healthz"))

    def readyz(self) -> dict[str, Any]:
        """The readiness report; an UnavailableError (503) when not ready."""
        return cast("dict[str, Any]", self._call("GET", "/readyz"))

    def openapi(self) -> dict[str, Any]:
        """The service's OpenAPI document."""
        return cast("dict[str, Any]", self._call("GET", "/openapi.json"))

    def metrics(self) -> str:
        """The Prometheus text of /metrics (loopback clients only, unless the
        server says otherwise)."""
        req = Request("GET", self.base_url + "/metrics", self._headers("text/plain", False, None, None), None, self.timeout)
        return self._exchange(req, None).decode()

    # ---- admin surface

    def list_projects(self) -> t.ProjectList:
        """Every project with an event (admin)."""
        return cast(t.ProjectList, self._call("GET", "/admin/v1/projects"))

    def get_trends(self) -> t.Trends:
        """The last hour of the server instance, a point a minute (admin)."""
        return cast(t.Trends, self._call("GET", "/admin/v1/trends"))

    def request_agent_credential_tokens(
        self,
        agent_id: str,
        *,
        spec: Optional[t.ProfileSpec] = None,
        provenance: Optional[t.Provenance] = None,
        meta: Optional[t.Meta] = None,
        trace: Optional[t.Trace] = None,
        project: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> t.CredentialMaterial:
        """Bootstraps an agent and a one-time credential token (admin)."""
        body = _drop_none({"agent_id": agent_id, "spec": spec, "provenance": provenance, "meta": meta, "trace": trace})
        path = f"/admin/v1/projects/{_seg(self._p(project))}/agent-credential-tokens:request"
        return cast(t.CredentialMaterial, self._call("POST", path, body=body, idempotency_key=idempotency_key))

    def create_join_invite(
        self,
        agent_id: str,
        *,
        profile_kind: str = "",
        runtime_kind: str = "",
        expires_in_seconds: Optional[int] = None,
        single_use: Optional[bool] = None,
        spec: Optional[t.ProfileSpec] = None,
        meta: Optional[t.Meta] = None,
        trace: Optional[t.Trace] = None,
        project: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> t.InviteCreated:
        """Creates a join invite; the join code is in the answer, once (admin)."""
        body = _drop_none({
            "agent_id": agent_id, "profile_kind": profile_kind, "runtime_kind": runtime_kind,
            "expires_in_seconds": expires_in_seconds, "single_use": single_use, "spec": spec, "meta": meta, "trace": trace,
        })
        path = f"/admin/v1/projects/{_seg(self._p(project))}/agent-join-invites"
        return cast(t.InviteCreated, self._call("POST", path, body=body, idempotency_key=idempotency_key))

    def redeem_join(self, join_code: str, *, idempotency_key: Optional[str] = None) -> t.CredentialMaterial:
        """Redeems a join code (no credentials needed)."""
        return cast(t.CredentialMaterial, self._call("POST", "/admin/v1/agent-joins:redeem", body={"join_code": join_code}, idempotency_key=idempotency_key))

    def redeem_join_byoa(self, join_code: str, *, idempotency_key: Optional[str] = None) -> t.CredentialMaterial:
        """Redeems a join code through the compatibility alias."""
        return cast(t.CredentialMaterial, self._call("POST", "/admin/v1/byoa/join:redeem", body={"join_code": join_code}, idempotency_key=idempotency_key))

    # ---- agents and credentials

    def register_agent(
        self,
        agent_id: str,
        *,
        role: str = "worker",
        description: str = "",
        enabled: bool = True,
        accepts_work: bool = True,
        capacity: int = 1,
        capabilities: Iterable[str] = (),
        grants: Iterable[str] = (),
        public_metadata: Optional[dict[str, Any]] = None,
        provenance: Optional[t.Provenance] = None,
        meta: Optional[t.Meta] = None,
        trace: Optional[t.Trace] = None,
        project: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> t.Agent:
        """Registers an agent or replaces its spec (admin, or the agents:register grant)."""
        spec: t.AgentSpec = {
            "agent_id": agent_id, "role": role, "description": description, "enabled": enabled,
            "accepts_work": accepts_work, "capacity": capacity, "capabilities": list(capabilities),
            "grants": list(grants), "public_metadata": public_metadata or {},
        }
        prov = provenance or {"kind": "python-client", "external_ref": "", "payload_hash": None}
        body = _drop_none({"spec": spec, "provenance": prov, "meta": meta, "trace": trace})
        return cast(t.Agent, self._call("POST", self._pp(project, "/agents:register"), body=body, idempotency_key=idempotency_key))

    def issue_credential(
        self,
        agent_id: Optional[str] = None,
        *,
        meta: Optional[t.Meta] = None,
        trace: Optional[t.Trace] = None,
        project: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> t.IssuedCredential:
        """Issues a credential; its token is in the answer, once."""
        path = self._pp(project, "/agents/", _seg(self._a(agent_id)), "/credentials:issue")
        return cast(t.IssuedCredential, self._call("POST", path, body=_drop_none({"meta": meta, "trace": trace}), idempotency_key=idempotency_key))

    def revoke_credential(
        self,
        credential_id: str,
        *,
        agent_id: Optional[str] = None,
        meta: Optional[t.Meta] = None,
        trace: Optional[t.Trace] = None,
        project: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> t.Ok:
        """Revokes a credential."""
        path = self._pp(project, "/agents/", _seg(self._a(agent_id)), "/credentials/", _seg(credential_id), ":revoke")
        return cast(t.Ok, self._call("POST", path, body=_drop_none({"meta": meta, "trace": trace}), idempotency_key=idempotency_key))

    def list_credentials(self, agent_id: Optional[str] = None, *, project: Optional[str] = None) -> t.CredentialList:
        """Lists an agent's credentials (summaries, never tokens)."""
        return cast(t.CredentialList, self._call("GET", self._pp(project, "/agents/", _seg(self._a(agent_id)), "/credentials")))

    def get_agent(self, agent_id: Optional[str] = None, *, project: Optional[str] = None) -> t.Agent:
        """The agent truth snapshot."""
        return cast(t.Agent, self._call("GET", self._pp(project, "/agents/", _seg(self._a(agent_id)))))

    def submit_work_memory_report(
        self,
        request_id: str,
        *,
        summary: str = "",
        records: Iterable[t.WorkMemoryRecord] = (),
        final_payload: Optional[dict[str, Any]] = None,
        agent_id: Optional[str] = None,
        project: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> t.ReportResult:
        """Submits a work-memory report as the agent."""
        p, a = self._p(project), self._a(agent_id)
        body = {
            "kind": "agent_work_memory_report_manifest.v1", "request_id": request_id, "summary": summary,
            "records": list(records), "final_payload": final_payload, "declared_project_id": p, "declared_agent_id": a,
        }
        return cast(t.ReportResult, self._call("POST", self._pp(p, "/agents/", _seg(a), "/work-memory-reports"), body=body, idempotency_key=idempotency_key))

    def _admission(self, verb: str, agent_id: str, requested_by: Optional[AgentLike], meta: Any, trace: Any, project: Optional[str], key: Optional[str]) -> t.Agent:
        p = self._p(project)
        body = _drop_none({"agent": {"project_id": p, "agent_id": agent_id}, "requested_by": self._me(requested_by, p), "meta": meta, "trace": trace})
        return cast(t.Agent, self._call("POST", self._pp(p, "/management/agents/", _seg(agent_id), ":" + verb), body=body, idempotency_key=key))

    def drain_agent(
        self, agent_id: str, *, requested_by: Optional[AgentLike] = None, meta: Optional[t.Meta] = None,
        trace: Optional[t.Trace] = None, project: Optional[str] = None, idempotency_key: Optional[str] = None,
    ) -> t.Agent:
        """Stops admitting new Turns to the agent (``requested_by``: the client's agent by default)."""
        return self._admission("drain", agent_id, requested_by, meta, trace, project, idempotency_key)

    def resume_agent(
        self, agent_id: str, *, requested_by: Optional[AgentLike] = None, meta: Optional[t.Meta] = None,
        trace: Optional[t.Trace] = None, project: Optional[str] = None, idempotency_key: Optional[str] = None,
    ) -> t.Agent:
        """Admits new Turns to the agent again."""
        return self._admission("resume", agent_id, requested_by, meta, trace, project, idempotency_key)

    def heartbeat_presence(
        self, agent_id: Optional[str] = None, *, project: Optional[str] = None, idempotency_key: Optional[str] = None,
        abort: Optional[Abort] = None,
    ) -> t.Agent:
        """Records the agent's presence."""
        p, a = self._p(project), self._a(agent_id)
        body = {"agent": {"project_id": p, "agent_id": a}}
        return cast(t.Agent, self._call("POST", self._pp(p, "/management/agents/", _seg(a), ":heartbeat-presence"), body=body, idempotency_key=idempotency_key, abort=abort))

    def replace_public_metadata(
        self, metadata: dict[str, Any], *, agent_id: Optional[str] = None, project: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> t.Agent:
        """Replaces the agent's public metadata (a JSON object, at most 16 KiB)."""
        path = self._pp(project, "/management/agents/", _seg(self._a(agent_id)), "/public-metadata")
        return cast(t.Agent, self._call("PUT", path, body=metadata, idempotency_key=idempotency_key))

    def agent_feed(
        self, agent_id: Optional[str] = None, *, after_ledger_seq: int = 0, limit: Optional[int] = None,
        project: Optional[str] = None,
    ) -> t.FeedPage:
        """A page of the agent's ledger feed (``follow(Feed.agent(...))`` streams it)."""
        q = {"after_ledger_seq": after_ledger_seq or None, "limit": limit}
        return cast(t.FeedPage, self._call("GET", self._pp(project, "/agents/", _seg(self._a(agent_id)), "/feed"), query=q))

    # ---- Turns

    def dispatch_turn(
        self,
        target_agent: AgentLike,
        turn_kind: str,
        dispatch_key: str,
        *,
        input: Optional[dict[str, Any]] = None,
        request_id: Optional[str] = None,
        parent_claim: Optional[t.ClaimToken] = None,
        requested_by: Optional[AgentLike] = None,
        priority: Optional[int] = None,
        not_before: Optional[Time] = None,
        claim_by: Optional[Time] = None,
        deadline: Optional[Time] = None,
        max_attempts: Optional[int] = None,
        retry_backoff: Optional[t.Backoff] = None,
        tags: Optional[Iterable[str]] = None,
        context_id: Optional[str] = None,
        meta: Optional[t.Meta] = None,
        trace: Optional[t.Trace] = None,
        project: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> t.Turn:
        """Dispatches a Turn: a child of ``parent_claim`` (a claim the caller
        holds) when given, else a root Turn with ``request_id`` (default:
        the dispatch key). ``target_agent`` and ``requested_by`` are agent ids
        of the project or AgentRefs; ``requested_by`` defaults to the client's
        agent. The schedule fields are optional (docs/scheduling.md);
        ``context_id`` groups the Turns of one conversation (A2A's contextId)."""
        p = self._p(project)
        target = target_agent if isinstance(target_agent, dict) else {"project_id": p, "agent_id": target_agent}
        if parent_claim is not None:
            authority: dict[str, Any] = {"mode": "child_derivation", "parent_claim": parent_claim}
        else:
            authority = {"mode": "root_request", "request_id": request_id or dispatch_key}
        body = _drop_none({
            "requested_by": self._me(requested_by, p), "target_agent": target, "input": input if input is not None else {},
            "turn_kind": turn_kind, "dispatch_key": dispatch_key, "authority": authority, "priority": priority,
            "not_before": _fmt_time(not_before), "claim_by": _fmt_time(claim_by), "deadline": _fmt_time(deadline),
            "max_attempts": max_attempts, "retry_backoff": retry_backoff, "tags": list(tags) if tags is not None else None,
            "context_id": context_id, "meta": meta, "trace": trace,
        })
        return cast(t.Turn, self._call("POST", self._pp(p, "/turns:dispatch"), body=body, idempotency_key=idempotency_key))

    def get_turn(self, turn_id: str, *, project: Optional[str] = None) -> t.Turn:
        """The Turn snapshot."""
        return cast(t.Turn, self._call("GET", self._pp(project, "/turns/", _seg(turn_id))))

    def turn_context(
        self, turn_id: str, *, after_turn_seq: int = 0, limit: Optional[int] = None, project: Optional[str] = None,
    ) -> t.ContextPage:
        """A page of the Turn's semantic records after ``after_turn_seq``."""
        q = {"after_turn_seq": after_turn_seq or None, "limit": limit}
        return cast(t.ContextPage, self._call("GET", self._pp(project, "/turns/", _seg(turn_id), "/context"), query=q))

    def turn_feed(
        self, turn_id: str, *, after_ledger_seq: int = 0, limit: Optional[int] = None, project: Optional[str] = None,
    ) -> t.FeedPage:
        """A page of the Turn's ledger feed."""
        q = {"after_ledger_seq": after_ledger_seq or None, "limit": limit}
        return cast(t.FeedPage, self._call("GET", self._pp(project, "/turns/", _seg(turn_id), "/feed"), query=q))

    def stop_turn(
        self, turn_id: str, *, requested_by: Optional[AgentLike] = None, cascade: Optional[bool] = None,
        meta: Optional[t.Meta] = None, trace: Optional[t.Trace] = None, project: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> t.Turn:
        """Requests a stop of the Turn (with ``cascade``, of its descendants too)."""
        p = self._p(project)
        body = _drop_none({"requested_by": self._me(requested_by, p), "cascade": cascade, "meta": meta, "trace": trace})
        return cast(t.Turn, self._call("POST", self._pp(p, "/management/turns/", _seg(turn_id), ":stop"), body=body, idempotency_key=idempotency_key))

    def resume_turn(
        self, turn_id: str, *, requested_by: Optional[AgentLike] = None, meta: Optional[t.Meta] = None,
        trace: Optional[t.Trace] = None, project: Optional[str] = None, idempotency_key: Optional[str] = None,
    ) -> t.Turn:
        """Resumes a suspended Turn."""
        p = self._p(project)
        body = _drop_none({"requested_by": self._me(requested_by, p), "meta": meta, "trace": trace})
        return cast(t.Turn, self._call("POST", self._pp(p, "/turns/", _seg(turn_id), ":resume"), body=body, idempotency_key=idempotency_key))

    def retry_turn(
        self, turn_id: str, *, requested_by: Optional[AgentLike] = None, meta: Optional[t.Meta] = None,
        trace: Optional[t.Trace] = None, project: Optional[str] = None, idempotency_key: Optional[str] = None,
    ) -> t.Turn:
        """Dispatches a new Turn from a finished one (outcome failed, dead,
        expired, timed_out or stopped) and returns it (``retry_of`` the old
        one). A Turn is retried once: a second retry is a ConflictError."""
        p = self._p(project)
        body = _drop_none({"requested_by": self._me(requested_by, p), "meta": meta, "trace": trace})
        return cast(t.Turn, self._call("POST", self._pp(p, "/turns/", _seg(turn_id), ":retry"), body=body, idempotency_key=idempotency_key))

    def _bulk(self, verb: str, filter: Optional[t.BulkFilter], limit: Optional[int], reason: Optional[str],
              requested_by: Optional[AgentLike], meta: Any, trace: Any, project: Optional[str], key: Optional[str]) -> Any:
        p = self._p(project)
        body = _drop_none({"requested_by": self._me(requested_by, p), "filter": filter, "limit": limit, "reason": reason, "meta": meta, "trace": trace})
        return self._call("POST", self._pp(p, "/management/turns:" + verb), body=body, idempotency_key=key)

    def bulk_stop_turns(
        self, *, filter: Optional[t.BulkFilter] = None, limit: Optional[int] = None, reason: Optional[str] = None,
        requested_by: Optional[AgentLike] = None, meta: Optional[t.Meta] = None, trace: Optional[t.Trace] = None,
        project: Optional[str] = None, idempotency_key: Optional[str] = None,
    ) -> t.BulkStopResult:
        """Stops the Turns the filter matches, oldest first, at most ``limit``
        (1–1000, default 100); call again while ``has_more``."""
        return cast(t.BulkStopResult, self._bulk("bulk-stop", filter, limit, reason, requested_by, meta, trace, project, idempotency_key))

    def bulk_retry_turns(
        self, *, filter: Optional[t.BulkFilter] = None, limit: Optional[int] = None, reason: Optional[str] = None,
        requested_by: Optional[AgentLike] = None, meta: Optional[t.Meta] = None, trace: Optional[t.Trace] = None,
        project: Optional[str] = None, idempotency_key: Optional[str] = None,
    ) -> t.BulkRetryResult:
        """Retries the finished Turns the filter matches (as :meth:`retry_turn`)."""
        return cast(t.BulkRetryResult, self._bulk("bulk-retry", filter, limit, reason, requested_by, meta, trace, project, idempotency_key))

    def provide_turn_input(
        self, turn_id: str, input: dict[str, Any], *, input_token: Optional[str] = None, meta: Optional[t.Meta] = None,
        trace: Optional[t.Trace] = None, project: Optional[str] = None, idempotency_key: Optional[str] = None,
    ) -> t.Turn:
        """Answers a Turn suspended for input. With ``input_token`` (the
        suspend's, ``tli_…``) the call carries that token alone, no agent
        headers; else the client's credentials (the requester, [management],
        the admin)."""
        body = _drop_none({"input": input, "meta": meta, "trace": trace})
        return cast(t.Turn, self._call("POST", self._pp(project, "/turns/", _seg(turn_id), ":provide-input"), body=body,
                                       idempotency_key=idempotency_key, bearer=input_token))

    # ---- claims

    def claim_turn(
        self, agent_id: Optional[str] = None, *, wait_s: Optional[float] = None, lease_s: Optional[int] = None,
        meta: Optional[t.Meta] = None, trace: Optional[t.Trace] = None, project: Optional[str] = None,
        idempotency_key: Optional[str] = None, abort: Optional[Abort] = None,
    ) -> Optional[t.ClaimResult]:
        """Claims the agent's next Turn, or returns None when none waits. With
        ``wait_s`` (at most 60) the server holds the request until a Turn is
        queued for the agent or the wait ends. ``abort`` ends the wait early
        (the call raises ConnectionAbortedError). ``lease_s`` asks a lease of
        its own, at most the agent's claim_ttl_s."""
        p, a = self._p(project), self._a(agent_id)
        q = {"wait": f"{wait_s:g}s"} if wait_s else None
        body = _drop_none({"agent": {"project_id": p, "agent_id": a}, "lease_s": lease_s, "meta": meta, "trace": trace})
        return cast(Optional[t.ClaimResult], self._call(
            "POST", self._pp(p, "/agents/", _seg(a), "/claims:claim"), query=q, body=body,
            idempotency_key=idempotency_key, timeout=self.timeout + (wait_s or 0), abort=abort))

    def renew_claim(
        self, claim: t.ClaimToken, *, meta: Optional[t.Meta] = None, trace: Optional[t.Trace] = None,
        idempotency_key: Optional[str] = None,
    ) -> t.RenewResult:
        """Extends the claim by the server's claim TTL; says whether a stop was requested."""
        body = _drop_none({"claim": claim, "meta": meta, "trace": trace})
        return cast(t.RenewResult, self._call("POST", self._pp(claim["project_id"], "/claims:renew"), body=body, idempotency_key=idempotency_key))

    def release_claim(
        self, claim: t.ClaimToken, *, meta: Optional[t.Meta] = None, trace: Optional[t.Trace] = None,
        idempotency_key: Optional[str] = None,
    ) -> t.Turn:
        """Hands a live claim back: the Turn goes back to its old place in the
        queue, the attempt not counted (a worker that stops gracefully)."""
        body = _drop_none({"claim": claim, "meta": meta, "trace": trace})
        return cast(t.Turn, self._call("POST", self._pp(claim["project_id"], "/claims:release"), body=body, idempotency_key=idempotency_key))

    def reconcile_expired_claims(
        self, *, meta: Optional[t.Meta] = None, trace: Optional[t.Trace] = None, project: Optional[str] = None,
        idempotency_key: Optional[str] = None,
    ) -> t.ReconcileResult:
        """Releases the project's expired claims."""
        return cast(t.ReconcileResult, self._call("POST", self._pp(project, "/claims:reconcile-expired"), body=_drop_none({"meta": meta, "trace": trace}), idempotency_key=idempotency_key))

    def append_semantic_record(
        self, claim: t.ClaimToken, role: str, payload: dict[str, Any], *, meta: Optional[t.Meta] = None,
        trace: Optional[t.Trace] = None, idempotency_key: Optional[str] = None,
    ) -> t.RecordResult:
        """Appends a semantic record (a JSON object) under the claim."""
        body = _drop_none({"claim": claim, "role": role, "payload": payload, "meta": meta, "trace": trace})
        path = self._pp(claim["project_id"], "/turns/", _seg(claim["turn_id"]), "/semantic-records")
        return cast(t.RecordResult, self._call("POST", path, body=body, idempotency_key=idempotency_key))

    def suspend_turn(
        self, claim: t.ClaimToken, *, awaiting_input: Optional[t.AwaitingInputRequest] = None,
        meta: Optional[t.Meta] = None, trace: Optional[t.Trace] = None, idempotency_key: Optional[str] = None,
    ) -> t.SuspendResult:
        """Suspends the claimed Turn; with ``awaiting_input`` (``prompt``,
        ``schema``, ``input_by``) the answer carries, once, ``input_token``
        and ``input_url``."""
        body = _drop_none({"claim": claim, "awaiting_input": awaiting_input, "meta": meta, "trace": trace})
        path = self._pp(claim["project_id"], "/turns/", _seg(claim["turn_id"]), ":suspend")
        return cast(t.SuspendResult, self._call("POST", path, body=body, idempotency_key=idempotency_key))

    def finish_turn(
        self, claim: t.ClaimToken, *, outcome: str = "succeeded", final_payload: Optional[dict[str, Any]] = None,
        final_record_role: Optional[str] = None, retry: Optional[bool] = None, meta: Optional[t.Meta] = None,
        trace: Optional[t.Trace] = None, idempotency_key: Optional[str] = None,
    ) -> t.Turn:
        """Finishes the claimed Turn: ``outcome`` succeeded, failed or
        stopped; ``retry=True`` with failed queues it again after its backoff
        (or ends it as dead when its attempts are spent). A final payload
        becomes the Turn's last semantic record, with ``final_record_role``
        (default ``"final"``)."""
        if final_payload is not None and not final_record_role:
            final_record_role = "final"
        body = _drop_none({
            "claim": claim, "outcome": outcome, "final_record_role": final_record_role, "retry": retry or None,
            "meta": meta, "trace": trace,
        })
        body["final_payload"] = final_payload
        path = self._pp(claim["project_id"], "/turns/", _seg(claim["turn_id"]), ":finish")
        return cast(t.Turn, self._call("POST", path, body=body, idempotency_key=idempotency_key))

    # ---- projections

    def list_agents(
        self, *, agent_id: Optional[str] = None, enabled_only: bool = False, accepts_work_only: bool = False,
        role: Optional[str] = None, capability: Optional[str] = None, limit: Optional[int] = None,
        project: Optional[str] = None,
    ) -> t.AgentPage:
        """Agent directory entries."""
        q = {"agent_id": agent_id, "enabled_only": enabled_only, "accepts_work_only": accepts_work_only,
             "role": role, "capability": capability, "limit": limit}
        return cast(t.AgentPage, self._call("GET", self._pp(project, "/projection/agents"), query=q))

    def list_turn_offers(
        self, *, turn_kind: Optional[str] = None, agent_id: Optional[str] = None, enabled_only: bool = False,
        accepts_work_only: bool = False, limit: Optional[int] = None, project: Optional[str] = None,
    ) -> t.OfferPage:
        """Canonical Turn offers."""
        q = {"turn_kind": turn_kind, "agent_id": agent_id, "enabled_only": enabled_only,
             "accepts_work_only": accepts_work_only, "limit": limit}
        return cast(t.OfferPage, self._call("GET", self._pp(project, "/projection/turn-offers"), query=q))

    def list_turns(
        self, *, target_agent_id: Optional[str] = None, turn_kind: Optional[str] = None, state: Optional[str] = None,
        outcome: Optional[str] = None, priority: Optional[int] = None, awaiting_input: bool = False,
        tag: Optional[Iterable[str]] = None, context_id: Optional[str] = None, stop_requested_only: bool = False,
        after_ledger_seq: int = 0, limit: Optional[int] = None, order: Optional[str] = None, project: Optional[str] = None,
    ) -> t.TurnPage:
        """Projected Turns in dispatch order, oldest first unless ``order="newest"``;
        ``after_ledger_seq`` is the cursor (``next_after_ledger_seq`` of the
        previous page), paging on in the order asked for."""
        q = {"target_agent_id": target_agent_id, "turn_kind": turn_kind, "state": state, "outcome": outcome,
             "priority": priority, "awaiting_input": awaiting_input, "tag": list(tag) if tag else None,
             "context_id": context_id, "stop_requested_only": stop_requested_only,
             "after_ledger_seq": after_ledger_seq or None, "order": order,
             "limit": limit}
        return cast(t.TurnPage, self._call("GET", self._pp(project, "/projection/turns"), query=q))

    def turn_lineage(self, turn_id: str, *, limit: Optional[int] = None, project: Optional[str] = None) -> t.LineagePage:
        """The Turn's lineage: ancestors, itself, descendants."""
        return cast(t.LineagePage, self._call("GET", self._pp(project, "/projection/turns/", _seg(turn_id), "/lineage"), query={"limit": limit}))

    def project_feed(self, *, after_ledger_seq: int = 0, limit: Optional[int] = None, project: Optional[str] = None) -> t.FeedPage:
        """A page of the project's ledger feed."""
        q = {"after_ledger_seq": after_ledger_seq or None, "limit": limit}
        return cast(t.FeedPage, self._call("GET", self._pp(project, "/projection/feed"), query=q))

    # ---- event streams

    def follow(self, feed: Union[Feed, str], after: int = 0, *, abort: Optional[Abort] = None) -> Iterator[t.FeedItem]:
        """Yields the feed's items after ledger_seq ``after``, live, from its
        event stream (Server-Sent Events). When the connection drops it
        reconnects with ``Last-Event-ID`` set to the last ledger_seq it
        yielded, so no item is skipped or repeated, waiting a little longer
        after each failed attempt (0.1s up to 5s, or the server's
        Retry-After). It raises the Error of a refusal that retrying cannot
        mend (401, 403, 404, 422), also when an open stream is ended because
        access was lost. Close the generator (``break``) or set ``abort`` to
        end it."""
        path = feed.path if isinstance(feed, Feed) else feed
        backoff = 0.1
        while abort is None or not abort.is_set():
            progressed = False
            err: BaseException
            try:
                for item in self._stream(path, after, abort):
                    after = item["ledger_seq"]
                    progressed = True
                    yield item
                err = ConnectionError("turnledger: the stream ended")
            except Error as e:
                if refused_for_good(e):
                    raise
                err = e
            except (OSError, ValueError, http.client.HTTPException) as e:
                err = e
            if abort is not None and abort.is_set():
                return
            if progressed:
                backoff = 0.1
            wait = max(backoff, getattr(err, "retry_after", None) or 0.0)
            if abort is not None:
                if abort.wait(wait):
                    return
            else:
                time.sleep(wait)
            backoff = min(backoff * 2, 5.0)

    def _stream(self, path: str, after: int, abort: Optional[Abort]) -> Iterator[t.FeedItem]:
        headers = self._headers("text/event-stream", False, None, None)
        query = None
        if after > 0:
            headers["Last-Event-ID"] = str(after)
            query = {"after_ledger_seq": after}
        resp = self.transport(Request("GET", self._url(path, query), headers, None, max(self.timeout, 60.0), True), abort)
        try:
            if resp.status != 200:
                raise error_from(resp.status, resp.read()[:65536], resp.header("Retry-After"))
            ct = resp.header("Content-Type") or ""
            if not ct.startswith("text/event-stream"):
                raise Error(resp.status, "UnexpectedResponse", f"the feed answered {ct}, not an event stream")
            event, data = "", []
            while True:
                raw = resp.readline()
                if not raw:
                    raise ConnectionError("turnledger: the stream broke")
                line = raw.decode("utf-8").rstrip("\r\n")
                if line == "":
                    if not data and not event:
                        continue
                    text = "\n".join(data)
                    if event == "error":
                        raise error_of_event(text)
                    item = cast(t.FeedItem, json.loads(text))
                    event, data = "", []
                    if item["ledger_seq"] > after:
                        after = item["ledger_seq"]
                        yield item
                    continue
                if line.startswith(":"):
                    continue  # a comment: heartbeat
                field, _, value = line.partition(":")
                if value.startswith(" "):
                    value = value[1:]
                if field == "event":
                    event = value
                elif field == "data":
                    data.append(value)
        finally:
            resp.close()
