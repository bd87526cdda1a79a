"""The worker: claims an agent's Turns with long polls and runs a handler for
each in a thread of its own, renewing each claim on its own — the loop of the
Go client's Worker, case by case."""

from __future__ import annotations

import datetime as _dt
import logging
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional, TypeVar, Union

from . import types as t
from ._transport import Abort
from .client import Client, new_idempotency_key, parse_time
from .errors import Cancelled, Error, FencingError, Retry, refused_for_good, retryable

__all__ = ["Worker", "Job", "Result", "Handler", "retry_keyed"]

_T = TypeVar("_T")
_log = logging.getLogger("turnledger.worker")

STOP_REQUESTED = "stop_requested"
CLAIM_LOST = "claim_lost"
SHUTDOWN = "shutdown"


def retry_keyed(
    op: Callable[[str], _T],
    *,
    attempts: int = 0,
    delay: float = 1.0,
    deadline: Optional[float] = None,
    abort: Optional[Abort] = None,
) -> _T:
    """Calls ``op(key)`` with one fresh Idempotency-Key, again after ``delay``
    (doubling up to 5s; longer when the service asks with Retry-After) while
    it raises a retryable error (:func:`turnledger.retryable`), at most
    ``attempts`` times (0: until ``deadline``, a ``time.monotonic()`` value,
    or forever)."""
    key = new_idempotency_key()
    n = 0
    while True:
        n += 1
        try:
            return op(key)
        except Exception as e:
            if not retryable(e) or (attempts and n >= attempts):
                raise
            wait = max(delay, getattr(e, "retry_after", None) or 0.0)
            if deadline is not None and time.monotonic() + wait > deadline:
                raise
            if abort is not None:
                if abort.wait(wait):
                    raise
            else:
                time.sleep(wait)
            delay = min(delay * 2, 5.0)


@dataclass
class Result:
    """What a handler may return to choose the outcome: ``outcome``
    (succeeded, failed or stopped), ``final_payload`` and
    ``final_record_role`` (default ``"final"``). A handler that returns a
    dict or None finishes the Turn as succeeded with it as the final
    payload."""

    outcome: str = "succeeded"
    final_payload: Optional[dict[str, Any]] = None
    final_record_role: Optional[str] = None


