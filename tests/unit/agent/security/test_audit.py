"""The audit chain: every kind of tampering is caught at its line; crashes, rotation and retention keep it valid."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from agent.security.audit import CURRENT, GENESIS, AuditLog, resolve_key, rotated_files, seal
from agent.security.audit_check import query, verify
from agent.security.privacy import Pseudonymizer
from tests.support.procs import wait_until

KEY = b"k" * 32


def request(n: int, **extra: Any) -> dict[str, Any]:
    return {"event": "request", "request_id": f"r{n}", "user": "alice", "role": "support", "status": 200, **extra}


def filled(tmp: Path, n: int = 5) -> AuditLog:
    log = AuditLog(tmp, KEY)
    for i in range(1, n + 1):
        log.append(request(i))
    return log


def lines(tmp: Path) -> list[str]:
    return (tmp / CURRENT).read_text().splitlines(keepends=True)


def rewrite(tmp: Path, new: list[str]) -> None:
    (tmp / CURRENT).write_text("".join(new))


def test_records_are_chained_sealed_and_numbered(tmp_path: Path) -> None:
    filled(tmp_path, 3)
    records = [json.loads(line) for line in lines(tmp_path)]
    assert [r["seq"] for r in records] == [1, 2, 3]
    assert records[0]["prev"] == GENESIS
    assert [r["prev"] for r in records[1:]] == [r["mac"] for r in records[:-1]]
    assert all(seal(KEY, r) == r["mac"] for r in records)
    report = verify(tmp_path, KEY)
    assert report.ok and report.records == 3 and report.last_seq == 3


def test_an_edited_record_is_named(tmp_path: Path) -> None:
    filled(tmp_path)
    content = lines(tmp_path)
    content[2] = content[2].replace('"user":"alice"', '"user":"mallory"')
    rewrite(tmp_path, content)
    report = verify(tmp_path, KEY)
    assert report.problem is not None and report.problem.line == 3 and "seal mismatch" in report.problem.reason


def test_a_deleted_record_is_named(tmp_path: Path) -> None:
    filled(tmp_path)
    content = lines(tmp_path)
    del content[1]
    rewrite(tmp_path, content)
    report = verify(tmp_path, KEY)
    assert (
        report.problem is not None and report.problem.line == 2 and "expected seq 2, found 3" in report.problem.reason
    )


def test_deleting_the_first_record_is_caught(tmp_path: Path) -> None:
    filled(tmp_path)
    rewrite(tmp_path, lines(tmp_path)[1:])
    report = verify(tmp_path, KEY)
    assert report.problem is not None and report.problem.line == 1 and "does not start here" in report.problem.reason


def test_reordered_records_are_caught(tmp_path: Path) -> None:
    filled(tmp_path)
    content = lines(tmp_path)
    content[1], content[2] = content[2], content[1]
    rewrite(tmp_path, content)
    report = verify(tmp_path, KEY)
    assert report.problem is not None and report.problem.line == 2


def test_a_record_appended_by_hand_is_caught_even_with_a_correct_link(tmp_path: Path) -> None:
    filled(tmp_path)
    last = json.loads(lines(tmp_path)[-1])
    forged = request(99, user="mallory") | {"time": last["time"], "seq": last["seq"] + 1, "prev": last["mac"]}
    forged["mac"] = seal(b"a guessed key" * 3, forged)  # without the agent's key the seal cannot be right
    rewrite(tmp_path, [*lines(tmp_path), json.dumps(forged) + "\n"])
    report = verify(tmp_path, KEY)
    assert report.problem is not None and report.problem.line == 6 and "seal mismatch" in report.problem.reason


def test_a_replayed_record_is_caught(tmp_path: Path) -> None:
    filled(tmp_path)
    content = lines(tmp_path)
    rewrite(tmp_path, [*content, content[1]])
    report = verify(tmp_path, KEY)
    assert report.problem is not None and report.problem.line == 6


def test_truncation_is_caught_against_an_anchored_head(tmp_path: Path) -> None:
    filled(tmp_path)
    head = verify(tmp_path, KEY)
    rewrite(tmp_path, lines(tmp_path)[:3])
    assert verify(tmp_path, KEY).ok  # a plain chain cannot see a cut tail ...
    report = verify(tmp_path, KEY, (head.last_seq, head.last_mac))
    assert report.problem is not None and "truncated" in report.problem.reason  # ... an anchor copied elsewhere can


def test_a_crash_mid_write_leaves_a_verifiable_log_and_the_next_append_records_it(tmp_path: Path) -> None:
    log = filled(tmp_path, 3)
    full = json.dumps(request(4) | {"seq": 4}).encode()
    with (tmp_path / CURRENT).open("ab") as f:
        f.write(full[: len(full) // 2])  # what a power cut between write() and fsync() can leave
    report = verify(tmp_path, KEY)
    assert report.ok and report.records == 3 and "partial last line" in report.notes[0]
    log.append(request(5))
    records = [json.loads(line) for line in lines(tmp_path)]
    assert [r.get("event") for r in records[3:]] == ["torn_record_removed", "request"]
    assert records[3]["bytes"] == len(full) // 2
    assert verify(tmp_path, KEY).ok


WRITER = """
import sys
from pathlib import Path
from agent.security.audit import AuditLog
log = AuditLog(Path(sys.argv[1]), b"k" * 32)
i = 0
while True:
    i += 1
    log.append({"event": "request", "request_id": f"w{i}", "question": "x" * 20000})
