"""Group commit for the audit log: the API's records are written by one thread, and the records of requests that
end while an fsync runs go out together with the next write and share the next fsync.

A request still waits for its own record to be durable (its fsync returned) before its response ends, as with one
fsync per record; what changes is that the event loop never blocks on the disk (an fsync took 0.4 ms idle and
several ms with other writers on the disk, during which no other request moved), and N requests ending together
cost one fsync instead of N. `scripts/bench-audit` measures both ways; the figures are in docs/security.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

from agent.security.audit import AuditLog

IDLE_EXIT_S = 10.0  # an idle writer thread ends; the next record starts another
_Waiter = tuple[dict[str, Any], asyncio.AbstractEventLoop, "asyncio.Future[dict[str, Any]]"]


class GroupCommit:
    """Appends records to an AuditLog from a writer thread, every record waiting at that moment in one batch."""

    def __init__(self, log: AuditLog) -> None:
        self.log = log
        self._waiting: list[_Waiter] = []
        self._ready = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None

    def submit(self, records: list[dict[str, Any]]) -> list[asyncio.Future[dict[str, Any]]]:
        """Queue the records, in order, for the writer thread: no await, so a caller cancelled right after still has
        them written. Each future is done once its record is durable (its fsync returned), or with the error."""
        loop = asyncio.get_running_loop()
        futures: list[asyncio.Future[dict[str, Any]]] = [loop.create_future() for _ in records]
        with self._ready:
            closed = self._closed
            if not closed:
                self._waiting.extend((record, loop, future) for record, future in zip(records, futures, strict=True))
                if self._thread is None:
                    self._thread = threading.Thread(target=self._run, name="audit-writer", daemon=True)
                    self._thread.start()
                self._ready.notify()
        if closed:  # a request that outlived the shutdown: written the slow way, not lost
            self._commit([(record, loop, future) for record, future in zip(records, futures, strict=True)], now=True)
        return futures

    async def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Seal and durably write the record; returns it once its fsync returned (raises what the write raised).
        Cancelling the caller does not take the record back: it is written all the same."""
        (future,) = self.submit([record])
        return await asyncio.shield(future)

    def close(self) -> None:
        """Write what is waiting, then stop the thread (at shutdown)."""
        with self._ready:
            self._closed = True
            self._ready.notify()
            thread = self._thread
        if thread is not None:
            thread.join()

    def _run(self) -> None:
        while True:
            with self._ready:
                if not self._waiting and not self._closed:
                    self._ready.wait(IDLE_EXIT_S)
                batch, self._waiting = self._waiting, []
                if not batch:  # closed, or idle for IDLE_EXIT_S: the next append starts a new thread
                    self._thread = None
                    return
            self._commit(batch)

    def _commit(self, batch: list[_Waiter], now: bool = False) -> None:
        """Write the batch; settle its futures on their loops (`now`: this is that loop's thread)."""
        tell = _settle_now if now else _tell
        try:
            sealed = self.log.append_many([record for record, _, _ in batch])
        except Exception as exc:  # every request of the batch hears of it (AUDIT_FAILURES, an error log)
            for _, loop, future in batch:
                tell(loop, _fail, future, exc)
            return
        for (_, loop, future), record in zip(batch, sealed, strict=True):
            tell(loop, _settle, future, record)


def _settle_now(loop: asyncio.AbstractEventLoop, how: Any, future: asyncio.Future[dict[str, Any]], what: Any) -> None:
    how(future, what)


def _tell(loop: asyncio.AbstractEventLoop, how: Any, future: asyncio.Future[dict[str, Any]], what: Any) -> None:
    """Settle a waiter on its own loop; a loop already closed (its process is stopping) has nobody to tell."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(how, future, what)


def _settle(future: asyncio.Future[dict[str, Any]], record: dict[str, Any]) -> None:
    if not future.done():
        future.set_result(record)


def _fail(future: asyncio.Future[dict[str, Any]], exc: Exception) -> None:
    if not future.done():
        future.set_exception(exc)
