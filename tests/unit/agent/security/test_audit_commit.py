"""Group commit (agent.security.audit_commit): records ending together share one fsync, and nobody hears that
their record is written (an append returns, a response ends) before the fsync that covers it returned."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from agent.api.app import create_app
from agent.security.audit import CURRENT, AuditLog
from agent.security.audit_check import verify
from agent.security.audit_commit import GroupCommit
from agent.settings import Settings
from tests.unit.agent.conftest import MemoryToolBox, ScriptedBackend

KEY = b"k" * 32


def ids_in(directory: Path) -> set[str]:
    path = directory / CURRENT
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    return {line.split('"request_id":"')[1].split('"')[0] for line in text.splitlines() if '"request_id":"' in line}


class FsyncDouble:
    """os.fsync that notes which records the file held when each fsync returned, in order with other events."""

    def __init__(self, directory: Path, events: list[tuple[str, Any]]) -> None:
        self.directory, self.events, self.real = directory, events, os.fsync
        self.hold, self.entered = threading.Event(), threading.Event()
        self.hold.set()
        self.calls = 0

    def __call__(self, fd: int) -> None:
        self.calls += 1
        self.entered.set()
        self.hold.wait(10)
        self.real(fd)
        self.events.append(("fsynced", ids_in(self.directory)))


async def test_records_ending_together_share_one_fsync_and_each_waits_for_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    events: list[tuple[str, Any]] = []
    fsync = FsyncDouble(tmp_path, events)
    monkeypatch.setattr(os, "fsync", fsync)
    commit = GroupCommit(AuditLog(tmp_path, KEY))

    async def request(name: str) -> None:
        await commit.append({"event": "request", "request_id": name})
        events.append(("acked", name))

    fsync.hold.clear()  # the first record's fsync stalls: the next ten arrive meanwhile
    first = asyncio.create_task(request("r0"))
    assert await asyncio.to_thread(fsync.entered.wait, 10)
    rest = [asyncio.create_task(request(f"r{i}")) for i in range(1, 11)]
    await asyncio.sleep(0.05)
    assert [e for e in events if e[0] == "acked"] == []  # nobody is told before the fsync returns
    fsync.hold.set()
    await asyncio.gather(first, *rest)
    commit.close()
    assert fsync.calls == 2  # one for r0, one for the ten that waited together
    durable: set[str] = set()
    for kind, what in events:
        if kind == "fsynced":
            durable |= what
        else:
            assert what in durable, f"{what} acknowledged before an fsync covered it"
    assert verify(tmp_path, KEY).ok and verify(tmp_path, KEY).records == 11


async def test_a_request_cancelled_while_its_record_waits_still_has_it_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client that leaves cancels its request mid-write: the record was queued before the first await."""
    fsync = FsyncDouble(tmp_path, [])
    monkeypatch.setattr(os, "fsync", fsync)
    commit = GroupCommit(AuditLog(tmp_path, KEY))
    fsync.hold.clear()
    waiting = asyncio.create_task(commit.append({"event": "request", "request_id": "left"}))
    assert await asyncio.to_thread(fsync.entered.wait, 10)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    fsync.hold.set()
    commit.close()
    assert ids_in(tmp_path) == {"left"} and verify(tmp_path, KEY).ok


async def test_a_failed_write_reaches_every_waiter_and_the_writer_goes_on(tmp_path: Path) -> None:
    (tmp_path / "not-a-dir").write_text("")
    commit = GroupCommit(AuditLog(tmp_path / "not-a-dir", KEY))
    with pytest.raises(OSError):
        await commit.append({"event": "request", "request_id": "lost"})
    commit.log.directory = tmp_path / "audit"
    assert (await commit.append({"event": "request", "request_id": "kept"}))["seq"] == 1
    commit.close()
    assert await commit.append({"event": "request", "request_id": "late"})  # after close: written, not lost
    assert ids_in(tmp_path / "audit") == {"kept", "late"}


@pytest.mark.parametrize("stream", [False, True])
async def test_a_response_ends_only_after_its_record_is_fsynced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    settings = Settings(
        model_backend="direct",
        agent_auth="none",
        anonymous_role="admin",
        audit_dir=tmp_path,
        audit_key=SecretStr("k" * 32),
        rate_limit_per_minute=0,
    )
    app = create_app(settings, backend=ScriptedBackend(["hello there"]), toolbox=MemoryToolBox())  # type: ignore[arg-type]
    events: list[tuple[str, Any]] = []
    monkeypatch.setattr(os, "fsync", FsyncDouble(tmp_path, events))

    async def observed(scope: Any, receive: Any, send: Any) -> None:
        async def noted(message: Any) -> None:
            if message["type"] == "http.response.body" and not message.get("more_body"):
                events.append(("response_ended", ids_in(tmp_path)))
            await send(message)

        await app(scope, receive, noted)

    body = {"model": "qwen3:4b", "messages": [{"role": "user", "content": "hi"}], "stream": stream}
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=observed)
        async with httpx.AsyncClient(transport=transport, base_url="http://agent") as http:
            resp = await http.post("/v1/chat/completions", json=body, headers={"X-Request-ID": "req-1"})
    assert resp.status_code == 200
    kinds = [kind for kind, _ in events]
    assert kinds.index("fsynced") < kinds.index("response_ended")
    assert len(next(ids for kind, ids in events if kind == "fsynced")) == 1  # that fsync covered this record


KILLED_WRITER = """
import asyncio, sys
from pathlib import Path
from agent.security.audit import AuditLog
from agent.security.audit_commit import GroupCommit
commit = GroupCommit(AuditLog(Path(sys.argv[1]), b"k" * 32))
async def request(k):
    i = 0
    while True:
        i += 1
        await commit.append({"event": "request", "request_id": f"w{k}-{i}", "question": "x" * 2000})
        sys.stdout.write(f"acked w{k}-{i}\\n")
        sys.stdout.flush()
async def main():
    await asyncio.gather(*(request(k) for k in range(16)))
asyncio.run(main())
"""


def test_a_writer_killed_with_sigkill_loses_no_acknowledged_record(tmp_path: Path) -> None:
    acked: list[str] = []
    cmd = [sys.executable, "-c", KILLED_WRITER, str(tmp_path)]
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as proc:
        assert proc.stdout is not None
        try:
            while len(acked) < 400:
                line = proc.stdout.readline()
                assert line, "the writer stopped"
                acked.append(line.split()[1])
        finally:
            proc.kill()  # SIGKILL, mid-batch most likely
            acked += [line.split()[1] for line in proc.stdout.read().splitlines() if line.startswith("acked ")]
    report = verify(tmp_path, KEY)
    assert report.ok, report
    assert set(acked) <= ids_in(tmp_path)
