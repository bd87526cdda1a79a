"""Every route once against a real serve, and refusals as Errors."""

from __future__ import annotations

import unittest

from tests.serve import Serve, dispatch

import turnledger
from turnledger import Feed


def snake(op: str) -> str:
    out = ""
    for ch in op:
        out += "_" + ch.lower() if ch.isupper() else ch
    return out


class ClientTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.s = Serve()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.s.close()

    def test_a_method_per_operation(self) -> None:
        doc = self.s.admin().openapi()
        ops = [o["operationId"] for ops in doc["paths"].values() for o in ops.values() if isinstance(o, dict) and "operationId" in o]
        self.assertGreater(len(ops), 40)
        missing = [snake(o) for o in ops if not callable(getattr(turnledger.Client, snake(o), None))]
        self.assertEqual(missing, [], "operations without a method")

    def test_every_route(self) -> None:
        s = self.s
        p = "every"
        adm = s.admin()
        boss = s.agent(p, "boss", grants=("turns:dispatch", "management", "projections:read"))
        w = s.agent(p, "w", capacity=2)
        self.assertEqual(adm.healthz(), {"status": "ok"})
        self.assertIn("status", adm.readyz())
        self.assertIn("paths", adm.openapi())
        self.assertIn("turnledger_", adm.metrics())  # served to loopback clients
        self.assertIn({"project_id": p}, adm.list_projects()["items"])
        tr = adm.get_trends()
        self.assertEqual((tr["minute_s"], len(tr["points"]), tr["points"][-1]["sampled"]), (60, 60, True))

        creds = w.list_credentials()
        self.assertEqual([c["status"] for c in creds["items"]], ["active"])
        extra = adm.issue_credential("w", project=p)
        self.assertEqual(adm.revoke_credential(extra["credential"]["credential_id"], agent_id="w", project=p), {"ok": True})

        a = w.get_agent()
        self.assertEqual((a["capacity"], a["admitting"]), (2, True))
        r = w.submit_work_memory_report("wm1", summary="s", records=[{"role": "observation", "payload": {"a": 1}, "source_refs": []}])
        self.assertEqual(r["agent_id"], "w")
        self.assertTrue(boss.drain_agent("w")["drained"])
        self.assertFalse(boss.resume_agent("w")["drained"])
        w.heartbeat_presence()
        self.assertEqual(boss.replace_public_metadata({"team": "blue"}, agent_id="w")["public_metadata"], {"team": "blue"})

        self.assertIsNone(w.claim_turn())
        tv = dispatch(boss, "w", "k1", tags=["a"], priority=2)
        self.assertEqual((tv["priority"], tv["tags"]), (2, ["a"]))
        c = w.claim_turn(wait_s=1)
        assert c is not None
        self.assertEqual(c["turn"]["turn_id"], tv["turn_id"])
        self.assertEqual(w.renew_claim(c["claim"])["claim"]["token"], c["claim"]["token"])
        self.assertEqual(w.append_semantic_record(c["claim"], "note", {"x": 1})["turn_seq"], 1)
        kid = w.dispatch_turn("w", "summarize", "kid", parent_claim=c["claim"])
        self.assertEqual(len(w.turn_lineage(kid["turn_id"], limit=10)["items"]), 2)
        self.assertEqual(len(w.turn_context(tv["turn_id"], limit=10)["items"]), 1)
        self.assertEqual(w.suspend_turn(c["claim"])["state"], "suspended")
        self.assertEqual(boss.resume_turn(tv["turn_id"])["state"], "queued")
        c2 = w.claim_turn(wait_s=1)
        assert c2 is not None
        self.assertTrue(boss.stop_turn(c2["turn"]["turn_id"])["stop_requested"])
        fin = w.finish_turn(c2["claim"], outcome="stopped", final_payload={"done": True})
        self.assertEqual((fin["state"], fin["outcome"]), ("finished", "stopped"))
        self.assertEqual(w.get_turn(tv["turn_id"])["state"], "finished")
        retried = boss.retry_turn(tv["turn_id"])
        self.assertEqual(retried["retry_of"], tv["turn_id"])
        with self.assertRaises(turnledger.ConflictError):
            boss.retry_turn(tv["turn_id"])
        w.reconcile_expired_claims()

        # Waiting for input, answered with the input token alone.
        c3 = w.claim_turn(wait_s=1)
        assert c3 is not None
        sus = w.suspend_turn(c3["claim"], awaiting_input={"prompt": "which?", "schema": None})
        self.assertTrue(sus["input_token"].startswith("tli_"))
        anon = turnledger.Client(s.url)
        back = anon.provide_turn_input(sus["turn_id"], {"answer": 42}, input_token=sus["input_token"], project=p)
        self.assertEqual(back["state"], "queued")

        # Bulk actions.
        stopped = boss.bulk_stop_turns(filter={"target_agent_id": "w", "state": "queued"}, reason="test")
        self.assertGreaterEqual(len(stopped["stopped"]), 1)
        self.assertFalse(stopped["has_more"])
        again = boss.bulk_retry_turns(filter={"target_agent_id": "w", "outcome": "stopped"}, limit=1)
        self.assertEqual(len(again["retried"]), 1)

        tf = w.turn_feed(tv["turn_id"], limit=2)
        self.assertEqual(len(tf["items"]), 2)
        self.assertTrue(tf["has_more"])
        af = w.agent_feed(after_ledger_seq=tf["items"][0]["ledger_seq"])
        self.assertGreater(af["items"][0]["ledger_seq"], tf["items"][0]["ledger_seq"])
        self.assertGreater(len(boss.project_feed()["items"]), 0)
        self.assertEqual(len(boss.list_agents(enabled_only=True)["items"]), 2)
        self.assertEqual(len(boss.list_turn_offers(agent_id="w")["items"]), 1)
        self.assertGreaterEqual(len(boss.list_turns(state="finished", tag=["a"])["items"]), 1)

        mat = adm.request_agent_credential_tokens("boot", project=p)
        self.assertEqual(mat["profile"]["agent_id"], "boot")
        for i, redeem in enumerate([anon.redeem_join, anon.redeem_join_byoa]):
            inv = adm.create_join_invite(f"j{i}", profile_kind="byoa", runtime_kind="python", spec={"capacity": 1}, project=p)
            self.assertTrue(redeem(inv["join_code"])["agent_credential_token"])
            with self.assertRaises(turnledger.Error):
                anon.redeem_join(inv["join_code"])

    def test_errors(self) -> None:
        s = self.s
        p = "errors"
        boss = s.agent(p, "boss", grants=("turns:dispatch",))
        w = s.agent(p, "w")
        with self.assertRaises(turnledger.NotFoundError) as cm:
            w.get_turn("nope")
        e = cm.exception
        self.assertEqual((e.status, e.error), (404, "NotFoundError"))
        self.assertTrue(e.message)
        self.assertIsInstance(e, turnledger.Error)
        with self.assertRaises(turnledger.ForbiddenError):
            w.project_feed()
        with self.assertRaises(turnledger.UnauthorizedError) as cm2:
            turnledger.Client(s.url, project=p, agent="w", token="wrong").get_agent()
        self.assertEqual(cm2.exception.status, 401)
        with self.assertRaises(turnledger.ValidationError):
            w.claim_turn(wait_s=120)
        dispatch(boss, "w", "k")
        c = w.claim_turn()
        assert c is not None
        forged = dict(c["claim"], token="forged")
        with self.assertRaises(turnledger.FencingError) as cm3:
            w.renew_claim(forged)  # type: ignore[arg-type]
        self.assertEqual(cm3.exception.status, 409)
        with self.assertRaises(turnledger.ForbiddenError):
            next(iter(w.follow(Feed.project(p))))
        with self.assertRaises(ValueError):
            turnledger.Client("not a url")

    def test_idempotency_key_answers_the_first_result(self) -> None:
        adm = self.s.admin()
        self.s.agent("idem", "w")
        key = turnledger.new_idempotency_key()
        first = adm.issue_credential("w", project="idem", idempotency_key=key)
        again = adm.issue_credential("w", project="idem", idempotency_key=key)
        self.assertEqual(first, again)
        other = adm.issue_credential("w", project="idem", idempotency_key=turnledger.new_idempotency_key())
        self.assertNotEqual(other["token"], first["token"])


if __name__ == "__main__":
    unittest.main()
