# ruff: noqa: F401, F811
"""The PostgreSQL switch: the loader command, the read-only session, and the server reporting its backend."""

from __future__ import annotations

import subprocess

import httpx
import pytest

from agent_tools.db import DatabaseError, PostgresDatabase

# mcp_postgres is a fixture imported by name, hence F401/F811 off in this file.
from tests.integration.mcp_fixtures import ToolServer, mcp_postgres
from tests.support.procs import VENV_BIN

pytestmark = pytest.mark.integration


def test_reports_session_is_read_only(mcp_postgres: ToolServer) -> None:
    db = PostgresDatabase(mcp_postgres.db_url)
    try:
        assert db.query("SELECT COUNT(*) AS n FROM customers WHERE id = ?", ("C1001",)) == [{"n": 1}]
        with pytest.raises(DatabaseError, match="read-only"):
            db.query("DELETE FROM kyc_applications")
    finally:
        db.close()
    assert len(mcp_postgres.rows("kyc_applications")) > 0


def test_server_reports_postgres_backend_without_password(mcp_postgres: ToolServer) -> None:
    health = httpx.get(f"{mcp_postgres.base}/healthz", timeout=5).json()
    assert health["reports_db"] == "postgresql" and health["status"] == "ok"
    assert health["reports_db_url"].startswith("postgresql://postgres@127.0.0.1")


def test_loader_refuses_existing_tables_unless_replace(mcp_postgres: ToolServer) -> None:
    cmd = [str(VENV_BIN / "mcp-server"), "load-demo", "--db-url", mcp_postgres.db_url, "--date", "2026-01-15"]
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert again.returncode != 0 and "already exists" in again.stderr
    assert "add --replace" in again.stderr  # the hint comes from the error's SQLSTATE, whatever the language
    replaced = subprocess.run([*cmd, "--replace"], capture_output=True, text=True, timeout=120)
    assert replaced.returncode == 0, replaced.stderr
    assert "customers=20" in replaced.stdout
    # Put today's rows back for the other tests sharing this database.
    restore = subprocess.run(
        [*cmd[:-2], "--replace"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"MCP_TIMEZONE": "Europe/Istanbul", "PATH": str(VENV_BIN)},
    )
    assert restore.returncode == 0, restore.stderr
