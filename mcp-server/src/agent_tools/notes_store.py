"""The notes store: a small writable SQLite file in DATA_DIR (the only thing the tools ever write)."""

from __future__ import annotations

import datetime as dt
import sqlite3
import threading
from pathlib import Path
from typing import Any

from agent_tools.textfold import fold

MAX_NOTE_CHARS = 4000
MAX_NOTES = 10_000

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL, "
    "text TEXT NOT NULL, created_at TEXT NOT NULL)"
)


class NotesStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=5)
        conn.execute(_SCHEMA)
        return conn

    def add(self, title: str, text: str, now: dt.datetime) -> dict[str, Any]:
        with self._lock:
            conn = self._connect()
            try:
                with conn:
                    (count,) = conn.execute("SELECT COUNT(*) FROM notes").fetchone()
                    if count >= MAX_NOTES:
                        raise OverflowError(f"the notes store is full ({MAX_NOTES} notes)")
                    stamp = now.strftime("%Y-%m-%d %H:%M:%S")
                    cur = conn.execute(
                        "INSERT INTO notes (title, text, created_at) VALUES (?, ?, ?)", (title, text, stamp)
                    )
                return {"id": cur.lastrowid, "title": title, "text": text, "created_at": stamp}
            finally:
                conn.close()

    def list(self, limit: int, contains: str | None) -> tuple[list[dict[str, Any]], int]:
        """Newest first, optionally only notes whose title or text contains `contains`; (notes, total)."""
        where: str = ""
        params: tuple[str, ...] = ()
        if contains:
            where = " WHERE instr(fold(title), ?) > 0 OR instr(fold(text), ?) > 0"
            params = (fold(contains), fold(contains))
        with self._lock:
            conn = self._connect()
            conn.create_function("fold", 1, lambda v: fold(v) if isinstance(v, str) else v, deterministic=True)
            conn.row_factory = sqlite3.Row
            try:
                (total,) = conn.execute(f"SELECT COUNT(*) FROM notes{where}", params).fetchone()
                rows = conn.execute(
                    f"SELECT id, title, text, created_at FROM notes{where} ORDER BY id DESC LIMIT ?", (*params, limit)
                ).fetchall()
                return [dict(row) for row in rows], int(total)
            finally:
                conn.close()
