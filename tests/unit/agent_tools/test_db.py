"""The data-access layer: read-only SQLite, SQL helpers, URL redaction."""

from __future__ import annotations

import datetime as dt
import sqlite3
from pathlib import Path

import pytest

from agent_tools import demo
from agent_tools.db import DatabaseError, SqliteDatabase, open_database, redact_url, to_pyformat

DAY = dt.date(2026, 3, 4)


def test_reports_sqlite_is_opened_read_only(tmp_path: Path) -> None:
    path = tmp_path / "d.sqlite3"
    demo.write_sqlite(path, DAY)
    db = open_database(f"sqlite:///{path}")
    assert db.query("SELECT COUNT(*) AS n FROM customers WHERE id = ?", ("C1001",)) == [{"n": 1}]
    with pytest.raises(DatabaseError, match="readonly"):
        db.query("DELETE FROM customers")
    db.close()
    assert sqlite3.connect(path).execute("SELECT COUNT(*) FROM customers").fetchone()[0] == 20


def test_sqlite_gets_unicode_lower_and_translate(tmp_path: Path) -> None:
    path = tmp_path / "d.sqlite3"
    demo.write_sqlite(path, DAY)
    db = SqliteDatabase(path)
    # lower() folds non-ASCII here (SQLite's own does not) and translate() exists as in PostgreSQL.
    assert db.query("SELECT translate(lower('ŞAHIN IŞIK'), 'ş', 's') AS v")[0]["v"] == "sahin isik"


def test_paramstyle_and_url_helpers() -> None:
    assert to_pyformat("a LIKE ? AND b = '%x'") == "a LIKE %s AND b = '%%x'"
    assert redact_url("postgresql://u:pw@h:5432/db") == "postgresql://u:***@h:5432/db"
    assert redact_url("postgresql://u@h/db") == "postgresql://u@h/db"
    with pytest.raises(DatabaseError):
        open_database("mysql://x")
