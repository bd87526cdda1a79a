"""turnledger.aio — the same surface for asyncio.

This variant wraps the synchronous client in threads (``asyncio.to_thread``)
rather than speaking HTTP natively: the standard library has no asyncio HTTP
client, and one thread per call in flight is cheap for the calls an agent
makes. So:

- :class:`AsyncClient` has every method of :class:`turnledger.Client`, as a
  coroutine with the same arguments and answer (``await c.get_turn(id)``).
- :meth:`AsyncClient.follow` is an async iterator over a feed's event stream
  that resumes after a broken connection; leaving the ``async for`` (or
  cancelling the task) closes the stream.
- :class:`Worker` runs an ``async def handler(job)`` on the event loop it is
  started from; the claiming, renewal and finishing run in the worker's
  threads as in the sync Worker. ``await worker.run()``; ``worker.stop()``.
  :class:`AsyncJob` has ``await job.record(...)``, ``await job.wait(...)``
  and the sync Job's properties.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any, AsyncIterator, Awaitable, Callable, Optional, Union

from . import types as t
from ._transport import Abort
from .client import Client, Feed
from .worker import Job, Result
from .worker import Worker as _SyncWorker

__all__ = ["AsyncClient", "AsyncJob", "Worker"]


class AsyncClient:
    """Every method of :class:`turnledger.Client` as a coroutine. Made from the
    same arguments as a Client, or from one: ``AsyncClient(client=c)``."""

    def __init__(self, base_url: Optional[str] = None, *, client: Optional[Client] = None, **kwargs: Any) -> None:
        if client is None:
            if base_url is None:
                raise ValueError("turnledger.aio: give a base_url or a client")
            client = Client(base_url, **kwargs)
        self.sync = client

    def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]:
        fn = getattr(self.sync, name)
        if name.startswith("_") or not callable(fn):
            raise AttributeError(name)

        @functools.wraps(fn)
        async def call(*args: Any, **kwargs: Any) -> Any:
            return await asyncio.to_thread(fn, *args, **kwargs)

        return call

    async def follow(self, feed: Union[Feed, str], after: int = 0) -> AsyncIterator[t.FeedItem]:
        """The feed's items, live, resuming after a broken connection (see
        :meth:`turnledger.Client.follow`)."""
        abort = Abort()
        it = self.sync.follow(feed, after, abort=abort)
        done = object()
        try:
            while True:
                item = await asyncio.to_thread(next, it, done)
                if item is done:
                    return
                yield item  # type: ignore[misc]
        finally:
            abort.set()  # ends a read in flight; the thread then returns
            try:
                await asyncio.shield(asyncio.to_thread(it.close))
            except (RuntimeError, ValueError):
                pass  # still running in its thread: it ends on the abort


class AsyncJob:
    """A :class:`turnledger.Job` for async handlers."""

    def __init__(self, job: Job) -> None:
        self.sync = job

    @property
    def turn(self) -> t.Turn:
        return self.sync.turn

    @property
    def claim(self) -> t.ClaimToken:
        return self.sync.claim

    @property
    def input(self) -> Any:
        return self.sync.input

    @property
    def stop_requested(self) -> bool:
        return self.sync.stop_requested

    @property
    def cancelled(self) -> bool:
        return self.sync.cancelled

    @property
    def cause(self) -> Optional[str]:
        return self.sync.cause

    def raise_if_cancelled(self) -> None:
        self.sync.raise_if_cancelled()

    async def wait(self, timeout: Optional[float] = None) -> bool:
        """Sleeps until the job is cancelled or ``timeout`` passes."""
        return await asyncio.to_thread(self.sync.wait, timeout)

    async def record(self, role: str, payload: dict[str, Any]) -> t.RecordResult:
        return await asyncio.to_thread(self.sync.record, role, payload)

    async def context(self) -> list[t.ContextItem]:
        return await asyncio.to_thread(self.sync.context)


AsyncHandler = Callable[[AsyncJob], Awaitable[Union[None, dict, Result]]]


class Worker:
    """A :class:`turnledger.Worker` whose handler is a coroutine function run
    on the event loop that awaits :meth:`run`. Takes the sync Worker's
    keyword arguments (signals are not handled: call :meth:`stop`, e.g. from
    ``loop.add_signal_handler``)."""

    def __init__(self, client: Union[AsyncClient, Client], handler: AsyncHandler, **kwargs: Any) -> None:
        self.client = client.sync if isinstance(client, AsyncClient) else client
        self.handler = handler
        self._kwargs = kwargs
        self._worker: Optional[_SyncWorker] = None
        self._stopped = False

    def stop(self) -> None:
        self._stopped = True
        if self._worker is not None:
            self._worker.stop()

    async def run(self) -> None:
        loop = asyncio.get_running_loop()

        def handle(job: Job) -> Any:
            return asyncio.run_coroutine_threadsafe(self.handler(AsyncJob(job)), loop).result()

        self._worker = _SyncWorker(self.client, handle, handle_signals=False, **self._kwargs)
        if self._stopped:
            self._worker.stop()
        try:
            await asyncio.shield(asyncio.to_thread(self._worker.run))
        except asyncio.CancelledError:
            self._worker.stop()
            raise
