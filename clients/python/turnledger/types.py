"""The shapes of the API's answers (and of the objects requests carry), as
TypedDicts that mirror the schemas of the OpenAPI document
(``GET /openapi.json``, ``components/schemas``). Answers are the decoded JSON
itself: plain dicts, typed for checkers. Times are RFC 3339 strings
(:func:`turnledger.parse_time` reads them); a ``tests/test_types.py`` test fails
when a schema and its TypedDict here differ in a field.
"""

from __future__ import annotations

from typing import Any, Dict, List, Literal, Optional, TypedDict

__all__ = [
    "AgentRef", "TurnRef", "ClaimToken", "Meta", "Trace", "Backoff", "AgentSpec", "Provenance",
    "AwaitingInput", "Authority", "ClaimView", "Turn", "SuspendResult", "Agent", "TurnOffer",
    "Credential", "CredentialList", "IssuedCredential", "Profile", "ProfileSpec",
    "CredentialMaterial", "JoinInvite", "InviteCreated", "LineageItem", "ContextItem", "Actor",
    "FeedItem", "Diagnostic", "AgentPage", "OfferPage", "TurnPage", "LineagePage", "ContextPage",
    "FeedPage", "ClaimResult", "RenewResult", "RecordResult", "ReconcileResult", "ReportResult",
    "Ok", "Health", "BulkFilter", "BulkStopResult", "BulkRetryResult", "ProjectList",
    "WorkMemoryRecord", "AwaitingInputRequest",
]


class AgentRef(TypedDict):
    project_id: str
    agent_id: str


class TurnRef(TypedDict):
    project_id: str
    turn_id: str


class ClaimToken(TypedDict):
    """A live claim; pass it back as received. ``token`` is a secret."""

    project_id: str
    turn_id: str
    agent_id: str
    token: str
    expires_at: str


class Meta(TypedDict, total=False):
    note: str
    reason: str
    annotations: Optional[dict[str, Any]]


class Trace(TypedDict, total=False):
    trace_id: str
    parent_trace_id: Optional[str]
    recursion_depth: int


class Backoff(TypedDict, total=False):
    """Delay before a retry asked by a failed finish: ``initial_s`` ×
    ``factor``^(attempts−1), at most ``max_s`` (defaults 1, 2, 60)."""

    initial_s: float
    factor: float
    max_s: float


class _AgentSpecBase(TypedDict):
    agent_id: str
    role: str
    description: str
    enabled: bool
    accepts_work: bool
    capacity: int
    capabilities: List[str]
    grants: List[str]
    public_metadata: dict[str, Any]


class AgentSpec(_AgentSpecBase, total=False):
    claim_ttl_s: int  # the lease of the agent's claims in seconds (default: the server's claim TTL)


class Provenance(TypedDict):
    kind: str
    external_ref: str
    payload_hash: Optional[str]


class AwaitingInput(TypedDict):
    """What a Turn suspended for input asks."""

    prompt: str
    schema: Optional[dict[str, Any]]
    input_by: Optional[str]


class _AwaitingInputRequestBase(TypedDict):
    prompt: str


class AwaitingInputRequest(_AwaitingInputRequestBase, total=False):
    """The ``awaiting_input`` of a suspend: ``prompt`` is required."""

    schema: Optional[dict[str, Any]]
    input_by: Optional[str]


class _AuthorityBase(TypedDict):
    mode: Literal["root_request", "child_derivation"]


class Authority(_AuthorityBase, total=False):
    request_id: str
    parent_turn_id: str


class ClaimView(TypedDict):
    """The live claim as a snapshot shows it (no token)."""

    claim_id: str
    agent_id: str
    claimed_at: str
    expires_at: str


class Turn(TypedDict):
    """The Turn snapshot. ``state`` is queued, claimed, suspended or finished;
    ``outcome`` (when finished) succeeded, failed, stopped, expired, timed_out
    or dead."""

    project_id: str
    turn_id: str
    turn_kind: str
    state: str
    outcome: Optional[str]
    stop_requested: bool
    stop_requested_at: Optional[str]
    target_agent: AgentRef
    requested_by: AgentRef
    input: Any
    dispatch_key: str
    authority: Authority
    parent: Optional[TurnRef]
    root_turn_id: str
    depth: int
    claim: Optional[ClaimView]
    attempts: int
    last_turn_seq: int
    priority: int
    not_before: Optional[str]
    claim_by: Optional[str]
    deadline: Optional[str]
    max_attempts: Optional[int]
    retry_backoff: Optional[Backoff]
    retry_of: Optional[str]
    awaiting_input: Optional[AwaitingInput]
    tags: List[str]
    context_id: Optional[str]
    final_payload: Any
    final_record_role: Optional[str]
    created_at: str
    updated_at: str
    finished_at: Optional[str]
    ledger_seq: int


class SuspendResult(Turn, total=False):
    """The Turn after a suspend; with ``awaiting_input``, also the
    ``input_token`` (shown once) and the ``input_url`` that answers it."""

    input_token: str
    input_url: str


class Agent(TypedDict):
    """The agent truth snapshot, and a directory entry."""

    project_id: str
    agent_id: str
    role: str
    description: str
    enabled: bool
    accepts_work: bool
    drained: bool
    admitting: bool
    capacity: int
    active_claims: int
    free_capacity: int
    capabilities: List[str]
    grants: List[str]
    public_metadata: Any
    provenance: Provenance
    registered_at: str
    updated_at: str
    last_seen_at: Optional[str]
    presence: str
    ledger_seq: int
    claim_ttl_s: Optional[int]


