"""The situations of clients/situations.md, each as the Go client's tests
have them, against a real serve: a lost claim, a stop request, a revoked
credential, a 503 with Retry-After, a lost answer retried with its key, a
feed broken mid-stream."""

from __future__ import annotations

import logging
import threading
import time
import unittest
from typing import Any, Optional

from tests.faults import Faults, answer
from tests.serve import Serve, dispatch, events, outcome, until

import turnledger
from turnledger import Feed

quiet = logging.getLogger("turnledger.test.quiet")
quiet.addHandler(logging.NullHandler())
quiet.propagate = False


class Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


class Running:
    """A worker run in a thread; ``error`` is what run() raised."""

    def __init__(self, worker: turnledger.Worker) -> None:
        self.worker = worker
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.worker.run()
        except BaseException as e:  # noqa: BLE001
            self.error = e

    def stop(self) -> Optional[BaseException]:
        self.worker.stop()
        self.thread.join(30)
        return self.error


def worker(c: turnledger.Client, handler: Any, **kw: Any) -> turnledger.Worker:
    kw.setdefault("wait_s", 1)
    kw.setdefault("retry_delay_s", 0.01)
    kw.setdefault("logger", quiet)
    return turnledger.Worker(c, handler, handle_signals=False, **kw)


class Situations(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.s = Serve()
        # Claims of one second, expired claims reaped at once: for the lost claim.
        cls.short = Serve("--claim-ttl", "1s", "--reap-interval", "100ms")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.s.close()
        cls.short.close()

    def setUp(self) -> None:
        self.runs: list[Running] = []

    def tearDown(self) -> None:
        for r in self.runs:
            r.stop()

    def start(self, w: turnledger.Worker) -> Running:
        r = Running(w)
        self.runs.append(r)
        return r

    def test_lost_claim(self) -> None:
        """The claim expires (its renewals cannot get through) and the reaper
        releases the Turn: the handler's record is refused with FencingError,
        the job is cancelled with cause claim_lost and the worker does not
        finish the Turn with the lost claim; the Turn is claimed again and
        finished by the next run."""
        s, p = self.short, "lost"
        boss = s.agent(p, "boss", grants=("turns:dispatch",))
        faults = Faults()
        w = s.agent(p, "w", transport=faults)
        seen: dict[str, Any] = {}
        runs = 0

        def handle(job: turnledger.Job) -> Any:
            nonlocal runs
            runs += 1
            if runs > 1:
                return {"second": True}
            faults.block.add("/claims:renew")
            until("the Turn released by the reaper", lambda: boss.get_turn(job.turn["turn_id"])["state"] == "queued")
            seen["token"] = job.claim["token"]
            try:
                job.record("late", {})
            except turnledger.FencingError as e:
                seen["error"] = e
                seen["cause"] = job.cause
                faults.block.clear()
                raise
            return {"unexpected": True}

        self.start(worker(w, handle))
        tv = dispatch(boss, "w", "k")
        until("the Turn finished", lambda: outcome(boss, tv["turn_id"]) is not None)
        self.assertIsInstance(seen.get("error"), turnledger.FencingError)
        self.assertEqual(seen.get("cause"), "claim_lost")
        self.assertEqual(outcome(boss, tv["turn_id"]), "succeeded")
        finished_with = [b["claim"]["token"] for b in faults.bodies(":finish")]
        self.assertNotIn(seen["token"], finished_with, "the worker finished with the lost claim")
        evs = events(boss, tv["turn_id"])
        self.assertEqual((evs.count("turn.claimed"), evs.count("turn.claim_expired"), evs.count("turn.finished")), (2, 1, 1), evs)

    def test_stop_request(self) -> None:
        """A stop request is seen by the running handler (through its
        record's answer) and the Turn finishes as stopped."""
        s, p = self.s, "stop"
        boss = s.agent(p, "boss", grants=("turns:dispatch", "management"))
        w = s.agent(p, "w")
        started = threading.Event()
        seen: dict[str, Any] = {}

        def handle(job: turnledger.Job) -> Any:
            started.set()
            while not job.wait(0.02):
                job.record("tick", {})
            seen["stop_requested"], seen["cause"] = job.stop_requested, job.cause
            job.raise_if_cancelled()

        self.start(worker(w, handle))
        tv = dispatch(boss, "w", "k")
        self.assertTrue(started.wait(20))
        boss.stop_turn(tv["turn_id"])
        until("the Turn stopped", lambda: outcome(boss, tv["turn_id"]) == "stopped")
        self.assertEqual(seen, {"stop_requested": True, "cause": "stop_requested"})

    def test_revoked_credential(self) -> None:
        """A claim refused for good (401: the credential was revoked while the
        worker waited) ends run() with that UnauthorizedError."""
        s, p = self.s, "revoked"
        faults = Faults()
        w = s.agent(p, "w", transport=faults)
        r = self.start(worker(w, lambda job: None, wait_s=0.2))
        until("the worker to claim", lambda: len(faults.keys("/claims:claim")) >= 1)
        adm = s.admin()
        cred = adm.list_credentials("w", project=p)["items"][0]
        adm.revoke_credential(cred["credential_id"], agent_id="w", project=p)
        r.thread.join(20)
        self.assertFalse(r.thread.is_alive(), "run() still runs after its credential was revoked")
        self.assertIsInstance(r.error, turnledger.UnauthorizedError)
        assert isinstance(r.error, turnledger.Error)
        self.assertEqual(r.error.status, 401)

    def test_unavailable_with_retry_after(self) -> None:
        """A 503 with Retry-After: 1, a refused connection and a 500 do not
        stop the worker: the claim is sent again with the same
        Idempotency-Key, after the Retry-After for the 503; then the Turn
        runs."""
        s, p = self.s, "unavailable"
        boss = s.agent(p, "boss", grants=("turns:dispatch",))
        faults = Faults()

        def fail(n: int) -> Optional[turnledger.Response]:
            if n == 0:
                return answer(503, "ServiceUnavailableError", retry_after="1")
            if n == 1:
                raise ConnectionRefusedError("test: connection refused")
            if n == 2:
                return answer(500, "InternalError")
            return None

        faults.fail["/claims:claim"] = fail
        w = s.agent(p, "w", transport=faults)
        tv = dispatch(boss, "w", "k")
        r = self.start(worker(w, lambda job: None))
        until("the Turn finished", lambda: outcome(boss, tv["turn_id"]) == "succeeded")
        self.assertTrue(r.thread.is_alive())
        keys, at = faults.keys("/claims:claim"), faults.times("/claims:claim")
        self.assertGreaterEqual(len(keys), 4)
        self.assertTrue(keys[0])
        self.assertEqual(keys[1:4], [keys[0]] * 3, "one key for the claim and its three retries")
        self.assertGreaterEqual(at[1] - at[0], 1.0, "the claim after a 503 with Retry-After: 1 came too soon")

    def test_lost_answers_retried_with_the_same_key(self) -> None:
        """The answers of a record and of the finish are lost once each: each
        is sent again with its Idempotency-Key and gets the first answer, so
        the record is on the ledger once and the Turn finished without a
        fencing error or a warning."""
        s, p = self.s, "lostanswer"
        boss = s.agent(p, "boss", grants=("turns:dispatch",))
        faults = Faults()
        faults.lose_first = {"/semantic-records", ":finish"}
        w = s.agent(p, "w", transport=faults)
        logs = Capture()
        log = logging.getLogger("turnledger.test.lostanswer")
        log.addHandler(logs)
        log.propagate = False

        def handle(job: turnledger.Job) -> Any:
            job.record("progress", {"step": 1})
            return {"summary": "done"}

        r = self.start(worker(w, handle, logger=log, presence_interval_s=None))
        tv = dispatch(boss, "w", "k1")
        until("the Turn finished", lambda: outcome(boss, tv["turn_id"]) is not None)
        r.stop()
        self.assertEqual(outcome(boss, tv["turn_id"]), "succeeded")
        for suf in ("/semantic-records", ":finish"):
            keys = faults.keys(suf)
            self.assertEqual(len(keys), 2, suf)
            self.assertTrue(keys[0])
            self.assertEqual(keys[0], keys[1], suf)
        self.assertEqual([r.getMessage() for r in logs.records if r.levelno >= logging.WARNING], [])
        self.assertEqual(events(boss, tv["turn_id"]), ["turn.dispatched", "turn.claimed", "turn.record_appended", "turn.finished"])

    def test_lost_claim_answer(self) -> None:
        """The server claims a Turn but the answer is lost: the retry carries
        the same key and gets the same claim, not a second Turn; the claim
        after it has a new key."""
        s, p = self.s, "lostclaim"
        boss = s.agent(p, "boss", grants=("turns:dispatch",))
        faults = Faults()
        faults.lose_first_claim = True
        w = s.agent(p, "w", capacity=2, transport=faults)
        first, second = dispatch(boss, "w", "first"), dispatch(boss, "w", "second")
        claims: list[turnledger.types.ClaimToken] = []
        self.start(worker(w, lambda job: claims.append(job.claim)))
        for tv in (first, second):
            until("the Turns finished", lambda: outcome(boss, tv["turn_id"]) == "succeeded")
            self.assertEqual(events(boss, tv["turn_id"]).count("turn.claimed"), 1)
        lost = faults.lost["/claims:claim"]
        self.assertIn(('"token":"' + claims[0]["token"] + '"').encode(), lost)
        self.assertEqual(claims[0]["turn_id"], first["turn_id"])
        keys = faults.keys("/claims:claim")
        self.assertEqual(keys[1], keys[0])
        self.assertNotEqual(keys[2], keys[0])

    def test_feed_broken_mid_stream(self) -> None:
        """follow() yields every event of the feed once, in order, while its
        connection is cut twice."""
        s, p = self.s, "follow"
        faults = Faults()
        boss = s.agent(p, "boss", grants=("turns:dispatch", "projections:read"), transport=faults)
        abort = turnledger.Abort()
        got: list[tuple[int, str]] = []
        lock = threading.Lock()

        def follow() -> None:
            for it in boss.follow(Feed.project(p), abort=abort):
                with lock:
                    got.append((it["ledger_seq"], it["type"]))

        th = threading.Thread(target=follow, daemon=True)
        th.start()
        try:
            for rnd in range(3):
                for i in range(5):
                    dispatch(boss, "boss", f"r{rnd}-{i}")
                n = len(boss.project_feed(limit=500)["items"])
                until(f"{n} events followed", lambda: len(got) >= n)
                faults.cut()
        finally:
            abort.set()
            th.join(10)
        self.assertGreaterEqual(faults.streams_opened, 3)
        want = [(it["ledger_seq"], it["type"]) for it in boss.project_feed(limit=500)["items"]]
        self.assertEqual(got, want)


if __name__ == "__main__":
    unittest.main()
