"""Reading the audit log: `verify` walks the whole chain and names the first bad line; `query` answers
"who looked at customer X between A and B"."""

from __future__ import annotations

import hmac
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from agent.security.audit import GENESIS, chain_files, seal
from agent.security.privacy import Pseudonymizer


@dataclass
class Problem:
    file: str
    line: int
    reason: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.reason}"


@dataclass
class Report:
    records: int = 0
    last_seq: int = 0
    last_mac: str = GENESIS
    last_time: str = ""
    problem: Problem | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.problem is None


def _lines(directory: Path) -> Iterator[tuple[Path, int, bytes, bool]]:
    """(file, line number, raw line, is the very last line of the chain)."""
    files = chain_files(directory)
    for i, path in enumerate(files):
        lines = path.read_bytes().splitlines(keepends=True)
        for n, raw in enumerate(lines, start=1):
            yield path, n, raw, i == len(files) - 1 and n == len(lines)


def verify(directory: Path, key: bytes, anchor: tuple[int, str] | None = None) -> Report:
    """Check every seal and link; the first record must start the chain or follow a recorded deletion."""
    report, start = Report(), None
    deletions: set[tuple[int, str]] = set()
    anchored = anchor is None
    for path, n, raw, last in _lines(directory):
        where = (path.name, n)
        if not raw.endswith(b"\n"):
            if last:  # a crash mid-write: never acknowledged, cut off by the next append
                report.notes.append(f"{path.name}:{n}: partial last line (interrupted write), ignored")
                break
            return _bad(report, where, "line is not terminated (bytes were cut or joined)")
        try:
            record = json.loads(raw)
            seq, prev, mac = int(record["seq"]), str(record["prev"]), str(record["mac"])
        except (ValueError, KeyError, TypeError):
            return _bad(report, where, "not a valid audit record (unparsable or missing seq/prev/mac)")
        if not hmac.compare_digest(seal(key, record), mac):
            return _bad(report, where, f"seal mismatch: record seq {seq} was edited or not written by the agent")
        if start is None:
            start = (seq, prev, where)
        elif seq != report.last_seq + 1:
            return _bad(
                report,
                where,
                f"expected seq {report.last_seq + 1}, found {seq}: records were deleted, "
                "reordered or inserted before this line",
            )
        elif prev != report.last_mac:
            return _bad(report, where, "link broken: prev does not match the record before it")
        if record.get("event") == "retention_deleted":
            deletions.add((int(record.get("last_seq") or 0), str(record.get("last_mac"))))
        if anchor is not None and seq == anchor[0]:
            if not hmac.compare_digest(mac, anchor[1]):
                return _bad(report, where, "does not match the anchored head (the log was rewritten)")
            anchored = True
        report.records += 1
        report.last_seq, report.last_mac, report.last_time = seq, mac, str(record.get("time", ""))
    if start is not None and not (start[0] == 1 and start[1] == GENESIS) and (start[0] - 1, start[1]) not in deletions:
        return _bad(
            report,
            start[2],
            "the chain does not start here: earlier records are missing and no retention record accounts for them",
        )
    if not anchored:
        report.problem = Problem(
            "-", 0, f"anchored head seq {anchor[0] if anchor else 0} not found: the log was truncated"
        )
    return report


def _bad(report: Report, where: tuple[str, int], reason: str) -> Report:
    report.problem = Problem(where[0], where[1], reason)
    return report


def records(directory: Path) -> Iterator[dict[str, Any]]:
    for _, _, raw, _ in _lines(directory):
        if raw.endswith(b"\n"):
            record: dict[str, Any] = json.loads(raw)
            yield record


def _in_range(record: dict[str, Any], since: datetime | None, until: datetime | None) -> bool:
    when = datetime.fromisoformat(str(record.get("time", "")).replace("Z", "+00:00"))
    return (since is None or when >= since) and (until is None or when <= until)


def touches(record: dict[str, Any], customer: str, pseudonyms: Pseudonymizer) -> bool:
    """Whether a request record concerns `customer` (an ID like C1001, or a name matched via its pseudonym)."""
    needle = customer.strip()
    wanted = {needle.upper()} if needle[:1] in "cC" and needle[1:].isdigit() else {pseudonyms.token(needle)}
    for call in record.get("tool_calls") or []:
        if wanted & set(call.get("customer_ids") or []):
            return True
        values = [v for v in (call.get("arguments") or {}).values() if isinstance(v, str)]
        if any(v in wanted for v in values):  # a pseudonymised name argument the tool received
            return True
    return False  # a question that merely mentions a customer is not a look at their data


def query(
    directory: Path,
    pseudonyms: Pseudonymizer,
    *,
    customer: str | None = None,
    user: str | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
) -> list[dict[str, Any]]:
    """Request records in [since, until] by `user` and/or about `customer`, oldest first."""
    out = []
    for record in records(directory):
        if record.get("event") != "request" or not _in_range(record, since, until):
            continue
        if user is not None and record.get("user") != user:
            continue
        if customer is not None and not touches(record, customer, pseudonyms):
            continue
        out.append(record)
    return out
