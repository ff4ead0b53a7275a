"""The tamper-evident audit log: append-only JSON lines, each sealed with an HMAC over itself and the previous seal.

Every record carries `seq` (1, 2, ...), `prev` (the previous record's `mac`, or GENESIS) and `mac` =
HMAC-SHA256(AUDIT_KEY, canonical JSON of the record without `mac`). Editing, deleting, reordering or
hand-writing a record breaks the chain at that line (`agent.security.audit_check.verify`); without the key a
valid record cannot be forged. An append (one record, or a batch: agent.security.audit_commit) takes an
exclusive lock, one write() and one fsync, so several processes may share the file. Rotation renames the file
to `audit.jsonl.<first seq>` and the chain continues into the new file; retention deletes whole rotated files and
records each deletion in the chain.
A crash mid-write can leave only a partial last line: the next append cuts it off and records that it did.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
import secrets
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import structlog

log = structlog.get_logger("agent.security.audit")
GENESIS = "0" * 64
CURRENT = "audit.jsonl"
LOCK = ".audit.lock"
AUTO_KEY = ".audit.key"


def canonical(record: dict[str, Any]) -> bytes:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def seal(key: bytes, record: dict[str, Any]) -> str:
    body = {k: v for k, v in record.items() if k != "mac"}
    return hmac.new(key, canonical(body), hashlib.sha256).hexdigest()


def iso(moment: datetime) -> str:
    """A record's `time`: UTC, milliseconds, `Z` (its first ten characters are the day rotation compares)."""
    return moment.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def rotated_files(directory: Path) -> list[Path]:
    """Rotated files in chain order (their suffix is the zero-padded seq of their first record)."""
    found = [p for p in directory.glob(CURRENT + ".*") if p.suffix[1:].isdigit()]
    return sorted(found, key=lambda p: int(p.suffix[1:]))


def chain_files(directory: Path) -> list[Path]:
    current = directory / CURRENT
    return [*rotated_files(directory), *([current] if current.exists() else [])]


def resolve_key(directory: Path, key: str | None, key_file: Path | None, *, create: bool) -> bytes:
    """AUDIT_KEY, else AUDIT_KEY_FILE, else a key generated once beside the log (weaker: warned about)."""
    if key:
        return key.encode()
    path = key_file or directory / AUTO_KEY
    if not path.exists() and create and key_file is None:  # a configured key file is never invented
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(secrets.token_hex(32))
        log.warning(
            "audit_key_generated",
            path=str(path),
            hint="the key sits beside the log: mount AUDIT_KEY_FILE from a separate secret",
        )
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise ValueError(f"the audit key cannot be read from {path}: {exc}") from exc
    if len(text) < 16:
        raise ValueError(f"the audit key in {path} is shorter than 16 characters")
    return text.encode()


def last_line(path: Path) -> tuple[bytes, int]:
    """The last complete line of `path` and the file length up to its end (partial tail excluded)."""
    with path.open("rb") as f:
        size = f.seek(0, os.SEEK_END)
        block, end, buf = 65536, size, b""
        while end > 0:
            start = max(0, end - block)
            f.seek(start)
            buf = f.read(end - start) + buf
            end = start
            complete = buf.rfind(b"\n")
            if complete < 0:
                continue
            earlier = buf.rfind(b"\n", 0, complete)
            if earlier >= 0 or end == 0:
                return buf[earlier + 1 : complete + 1], end + complete + 1
        return b"", 0


def first_record(path: Path) -> dict[str, Any] | None:
    with path.open("rb") as f:
        line = f.readline()
    if not line.endswith(b"\n"):
        return None
    record: dict[str, Any] = json.loads(line)
    return record


@dataclass
class _Tail:
    stamp: tuple[int, int]  # (inode, size) of the current file when this tail was read
    seq: int
    mac: str
    first_day: str


