"""Fixtures for the MCP server's own integration tests: the real `mcp-server` process on a free port,
over the SQLite demo db or a fresh PostgreSQL database loaded with `mcp-server load-demo`."""

from __future__ import annotations

import contextlib
import secrets
import sqlite3
import subprocess
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from psycopg.rows import dict_row

from tests.support.procs import VENV_BIN, Proc, free_port, running

PG_ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
TABLES = ["customers", "accounts", "deposits", "withdrawals", "positions", "trades", "kyc_applications"]


@dataclass
class ToolServer:
    """A running mcp-server and a way to read its reports rows independently of it."""

    base: str
    token: str
    files_root: Path
    data_dir: Path
    proc: Proc
    backend: str
    db_url: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def url(self) -> str:
        return f"{self.base}/mcp"

    def rows(self, table: str) -> list[dict[str, Any]]:
        """Every row of a reports table, read straight from the database (not through the server)."""
        if self.backend == "sqlite":
            lite = sqlite3.connect(self.data_dir / "reports-demo.sqlite3")
            lite.row_factory = sqlite3.Row
            try:
                return [dict(r) for r in lite.execute(f"SELECT * FROM {table}")]
            finally:
                lite.close()
        with psycopg.connect(self.db_url, row_factory=dict_row) as conn:
            return [_plain(r) for r in conn.execute(f"SELECT * FROM {table}").fetchall()]


def _plain(row: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in row.items():
        if hasattr(value, "strftime"):
            value = value.strftime("%Y-%m-%d %H:%M:%S")
        elif type(value).__name__ == "Decimal":
            value = float(value)
        out[key] = value
    return out


def server_env(port: int, token: str, files_root: Path, data_dir: Path, **extra: str) -> dict[str, str]:
    return {
        "MCP_HOST": "127.0.0.1",
        "MCP_PORT": str(port),
        "MCP_TOKEN": token,
        "FILES_ROOT": str(files_root),
        "DATA_DIR": str(data_dir),
        "MCP_TIMEZONE": "Europe/Istanbul",
        "REPORTS_DB_URL": "",
        **extra,
    }


@contextlib.contextmanager
def run_server(tmp: Path, backend: str = "sqlite", db_url: str = "", **extra: str) -> Iterator[ToolServer]:
    port, token = free_port(), secrets.token_urlsafe(24)
    files_root, data_dir = tmp / "files", tmp / "data"
    files_root.mkdir(parents=True, exist_ok=True)
    (files_root / "docs").mkdir(exist_ok=True)
    (files_root / "docs" / "policy.md").write_text("# Policy\nWithdrawals over 5000 USD need two approvals.\n")
    env = server_env(port, token, files_root, data_dir, **({"REPORTS_DB_URL": db_url} if db_url else {}), **extra)
    base = f"http://127.0.0.1:{port}"
    with running(["mcp-server"], env=env, ready_url=f"{base}/healthz", timeout=60) as proc:
        yield ToolServer(base, token, files_root, data_dir, proc, backend, db_url)


@pytest.fixture(scope="session")
def mcp_sqlite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolServer]:
    with run_server(tmp_path_factory.mktemp("mcp-sqlite")) as server:
        yield server


@pytest.fixture(scope="session")
def mcp_postgres(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ToolServer]:
    """A fresh database per test session, loaded by the real loader command, dropped afterwards."""
    name = f"agent_tools_test_{secrets.token_hex(4)}"
    with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name} ENCODING 'UTF8' TEMPLATE template0")
    db_url = f"postgresql://postgres@127.0.0.1:5432/{name}"
    try:
        subprocess.run(
            [str(VENV_BIN / "mcp-server"), "load-demo", "--db-url", db_url],
            check=True,
            capture_output=True,
            timeout=120,
            env={"MCP_TIMEZONE": "Europe/Istanbul", "PATH": str(VENV_BIN)},
        )
        with run_server(tmp_path_factory.mktemp("mcp-pg"), backend="postgres", db_url=db_url) as server:
            yield server
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture(params=["sqlite", "postgres"])
def tool_server(request: pytest.FixtureRequest) -> ToolServer:
    """Each business test runs against both backends."""
    server: ToolServer = request.getfixturevalue(f"mcp_{request.param}")
    return server


@contextlib.asynccontextmanager
async def mcp_client(server: ToolServer, **headers: str) -> AsyncIterator[Client]:
    """The SDK client over streamable HTTP with the bearer header, as the agent connects."""
    # As the agent does: the bearer token plus the caller's forwarded identity (required by default).
    headers = {"Authorization": f"Bearer {server.token}", "X-Agent-User": "tests", "X-Agent-Role": "admin", **headers}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=30) as http,
        Client(streamable_http_client(server.url, http_client=http)) as client,
    ):
        yield client
