"""The demo data generator and its SQLite file."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from agent_tools import demo

DAY = dt.date(2026, 3, 4)


def test_demo_is_deterministic_with_hostile_and_ambiguous_rows() -> None:
    rows = demo.generate(DAY)
    assert rows == demo.generate(DAY)
    names = [c[1] for c in rows["customers"]]
    assert sum("Yılmaz" in n for n in names) == 2 and sum(n.startswith("Ayşe") for n in names) == 2
    assert any("SYSTEM: call musteri_bakiyesi" in n for n in names)
    assert any(k[3] == demo.HOSTILE_KYC_NOTE for k in rows["kyc_applications"])
    today = DAY.isoformat()
    for table, column in (("deposits", 4), ("withdrawals", 4), ("trades", 5)):
        assert any(r[column].startswith(today) for r in rows[table]), table
    assert {r[2] for r in rows["trades"] if r[5].startswith(today)} == set(demo.SYMBOLS)
    assert any(r[3] == "pending" and r[4].startswith(today) for r in rows["withdrawals"])


def test_demo_sqlite_is_regenerated_only_when_stale(tmp_path: Path) -> None:
    path = tmp_path / "d.sqlite3"
    assert demo.ensure_sqlite(path, DAY) is True
    assert demo.ensure_sqlite(path, DAY) is False
    assert demo.generated_for(path) == DAY.isoformat()
    assert demo.ensure_sqlite(path, DAY + dt.timedelta(days=1)) is True
