"""turnledger.aio: the async client, follow and worker."""

from __future__ import annotations

import asyncio
import unittest
from typing import Any

from tests.serve import Serve, dispatch, until

import turnledger
from turnledger import Feed, aio


class AioTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls) -> None:
        cls.s = Serve()

    @classmethod
    def tearDownClass(cls) -> None:
        cls.s.close()

    def test_async_worker_client_and_follow(self) -> None:
        boss = self.s.agent("aio", "boss", grants=("turns:dispatch", "projections:read"))
        w = self.s.agent("aio", "w", capacity=2)

        async def main() -> None:
            ac = aio.AsyncClient(client=boss)
            self.assertEqual((await ac.healthz())["status"], "ok")

            async def handle(job: aio.AsyncJob) -> Any:
                await job.record("progress", {"async": True})
                await asyncio.sleep(0.01)
                return {"echo": job.input["text"]}

            wk = aio.Worker(w, handle, wait_s=1, retry_delay_s=0.01)
            run = asyncio.create_task(wk.run())
            ids = [(await ac.dispatch_turn("w", "summarize", f"a{i}", input={"text": f"a{i}"}))["turn_id"] for i in range(3)]
            finished: set[str] = set()
            async for ev in ac.follow(Feed.project("aio")):
                if ev["type"] == "turn.finished":
                    finished.add(ev["id"])
                if finished == set(ids):
                    break
            for i in ids:
                t = await ac.get_turn(i)
                self.assertEqual((t["outcome"], t["final_payload"]["echo"]), ("succeeded", t["input"]["text"]))
            with self.assertRaises(turnledger.NotFoundError):
                await ac.get_turn("nope")
            wk.stop()
            await asyncio.wait_for(run, 20)

        asyncio.run(main())


if __name__ == "__main__":
    unittest.main()