class Job:
    """One claimed Turn handed to a handler.

    ``turn`` is the Turn as claimed, ``claim`` the live claim (its
    ``expires_at`` moves as it is renewed). A handler cannot be interrupted:
    it looks at ``cancelled`` (or calls :meth:`wait` or
    :meth:`raise_if_cancelled`) to learn that a stop was requested
    (``stop_requested``), that the claim was lost or that the worker's
    shutdown grace ended; ``cause`` says which.
    """

    def __init__(self, client: Client, res: t.ClaimResult, retry_delay: float) -> None:
        self.client = client
        self.turn: t.Turn = res["turn"]
        self._claim: t.ClaimToken = res["claim"]
        self._delay = retry_delay
        self._lock = threading.Lock()
        self._stop_requested = False
        self._cause: Optional[str] = None
        self._cancelled = threading.Event()
        self._done = Abort()  # the handler returned: renewals end

    @property
    def claim(self) -> t.ClaimToken:
        with self._lock:
            return self._claim

    @property
    def input(self) -> Any:
        """The Turn's input."""
        return self.turn["input"]

    @property
    def stop_requested(self) -> bool:
        """Whether an operator asked to stop the Turn."""
        with self._lock:
            return self._stop_requested

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    @property
    def cause(self) -> Optional[str]:
        """Why the job was cancelled: "stop_requested", "claim_lost",
        "shutdown", or None."""
        with self._lock:
            return self._cause

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Sleeps until the job is cancelled or ``timeout`` passes; reports
        whether it was cancelled."""
        return self._cancelled.wait(timeout)

    def raise_if_cancelled(self) -> None:
        """Raises :class:`turnledger.Cancelled` when the job was cancelled."""
        cause = self.cause
        if cause is not None:
            raise Cancelled(cause)

    def record(self, role: str, payload: dict[str, Any]) -> t.RecordResult:
        """Appends a semantic record under the job's claim. It is sent with an
        Idempotency-Key and sent again with it (up to 5 attempts) when the
        answer is lost or the service unavailable, so it is appended once. An
        answer with stop_requested cancels the job. A lost claim raises
        FencingError."""
        claim = self.claim
        try:
            res = retry_keyed(
                lambda key: self.client.append_semantic_record(claim, role, payload, idempotency_key=key),
                attempts=5, delay=self._delay,
            )
        except FencingError:
            self._cancel(CLAIM_LOST)
            raise
        if res["stop_requested"]:
            self._mark_stop()
        return res

    def context(self) -> list[t.ContextItem]:
        """The Turn's semantic records so far (every page)."""
        items: list[t.ContextItem] = []
        after = 0
        while True:
            page = self.client.turn_context(self.turn["turn_id"], after_turn_seq=after, project=self.turn["project_id"])
            items.extend(page["items"])
            if not page["has_more"] or not page["items"]:
                return items
            after = page["next_after_turn_seq"]

    def _set_claim(self, claim: t.ClaimToken) -> None:
        with self._lock:
            self._claim = claim

    def _mark_stop(self) -> None:
        with self._lock:
            self._stop_requested = True
        self._cancel(STOP_REQUESTED)

    def _cancel(self, cause: str) -> None:
        with self._lock:
            if self._cause is None:
                self._cause = cause
        self._cancelled.set()

    def __repr__(self) -> str:
        return f"Job(turn_id={self.turn['turn_id']!r})"


Handler = Callable[[Job], Union[None, dict, Result]]


