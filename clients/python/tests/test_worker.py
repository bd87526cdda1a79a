"""The worker against a real serve: a hundred Turns with eight handlers at
once, outcomes of failures and retries, renewals, graceful shutdown."""

from __future__ import annotations

import threading
import time
import unittest
from collections import Counter
from typing import Any

from tests.serve import Serve, dispatch, events, outcome, until
from tests.test_situations import Running, worker

import turnledger


class WorkerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.s = Serve()
        cls.short = Serve("--claim-ttl", "1s")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.s.close()
        cls.short.close()

    def test_hundred_turns_eight_handlers_each_finished_once(self) -> None:
        s, p = self.s, "hundred"
        boss = s.agent(p, "boss", grants=("turns:dispatch", "projections:read"))
        w = s.agent(p, "w", capacity=8)
        lock = threading.Lock()
        calls: Counter[str] = Counter()
        running = most = 0

        def handle(job: turnledger.Job) -> Any:
            nonlocal running, most
            with lock:
                calls[job.turn["turn_id"]] += 1
                running += 1
                most = max(most, running)
            time.sleep(0.02)
            with lock:
                running -= 1
            return {"n": job.input["text"]}

        r = Running(worker(w, handle, concurrency=8))
        try:
            ids = [dispatch(boss, "w", f"t{i}")["turn_id"] for i in range(100)]
            until("100 Turns finished", lambda: len(boss.list_turns(state="finished", limit=500)["items"]) == 100, 60)
        finally:
            self.assertIsNone(r.stop())
        self.assertEqual(set(calls), set(ids))
        self.assertEqual(set(calls.values()), {1}, "a handler ran twice for a Turn")
        self.assertLessEqual(most, 8)
        self.assertGreater(most, 1, "the handlers never ran at once")
        turns = boss.list_turns(state="finished", limit=500)["items"]
        self.assertEqual({t["outcome"] for t in turns}, {"succeeded"})
        feed: list[turnledger.types.FeedItem] = []
        after = 0
        while True:
            page = boss.project_feed(after_ledger_seq=after, limit=500)
            feed += page["items"]
            if not page["has_more"]:
                break
            after = page["next_after_ledger_seq"]
        for typ in ("turn.claimed", "turn.finished"):
            per = Counter(it["id"] for it in feed if it["type"] == typ)
            self.assertEqual((len(per), set(per.values())), (100, {1}), typ)

    def test_outcomes(self) -> None:
        s, p = self.s, "outcomes"
        boss = s.agent(p, "boss", grants=("turns:dispatch",))
        w = s.agent(p, "w")

        def handle(job: turnledger.Job) -> Any:
            key = job.turn["dispatch_key"]
            if key == "fail":
                raise RuntimeError("boom")
            if key == "retry":
                if job.turn["attempts"] < 2:
                    raise turnledger.Retry("later")
                return {"attempt": job.turn["attempts"]}
            if key == "result":
                return turnledger.Result(outcome="failed", final_payload={"why": "chosen"}, final_record_role="verdict")
            return None

        r = Running(worker(w, handle))
        try:
            fail = dispatch(boss, "w", "fail")
            retry = dispatch(boss, "w", "retry", retry_backoff={"initial_s": 0.1})
            result = dispatch(boss, "w", "result")
            plain = dispatch(boss, "w", "plain")
            for tv, want in ((fail, "failed"), (retry, "succeeded"), (result, "failed"), (plain, "succeeded")):
                until(f"{tv['dispatch_key']} finished", lambda: outcome(boss, tv["turn_id"]) == want)
        finally:
            r.stop()
        self.assertEqual(boss.get_turn(fail["turn_id"])["final_payload"], {"error": "boom"})
        got = boss.get_turn(retry["turn_id"])
        self.assertEqual((got["attempts"], got["final_payload"]), (2, {"attempt": 2}))
        self.assertIn("turn.retry_scheduled", events(boss, retry["turn_id"]))
        got = boss.get_turn(result["turn_id"])
        self.assertEqual((got["final_record_role"], got["final_payload"]), ("verdict", {"why": "chosen"}))
        self.assertIsNone(boss.get_turn(plain["turn_id"])["final_payload"])

    def test_renews_and_shuts_down_gracefully(self) -> None:
        """With one-second claims a handler working past them keeps its claim;
        a shutdown claims nothing more but lets the running handler finish."""
        s, p = self.short, "renew"
        boss = s.agent(p, "boss", grants=("turns:dispatch",))
        w = s.agent(p, "w")
        started, release = threading.Event(), threading.Event()

        def handle(job: turnledger.Job) -> Any:
            started.set()
            release.wait(30)
            return {"ok": True}

        r = Running(worker(w, handle))
        tv = dispatch(boss, "w", "k")
        self.assertTrue(started.wait(20))
        until("three renewals", lambda: events(boss, tv["turn_id"]).count("turn.claim_renewed") >= 3)
        r.worker.stop()
        other = dispatch(boss, "w", "after")
        time.sleep(0.3)
        self.assertTrue(r.thread.is_alive(), "run() returned while a handler was running")
        release.set()
        r.thread.join(20)
        self.assertIsNone(r.error)
        self.assertEqual(outcome(boss, tv["turn_id"]), "succeeded")
        self.assertEqual(boss.get_turn(other["turn_id"])["state"], "queued")

    def test_shutdown_grace_cancels_a_running_handler(self) -> None:
        s, p = self.s, "grace"
        boss = s.agent(p, "boss", grants=("turns:dispatch",))
        w = s.agent(p, "w")
        started = threading.Event()
        seen: dict[str, Any] = {}

        def handle(job: turnledger.Job) -> Any:
            started.set()
            job.wait()
            seen["cause"] = job.cause
            job.raise_if_cancelled()

        r = Running(worker(w, handle, shutdown_grace_s=0.2))
        tv = dispatch(boss, "w", "k")
        self.assertTrue(started.wait(20))
        t0 = time.monotonic()
        self.assertIsNone(r.stop())
        self.assertGreaterEqual(time.monotonic() - t0, 0.2)
        self.assertEqual(seen["cause"], "shutdown")
        after = boss.get_turn(tv["turn_id"])  # its claim handed back: queued again, the attempt not counted
        self.assertEqual((after["state"], after["attempts"]), ("queued", 0))

    def test_reports_presence(self) -> None:
        w = self.s.agent("presence", "w")
        self.assertEqual(w.get_agent()["presence"], "never")
        r = Running(worker(w, lambda job: None))
        try:
            until("the agent online", lambda: w.get_agent()["presence"] == "online")
        finally:
            r.stop()


if __name__ == "__main__":
    unittest.main()