class TurnOffer(TypedDict):
    agent_id: str
    turn_kind: str
    role: str
    enabled: bool
    accepts_work: bool
    drained: bool
    admitting: bool
    capacity: int
    free_capacity: int
    queued: int
    presence: str


class Credential(TypedDict):
    """A credential summary (never the token)."""

    credential_id: str
    project_id: str
    agent_id: str
    status: str
    issued_at: str
    expires_at: str
    revoked_at: Optional[str]
    via: str


class CredentialList(TypedDict):
    project_id: str
    agent_id: str
    items: List[Credential]


class IssuedCredential(TypedDict):
    """A new credential and its token, shown once."""

    credential: Credential
    token: str


class _ProfileBase(TypedDict):
    project_id: str
    agent_id: str
    agent: Agent


class Profile(_ProfileBase, total=False):
    profile_kind: str
    runtime_kind: str
    invite_id: str


class ProfileSpec(TypedDict, total=False):
    """The optional spec of a bootstrap or an invite; a missing field takes
    the server's default."""

    role: str
    description: str
    enabled: bool
    accepts_work: bool
    capacity: int
    capabilities: List[str]
    grants: List[str]
    public_metadata: dict[str, Any]
    claim_ttl_s: Optional[int]


class CredentialMaterial(TypedDict):
    profile: Profile
    credential: Credential
    agent_credential_token: str


class JoinInvite(TypedDict):
    invite_id: str
    project_id: str
    agent_id: str
    profile_kind: str
    runtime_kind: str
    expires_at: str
    single_use: bool


class InviteCreated(TypedDict):
    invite: JoinInvite
    join_code: str


class LineageItem(TypedDict):
    turn_id: str
    parent_turn_id: Optional[str]
    depth: int
    relation: str
    state: str
    outcome: Optional[str]
    turn_kind: str
    target_agent: AgentRef


class ContextItem(TypedDict):
    """One semantic record of a Turn."""

    turn_seq: int
    role: str
    payload: Any
    claim_id: str
    agent_id: str
    at: str
    ledger_seq: int


class _ActorBase(TypedDict):
    kind: str


class Actor(_ActorBase, total=False):
    agent_id: str


class FeedItem(TypedDict):
    """One ledger event of a feed; ``ledger_seq`` is its place in the ledger."""

    ledger_seq: int
    type: str
    v: int
    project_id: str
    aggregate: str
    id: str
    at: str
    actor: Actor
    data: Any
    meta: Optional[Meta]
    trace: Optional[Trace]


class Diagnostic(TypedDict):
    code: str
    message: str


class AgentPage(TypedDict):
    project_id: str
    items: List[Agent]
    limit: int
    diagnostics: List[Diagnostic]


class OfferPage(TypedDict):
    project_id: str
    items: List[TurnOffer]
    limit: int
    diagnostics: List[Diagnostic]


class LineagePage(TypedDict):
    project_id: str
    items: List[LineageItem]
    limit: int
    diagnostics: List[Diagnostic]


class TurnPage(TypedDict):
    project_id: str
    items: List[Turn]
    limit: int
    diagnostics: List[Diagnostic]
    next_after_ledger_seq: int
    has_more: bool


class FeedPage(TypedDict):
    project_id: str
    items: List[FeedItem]
    limit: int
    diagnostics: List[Diagnostic]
    next_after_ledger_seq: int
    has_more: bool


class ContextPage(TypedDict):
    project_id: str
    items: List[ContextItem]
    limit: int
    diagnostics: List[Diagnostic]
    next_after_turn_seq: int
    has_more: bool


class ClaimResult(TypedDict):
    """A won claim: the claim token and the Turn as claimed."""

    claim: ClaimToken
    turn: Turn


class RenewResult(TypedDict):
    claim: ClaimToken
    stop_requested: bool
    ledger_seq: int


class RecordResult(TypedDict):
    project_id: str
    turn_id: str
    turn_seq: int
    stop_requested: bool
    ledger_seq: int


class ReconcileResult(TypedDict):
    project_id: str
    released_turn_ids: List[str]
    ledger_seq: int


class ReportResult(TypedDict):
    report_id: str
    project_id: str
    agent_id: str
    ledger_seq: int


class Ok(TypedDict):
    ok: bool


class Health(TypedDict):
    status: str


class BulkFilter(TypedDict, total=False):
    """The Turns a bulk action acts on (the filter of the Turn list)."""

    state: str
    target_agent_id: str
    turn_kind: str
    tag: str
    outcome: str
    awaiting_input: bool


class BulkStopResult(TypedDict):
    stopped: List[str]
    has_more: bool


class BulkRetryResult(TypedDict):
    retried: List[str]
    has_more: bool


class ProjectItem(TypedDict):
    project_id: str


class ProjectList(TypedDict):
    items: List[ProjectItem]
    diagnostics: List[Diagnostic]


class TrendPoint(TypedDict):
    """One minute of Trends: counts of the minute, levels as last read,
    percentiles of the minute (None when nothing was measured)."""
    at: str
    sampled: bool
    dispatched: float
    finished: Dict[str, float]
    queued: Optional[float]
    awaiting_input: Optional[float]
    claim_wait_p50_s: Optional[float]
    claim_wait_p95_s: Optional[float]
    run_p50_s: Optional[float]
    run_p95_s: Optional[float]
    projection_lag_events: Optional[float]
    shed: float
    throttled: float


class Trends(TypedDict):
    """The last hour of a server instance, a point a minute (admin)."""
    now: str
    minute_s: int
    points: List[TrendPoint]


class _WorkMemoryRecordBase(TypedDict):
    role: str
    payload: dict[str, Any]


class WorkMemoryRecord(_WorkMemoryRecordBase, total=False):
    source_refs: List[Any]