"""


def test_a_writer_killed_at_any_moment_leaves_a_verifiable_log(tmp_path: Path) -> None:
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path)])
    try:
        wait_until(
            lambda: (tmp_path / CURRENT).exists() and (tmp_path / CURRENT).stat().st_size > 400_000,
            timeout=30,
            what="records written",
        )
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    assert verify(tmp_path, KEY).ok
    AuditLog(tmp_path, KEY).append(request(0))
    report = verify(tmp_path, KEY)
    assert report.ok and report.records >= 20


def test_two_processes_appending_to_one_file_keep_one_chain(tmp_path: Path) -> None:
    script = (
        "import sys; from pathlib import Path; from agent.security.audit import AuditLog\n"
        "log = AuditLog(Path(sys.argv[1]), b'k' * 32)\n"
        "for i in range(100): log.append({'event': 'request', 'request_id': sys.argv[2] + str(i)})\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", script, str(tmp_path), name]) for name in ("a", "b")]
    assert [p.wait(timeout=60) for p in procs] == [0, 0]
    report = verify(tmp_path, KEY)
    assert report.ok and report.records == 200


class Clock:
    def __init__(self) -> None:
        self.now = datetime(2026, 1, 1, 12, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now


def test_rotation_by_size_keeps_the_chain_across_files(tmp_path: Path) -> None:
    log = AuditLog(tmp_path, KEY, rotate_bytes=4096)
    for i in range(60):
        log.append(request(i, question="q" * 200))
    assert len(rotated_files(tmp_path)) >= 3
    report = verify(tmp_path, KEY)
    assert report.ok and report.records == 60
    middle = rotated_files(tmp_path)[1]
    text = middle.read_text().splitlines(keepends=True)
    middle.write_text("".join(text[:2] + text[3:]))
    report = verify(tmp_path, KEY)
    assert report.problem is not None and report.problem.file == middle.name and report.problem.line == 3


def test_the_injected_clock_stamps_records_and_decides_the_daily_rotation(tmp_path: Path) -> None:
    clock = Clock()  # a day that is not today: the log must not mix it with the machine's clock
    log = AuditLog(tmp_path, KEY, clock=clock)
    for i in range(3):
        clock.now += timedelta(minutes=1)
        log.append(request(i))
    assert rotated_files(tmp_path) == []  # three appends on one day: no rotation
    assert [json.loads(line)["time"] for line in lines(tmp_path)] == [
        "2026-01-01T12:01:00.000Z",
        "2026-01-01T12:02:00.000Z",
        "2026-01-01T12:03:00.000Z",
    ]
    clock.now += timedelta(days=1)
    log.append(request(4))
    assert len(rotated_files(tmp_path)) == 1 and len(lines(tmp_path)) == 1  # the next day rotates once
    assert verify(tmp_path, KEY).ok


def test_retention_deletes_old_files_and_records_the_deletion(tmp_path: Path) -> None:
    clock = Clock()
    log = AuditLog(tmp_path, KEY, retention_days=30, clock=clock)
    for day in range(40):
        clock.now += timedelta(days=1)
        log.append(request(day))  # a new day rotates the file
    remaining = rotated_files(tmp_path)
    assert 29 <= len(remaining) <= 31
    records = [json.loads(line) for path in [*remaining, tmp_path / CURRENT] for line in path.read_text().splitlines()]
    deletions = [r for r in records if r.get("event") == "retention_deleted"]
    assert deletions and all(r["retention_days"] == 30 for r in deletions)
    report = verify(tmp_path, KEY)
    assert report.ok, report.problem
    # deleting one more file by hand is not covered by any retention record
    remaining[0].unlink()
    assert not verify(tmp_path, KEY).ok


def test_query_finds_who_looked_at_a_customer_by_id_or_name(tmp_path: Path) -> None:
    names = Pseudonymizer(b"p" * 32)
    log = AuditLog(tmp_path, KEY)
    call = {
        "name": "musteri_bakiyesi",
        "arguments": {"customer": names.token("Ayşe Kaya")},
        "outcome": "ok",
        "customer_ids": ["C1004"],
    }
    log.append(request(1, user="alice", tool_calls=[call]))
    log.append(request(2, user="bob", tool_calls=[{"name": "kyc_ozeti", "arguments": {}, "customer_ids": []}]))
    log.append(
        request(
            3,
            user="carol",
            tool_calls=[{"name": "musteri_bakiyesi", "arguments": {"customer": "C1004"}, "customer_ids": ["C1004"]}],
        )
    )
    assert [r["user"] for r in query(tmp_path, names, customer="C1004")] == ["alice", "carol"]
    assert [r["user"] for r in query(tmp_path, names, customer="ayse KAYA")] == ["alice"]
    future = datetime.now(UTC) + timedelta(days=1)
    assert query(tmp_path, names, customer="C1004", since=future) == []
    assert [r["user"] for r in query(tmp_path, names, user="bob")] == ["bob"]


def test_the_key_is_required_and_generated_only_for_the_writer(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot be read"):
        resolve_key(tmp_path, None, None, create=False)
    key = resolve_key(tmp_path, None, None, create=True)
    assert resolve_key(tmp_path, None, None, create=False) == key and len(key) == 64
    assert (tmp_path / ".audit.key").stat().st_mode & 0o077 == 0


def test_a_configured_key_file_is_never_invented(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot be read"):
        resolve_key(tmp_path, None, tmp_path / "secret" / "key", create=True)
    assert not (tmp_path / "secret").exists()
