"""The HTTP layer under Client: one request, one response.

A transport is a callable ``(Request, Abort | None) -> Response``. The default
one uses :mod:`http.client` with a connection per request (loopback and LAN
connections are cheap, and no stale keep-alive connection is ever reused for a
request that must not be sent twice). Pass another to ``Client(transport=...)``
to go through a proxy, to record requests, or, in tests, to lose answers.
"""

from __future__ import annotations

import http.client
import io
import socket
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import IO, Callable, Mapping, Optional

__all__ = ["Abort", "Request", "Response", "Transport", "default_transport"]


class Abort:
    """A handle that aborts blocking calls from another thread.

    ``Worker.stop()`` uses one to end a long-poll claim at once, and
    ``Client.follow`` one to end a stream. :meth:`set` closes the sockets of
    the calls made with it (they raise ``ConnectionError``) and wakes
    :meth:`wait`.
    """

    def __init__(self) -> None:
        self._event = threading.Event()
        self._lock = threading.Lock()
        self._callbacks: list[Callable[[], None]] = []

    def set(self) -> None:
        with self._lock:
            self._event.set()
            callbacks, self._callbacks = self._callbacks, []
        for fn in callbacks:
            try:
                fn()
            except Exception:  # a socket already closed
                pass

    def is_set(self) -> bool:
        return self._event.is_set()

    def wait(self, timeout: Optional[float] = None) -> bool:
        """Sleeps until set or timeout; reports whether it is set."""
        return self._event.wait(timeout)

    def on_abort(self, fn: Callable[[], None]) -> Callable[[], None]:
        """Calls fn when set (at once when it already is); returns a function
        that unregisters it."""
        with self._lock:
            if not self._event.is_set():
                self._callbacks.append(fn)

                def remove() -> None:
                    with self._lock:
                        if fn in self._callbacks:
                            self._callbacks.remove(fn)

                return remove
        fn()
        return lambda: None


@dataclass
class Request:
    method: str
    url: str
    headers: dict[str, str]
    body: Optional[bytes] = None
    timeout: Optional[float] = None
    stream: bool = False  # the caller reads the body line by line


@dataclass
class Response:
    """A response: status, headers (names in lower case) and the body."""

    status: int
    headers: Mapping[str, str]
    body: IO[bytes] = field(default_factory=io.BytesIO)
    _close: Optional[Callable[[], None]] = None

    def header(self, name: str) -> Optional[str]:
        return self.headers.get(name.lower())

    def read(self) -> bytes:
        return self.body.read()

    def readline(self) -> bytes:
        return self.body.readline()

    def close(self) -> None:
        try:
            self.body.close()
        finally:
            if self._close is not None:
                self._close()


Transport = Callable[[Request, Optional[Abort]], Response]


def default_transport(req: Request, abort: Optional[Abort] = None) -> Response:
    u = urllib.parse.urlsplit(req.url)
    conn: http.client.HTTPConnection
    if u.scheme == "https":
        conn = http.client.HTTPSConnection(u.hostname or "", u.port, timeout=req.timeout)
    else:
        conn = http.client.HTTPConnection(u.hostname or "", u.port, timeout=req.timeout)
    if abort is not None and abort.is_set():
        raise ConnectionAbortedError("turnledger: aborted")
    remove: Callable[[], None] = lambda: None
    try:
        conn.connect()
        if abort is not None:
            sock = conn.sock

            def cut() -> None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

            remove = abort.on_abort(cut)
        path = u.path + ("?" + u.query if u.query else "")
        conn.request(req.method, path, body=req.body, headers=req.headers)
        resp = conn.getresponse()
    except BaseException:
        remove()
        conn.close()
        if abort is not None and abort.is_set():
            raise ConnectionAbortedError("turnledger: aborted") from None
        raise
    headers = {k.lower(): v for k, v in resp.getheaders()}

    def close() -> None:
        remove()
        conn.close()

    return Response(resp.status, headers, resp, close)  # type: ignore[arg-type]