class AuditLog:
    """Appends sealed records to `<directory>/audit.jsonl`; thread- and process-safe."""

    def __init__(
        self,
        directory: Path,
        key: bytes,
        *,
        rotate_bytes: int = 64 << 20,
        retention_days: int = 365,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.directory, self.key = directory, key
        self.rotate_bytes, self.retention_days, self.clock = rotate_bytes, retention_days, clock
        self._lock = threading.Lock()
        self._tail: _Tail | None = None
        self._rotated_now = False

    @property
    def path(self) -> Path:
        return self.directory / CURRENT

    def append(self, record: dict[str, Any]) -> dict[str, Any]:
        """Seal and durably write one record (time, seq, prev and mac are filled in); returns it."""
        return self.append_many([record])[0]

    def append_many(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Seal the records in order and write them with one write() and one fsync: durable when this returns."""
        with self._locked():
            sealed = self._write(records)
            if self._rotated_now:
                self._apply_retention()
            return sealed

    def prune(self) -> list[Path]:
        """Apply retention now (the writer also does it after every rotation)."""
        with self._locked():
            return self._apply_retention()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self.directory.mkdir(parents=True, exist_ok=True)
        with self._lock, (self.directory / LOCK).open("a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                self._rotated_now = False
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def _write(self, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
        tail = self._read_tail()
        now = iso(self.clock())  # one reading: the records' time and the rotation day always agree
        if tail.stamp[1] and (tail.stamp[1] >= self.rotate_bytes or tail.first_day != now[:10]):
            self._rotate()
            tail = self._read_tail()
        out, seq, prev = [], tail.seq, tail.mac
        for record in records:
            seq += 1
            sealed = {"time": now, **record, "seq": seq, "prev": prev}
            sealed["mac"] = prev = seal(self.key, sealed)
            out.append(sealed)
        lines = b"".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")).encode() + b"\n" for r in out)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o640)
        try:
            os.write(fd, lines)  # one write: a crash leaves whole records and at most a partial last line
            os.fsync(fd)
            st = os.fstat(fd)
        finally:
            os.close(fd)
        first_day = tail.first_day if tail.stamp[1] else now[:10]
        self._tail = _Tail((st.st_ino, st.st_size), seq, prev, first_day)
        return out

    def _read_tail(self) -> _Tail:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return self._tail_of_rotated()
        if self._tail is not None and self._tail.stamp == (st.st_ino, st.st_size):
            return self._tail
        line, good = last_line(self.path)
        if good < st.st_size:
            self._cut_torn_tail(good, st.st_size)
            return self._read_tail()
        if not line:
            return self._tail_of_rotated()
        record = json.loads(line)
        first = first_record(self.path) or record
        self._tail = _Tail((st.st_ino, st.st_size), int(record["seq"]), str(record["mac"]), str(first["time"])[:10])
        return self._tail

    def _tail_of_rotated(self) -> _Tail:
        older = rotated_files(self.directory)
        if not older:
            return _Tail((0, 0), 0, GENESIS, "")
        record = json.loads(last_line(older[-1])[0])
        return _Tail((0, 0), int(record["seq"]), str(record["mac"]), "")

    def _cut_torn_tail(self, good: int, size: int) -> None:
        """A crash cut the last write short: keep its digest, remove it, say so in the chain."""
        with self.path.open("r+b") as f:
            f.seek(good)
            torn = f.read()
            f.truncate(good)
            os.fsync(f.fileno())
        self._tail = None
        log.warning("audit_torn_record_removed", bytes=size - good)
        self._write(
            [{"event": "torn_record_removed", "bytes": size - good, "sha256": hashlib.sha256(torn).hexdigest()}]
        )

    def _rotate(self) -> None:
        first = first_record(self.path)
        seq = int(first["seq"]) if first else 0
        os.rename(self.path, self.directory / f"{CURRENT}.{seq:012d}")
        self._tail, self._rotated_now = None, True
        log.info("audit_rotated", first_seq=seq)

    def _apply_retention(self) -> list[Path]:
        cutoff = self.clock() - timedelta(days=self.retention_days)
        deleted = []
        for path in rotated_files(self.directory)[:-1]:  # the newest rotated file stays: it links to the current
            record = json.loads(last_line(path)[0] or b"{}")
            ended = datetime.fromisoformat(str(record.get("time", "9999-12-31")).replace("Z", "+00:00"))
            if ended.tzinfo is None:
                ended = ended.replace(tzinfo=UTC)
            if ended >= cutoff:
                break
            first = first_record(path) or {}
            path.unlink()
            deleted.append(path)
            self._write(
                [
                    {
                        "event": "retention_deleted",
                        "file": path.name,
                        "first_seq": first.get("seq"),
                        "last_seq": record.get("seq"),
                        "last_mac": record.get("mac"),
                        "last_time": record.get("time"),
                        "retention_days": self.retention_days,
                    }
                ]
            )
        return deleted