class Worker:
    """Claims the Turns of an agent and runs ``handler`` for each, at most
    ``concurrency`` at once (default: the agent's capacity).

    The handler gets a :class:`Job` and returns the final payload (a dict or
    None; the Turn finishes as succeeded), a :class:`Result`, or raises: the
    Turn finishes as failed with ``{"error": "<the exception>"}``, as stopped
    when a stop was requested, and as failed with ``retry: true`` for a
    :class:`turnledger.Retry`. After a lost claim (a renewal refused, or a
    FencingError from the handler) or a shutdown the Turn is not finished
    here.

    Claims are long polls of ``wait_s``; each claim is renewed when
    ``renew_fraction`` (a third) of its remaining lease has passed. Claims,
    renewals, records and finishes are sent again with their Idempotency-Key
    after a lost answer, a 5xx or a 429 (after ``retry_delay_s``, or the
    service's Retry-After when longer). A claim refused for good (a 401 of a
    revoked credential, a 403, a 404) ends :meth:`run` with that Error.

    :meth:`run` blocks until :meth:`stop` (or SIGINT/SIGTERM when run in the
    main thread with ``handle_signals``); the shutdown claims nothing more,
    gives running handlers ``shutdown_grace_s`` to finish their Turns, then
    cancels them (cause "shutdown": their claims are handed back and the Turns are
    queued again) and returns once all have returned.
    """

    def __init__(
        self,
        client: Client,
        handler: Handler,
        *,
        concurrency: Optional[int] = None,
        wait_s: float = 30.0,
        renew_fraction: float = 1 / 3,
        shutdown_grace_s: float = 30.0,
        retry_delay_s: float = 1.0,
        presence_interval_s: Optional[float] = 30.0,
        project: Optional[str] = None,
        agent: Optional[str] = None,
        handle_signals: bool = True,
        logger: Optional[logging.Logger] = None,
    ) -> None:
        self.client = client
        self.handler = handler
        self.project = project or client.project
        self.agent = agent or client.agent
        errs = []
        if not self.project or not self.agent:
            errs.append("a worker needs a project and an agent (the client's or project=, agent=)")
        if concurrency is not None and concurrency < 1:
            errs.append("concurrency must be at least 1")
        if not 0 <= wait_s <= 60:
            errs.append("wait_s must be 0 to 60")
        if not 0 < renew_fraction < 1:
            errs.append("renew_fraction must be in (0, 1)")
        if errs:
            raise ValueError("turnledger: " + "; ".join(errs))
        self.concurrency = concurrency
        self.wait_s = wait_s
        self.renew_fraction = renew_fraction
        self.shutdown_grace_s = shutdown_grace_s
        self.retry_delay_s = retry_delay_s
        self.presence_interval_s = presence_interval_s
        self.handle_signals = handle_signals
        self.log = logger or _log
        self._stopping = Abort()
        self._lock = threading.Lock()
        self._jobs: set[Job] = set()

    def stop(self) -> None:
        """Starts the shutdown (safe from any thread and from signal handlers)."""
        self._stopping.set()

    def run(self) -> None:
        """Claims and runs Turns until stopped, then shuts down; see the class doc."""
        old: dict[int, Any] = {}
        if self.handle_signals and threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                old[sig] = signal.signal(sig, lambda *_: self.stop())
        try:
            self._run()
        finally:
            for sig, h in old.items():
                signal.signal(sig, h)

    def _run(self) -> None:
        capacity = self.concurrency
        if capacity is None:
            capacity = max(self.client.get_agent(self.agent, project=self.project)["capacity"], 1)
        slots = threading.BoundedSemaphore(capacity)
        threads: list[threading.Thread] = []
        presence: Optional[threading.Thread] = None
        if self.presence_interval_s and self.presence_interval_s > 0:
            presence = threading.Thread(target=self._presence, name="turnledger-presence", daemon=True)
            presence.start()
        refusal: Optional[BaseException] = None
        key = new_idempotency_key()  # one key for a claim and its retries
        try:
            while not self._stopping.is_set():
                if not slots.acquire(timeout=0.2):
                    continue
                try:
                    res = self.client.claim_turn(
                        self.agent, project=self.project, wait_s=self.wait_s or None,
                        idempotency_key=key, abort=self._stopping)
                    key = new_idempotency_key()  # answered: the next claim is a new one
                except Exception as e:
                    slots.release()
                    if self._stopping.is_set():
                        break
                    if refused_for_good(e):
                        self.log.error("turnledger worker: the service refuses to give this agent work; stopping: %s", e)
                        refusal = e
                        break
                    self.log.warning("turnledger worker: claim: %s", e)
                    self._stopping.wait(max(self.retry_delay_s, getattr(e, "retry_after", None) or 0.0))
                    continue
                if res is None:
                    slots.release()
                    continue
                job = Job(self.client, res, self.retry_delay_s)
                th = threading.Thread(target=self._job, args=(job, slots), name=f"turnledger-job-{res['turn']['turn_id']}", daemon=True)
                with self._lock:
                    self._jobs.add(job)
                threads = [x for x in threads if x.is_alive()]
                threads.append(th)
                th.start()
        finally:
            self._stopping.set()
            deadline = time.monotonic() + self.shutdown_grace_s
            for th in threads:
                th.join(max(deadline - time.monotonic(), 0))
            with self._lock:
                left = list(self._jobs)
            for job in left:
                job._cancel(SHUTDOWN)
            for th in threads:
                th.join()
            if presence is not None:
                presence.join()
        if refusal is not None:
            raise refusal

    def _presence(self) -> None:
        while True:
            try:
                self.client.heartbeat_presence(self.agent, project=self.project, abort=self._stopping)
            except Exception as e:
                if not self._stopping.is_set():
                    self.log.warning("turnledger worker: presence: %s", e)
            if self._stopping.wait(self.presence_interval_s):
                return

    def _job(self, job: Job, slots: threading.BoundedSemaphore) -> None:
        try:
            self._run_job(job)
        except Exception:  # a bug here must not kill the worker
            self.log.exception("turnledger worker: job %s", job.turn["turn_id"])
        finally:
            with self._lock:
                self._jobs.discard(job)
            slots.release()

    def _run_job(self, job: Job) -> None:
        turn_id = job.turn["turn_id"]
        if job.turn.get("stop_requested"):
            job._mark_stop()
        renewer = threading.Thread(target=self._renew, args=(job,), name=f"turnledger-renew-{turn_id}", daemon=True)
        renewer.start()
        result: Any = None
        error: Optional[BaseException] = None
        try:
            result = self.handler(job)
        except Exception as e:
            error = e
        job._done.set()
        renewer.join()
        if isinstance(error, FencingError):
            job._cancel(CLAIM_LOST)
        cause = job.cause
        if cause == CLAIM_LOST:
            self.log.warning("turnledger worker: the claim of Turn %s was lost; the Turn is not finished here", turn_id)
            return
        if cause == SHUTDOWN:
            # Hand the claim back at once rather than let it expire: the Turn
            # is claimable again now, in its old place, the attempt not counted.
            try:
                retry_keyed(lambda key: self.client.release_claim(job.claim, idempotency_key=key),
                            delay=self.retry_delay_s, deadline=time.monotonic() + 10)
                self.log.info("turnledger worker: shutdown cancelled the handler of Turn %s; its claim was handed back", turn_id)
            except Exception as e:
                self.log.warning("turnledger worker: shutdown cancelled the handler of Turn %s and could not hand its claim back (%s); it will expire", turn_id, e)
            return
        req: dict[str, Any]
        if error is not None:
            text = str(error) or type(error).__name__
            if job.stop_requested:
                req = {"outcome": "stopped", "final_payload": {"error": text}}
            else:
                req = {"outcome": "failed", "final_payload": {"error": text}, "retry": isinstance(error, Retry) or None}
        elif isinstance(result, Result):
            req = {"outcome": result.outcome or "succeeded", "final_payload": result.final_payload,
                   "final_record_role": result.final_record_role}
        elif result is None or isinstance(result, dict):
            req = {"outcome": "succeeded", "final_payload": result}
        else:
            req = {"outcome": "failed", "final_payload": {"error": f"the handler returned a {type(result).__name__}, not a dict, None or a Result"}}
        req["final_record_role"] = req.get("final_record_role") or "final"
        # The finish is sent again with one Idempotency-Key while its answer is
        # lost or the service unavailable, for up to 30s: a retry after a lost
        # answer gets that answer, not a fencing error for a Turn it finished.
        try:
            retry_keyed(lambda key: self.client.finish_turn(job.claim, idempotency_key=key, **req),
                        delay=self.retry_delay_s, deadline=time.monotonic() + 30)
        except Exception as e:
            self.log.warning("turnledger worker: finish Turn %s (%s): %s", turn_id, req["outcome"], e)

    def _renew(self, job: Job) -> None:
        failures = 0
        key = ""
        while True:
            left = (parse_time(job.claim["expires_at"]) - _dt.datetime.now(_dt.timezone.utc)).total_seconds()
            wait = left * self.renew_fraction
            if failures:
                wait = min(wait, self.retry_delay_s)
            if job._done.wait(max(wait, 0.01)):
                return
            if failures == 0:
                key = new_idempotency_key()
            try:
                res = self.client.renew_claim(job.claim, idempotency_key=key)
            except Exception as e:
                if job._done.is_set():
                    return
                if refused_for_good(e):
                    job._cancel(CLAIM_LOST)
                    return
                failures += 1  # the server or the network: try again soon, until the lease runs out
                if parse_time(job.claim["expires_at"]) <= _dt.datetime.now(_dt.timezone.utc):
                    job._cancel(CLAIM_LOST)
                    return
                continue
            failures = 0
            job._set_claim(res["claim"])
            if res["stop_requested"] and not job.stop_requested:
                job._mark_stop()
