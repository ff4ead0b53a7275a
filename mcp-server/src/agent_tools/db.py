"""The reports data-access layer: `query(sql, params) -> rows` over SQLite or PostgreSQL, read-only.

SQL is written once with `?` placeholders and translated to psycopg's `%s`. Values come back as plain
JSON-able Python: Decimal -> float, datetime -> "YYYY-MM-DD HH:MM:SS", so both backends look the same.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import threading
from collections.abc import Sequence
from decimal import Decimal
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import quote

import psycopg
from psycopg.rows import dict_row

Row = dict[str, Any]
Params = Sequence[object]


class DatabaseError(Exception):
    """The reports database could not answer; the message names the backend, never credentials."""


class Database(Protocol):
    dialect: str

    def query(self, sql: str, params: Params = ()) -> list[Row]: ...

    def close(self) -> None: ...


def _plain(value: object) -> object:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, dt.datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def to_pyformat(sql: str) -> str:
    """Translate `?` placeholders to psycopg's `%s` (a literal % is doubled first)."""
    return sql.replace("%", "%%").replace("?", "%s")


def _unicode_lower(value: Any) -> Any:
    # SQLite's built-in lower() folds ASCII only; names here are Turkish ("Şahin", "Yılmaz").
    return value.lower() if isinstance(value, str) else value


def _translate(value: Any, src: Any, dst: Any) -> Any:
    """PostgreSQL's translate(), which SQLite lacks, so one SQL text serves both backends."""
    if not isinstance(value, str) or not isinstance(src, str) or not isinstance(dst, str):
        return value
    return value.translate(str.maketrans(src[: len(dst)], dst, src[len(dst) :]))


class SqliteDatabase:
    """Read-only SQLite (`mode=ro` URI); one connection per thread because tools run in worker threads."""

    dialect = "sqlite"

    def __init__(self, path: Path, *, read_only: bool = True) -> None:
        self.path = path
        self.read_only = read_only
        self._local = threading.local()

    def _connect(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            mode = "ro" if self.read_only else "rwc"
            uri = f"file:{quote(str(self.path.resolve()))}?mode={mode}"
            try:
                conn = sqlite3.connect(uri, uri=True, check_same_thread=False)
            except sqlite3.Error as exc:
                raise DatabaseError(f"cannot open the SQLite reports database: {exc}") from exc
            conn.row_factory = sqlite3.Row
            conn.create_function("lower", 1, _unicode_lower, deterministic=True)
            conn.create_function("translate", 3, _translate, deterministic=True)
            self._local.conn = conn
        return conn

    def query(self, sql: str, params: Params = ()) -> list[Row]:
        try:
            cursor = self._connect().execute(sql, tuple(params))
            return [{key: _plain(row[key]) for key in row.keys()} for row in cursor.fetchall()]  # noqa: SIM118
        except sqlite3.Error as exc:
            raise DatabaseError(f"SQLite reports query failed: {exc}") from exc

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None


class PostgresDatabase:
    """PostgreSQL through one shared autocommit connection in a read-only session; reconnects once on failure."""

    dialect = "postgresql"

    def __init__(self, url: str, *, statement_timeout_ms: int = 15000) -> None:
        self.url = url
        self.statement_timeout_ms = statement_timeout_ms
        self._conn: psycopg.Connection[Row] | None = None
        self._lock = threading.Lock()

    def _connect(self) -> psycopg.Connection[Row]:
        if self._conn is None or self._conn.closed:
            options = f"-c default_transaction_read_only=on -c statement_timeout={self.statement_timeout_ms}"
            self._conn = psycopg.connect(
                self.url, autocommit=True, row_factory=dict_row, options=options, connect_timeout=5
            )
        return self._conn

    def query(self, sql: str, params: Params = ()) -> list[Row]:
        with self._lock:
            for attempt in (1, 2):
                try:
                    with self._connect().cursor() as cursor:
                        cursor.execute(to_pyformat(sql), tuple(params))
                        return [{k: _plain(v) for k, v in row.items()} for row in cursor.fetchall()]
                except psycopg.OperationalError as exc:
                    self._discard()
                    if attempt == 2:
                        raise DatabaseError(f"PostgreSQL reports database unreachable: {exc}") from exc
                except psycopg.Error as exc:
                    raise DatabaseError(f"PostgreSQL reports query failed: {exc}") from exc
        raise AssertionError("unreachable")

    def _discard(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = None

    def close(self) -> None:
        with self._lock:
            self._discard()


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://", "postgresql+psycopg://"))


def sqlite_path_from_url(url: str) -> Path:
    """`sqlite:///relative.db` or `sqlite:////abs/path.db` -> a Path."""
    if not url.startswith("sqlite:///"):
        raise DatabaseError("REPORTS_DB_URL must start with postgresql:// or sqlite:///")
    return Path(url.removeprefix("sqlite:///"))


def psycopg_url(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


def open_database(url: str, *, read_only: bool = True) -> Database:
    if is_postgres_url(url):
        return PostgresDatabase(psycopg_url(url))
    return SqliteDatabase(sqlite_path_from_url(url), read_only=read_only)


def redact_url(url: str) -> str:
    """The URL without its password, for logs and /healthz."""
    scheme, sep, rest = url.partition("://")
    if "@" not in rest:
        return url
    creds, _, host = rest.rpartition("@")
    user = creds.split(":", 1)[0]
    return f"{scheme}{sep}{user}:***@{host}" if ":" in creds else f"{scheme}{sep}{user}@{host}"
