"""A transport that sees every request on its way to the real server and can
answer in its place, lose an answer after the server decided, or cut open
event streams — the Python twin of the Go tests' RoundTrippers."""

from __future__ import annotations

import io
import json
import threading
import time
from typing import Callable, Optional

from turnledger import IDEMPOTENCY_HEADER, Abort, Request, Response, default_transport

Fail = Callable[[int], Optional[Response]]


def answer(status: int, name: str, retry_after: Optional[str] = None) -> Response:
    headers = {"content-type": "application/json"}
    if retry_after:
        headers["retry-after"] = retry_after
    return Response(status, headers, io.BytesIO(json.dumps({"error": name, "message": "test"}).encode()))


class Faults:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sent: dict[str, list[tuple[str, float, dict]]] = {}  # suffix -> [(key, at, body)]
        self.fail: dict[str, Fail] = {}  # route suffix -> fail(n): an answer or None; may raise
        self.lose_first: set[str] = set()  # lose the first 200 answer of these routes
        self.lose_first_claim = False  # lose the first claim answer that won a Turn
        self.lost: dict[str, bytes] = {}
        self.block: set[str] = set()  # these routes fail with a refused connection
        self._streams: list[Abort] = []
        self.streams_opened = 0
        self.watch = (":finish", "/semantic-records", "/claims:claim", "/claims:renew")

    def _suffix(self, req: Request) -> Optional[str]:
        path = req.url.split("?", 1)[0]
        for s in self.watch:
            if path.endswith(s):
                return s
        return None

    def keys(self, suffix: str) -> list[str]:
        with self.lock:
            return [k for k, _, _ in self.sent.get(suffix, [])]

    def times(self, suffix: str) -> list[float]:
        with self.lock:
            return [at for _, at, _ in self.sent.get(suffix, [])]

    def bodies(self, suffix: str) -> list[dict]:
        with self.lock:
            return [b for _, _, b in self.sent.get(suffix, [])]

    def cut(self) -> None:
        """Cuts every open event stream, as a network failure would."""
        with self.lock:
            streams, self._streams = self._streams, []
        for a in streams:
            a.set()

    def __call__(self, req: Request, abort: Optional[Abort] = None) -> Response:
        if req.stream:
            mine = Abort()
            if abort is not None:
                abort.on_abort(mine.set)
            with self.lock:
                self._streams.append(mine)
                self.streams_opened += 1
            return default_transport(req, mine)
        suf = self._suffix(req)
        if suf is None:
            return default_transport(req, abort)
        with self.lock:
            lst = self.sent.setdefault(suf, [])
            n = len(lst)
            lst.append((req.headers.get(IDEMPOTENCY_HEADER, ""), time.monotonic(), json.loads(req.body or b"null")))
            blocked = suf in self.block
            fail = self.fail.get(suf)
        if blocked:
            raise ConnectionRefusedError("test: blocked")
        if fail is not None:
            resp = fail(n)
            if resp is not None:
                return resp
        resp = default_transport(req, abort)
        body = resp.read()
        resp.close()
        with self.lock:
            lose = False
            if resp.status == 200 and suf not in self.lost:
                if suf in self.lose_first or (suf == "/claims:claim" and self.lose_first_claim and body.strip() != b"null"):
                    lose = True
                    self.lost[suf] = body
        if lose:
            raise ConnectionResetError("test: the answer was lost")
        return Response(resp.status, resp.headers, io.BytesIO(body))
