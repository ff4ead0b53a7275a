"""The notes store: a small writable SQLite file in DATA_DIR (the only thing the tools ever write).

Every note belongs to the user who wrote it (the identity the agent forwarded) and is listed only to that
user: a note is text a user can plant, so sharing notes would let one user put instructions into another
user's conversation. Notes from before owners existed have no owner and are listed to nobody.
"""

from __future__ import annotations

import datetime as dt
import sqlite3
import threading
from pathlib import Path
from typing import Any

from agent_tools.textfold import fold

MAX_NOTE_CHARS = 4000
MAX_NOTES = 10_000
MAX_NOTES_PER_USER = 1_000  # one user cannot fill the store for everybody

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS notes (id INTEGER PRIMARY KEY AUTOINCREMENT, title TEXT NOT NULL, "
    "text TEXT NOT NULL, created_at TEXT NOT NULL, owner TEXT)"
)


class NotesStore:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, timeout=5)
        conn.execute(_SCHEMA)
        columns = {row[1] for row in conn.execute("PRAGMA table_info(notes)")}
        if "owner" not in columns:  # a store from before notes had owners: its notes stay unlisted
            conn.execute("ALTER TABLE notes ADD COLUMN owner TEXT")
        return conn

    def add(self, owner: str, title: str, text: str, now: dt.datetime) -> dict[str, Any]:
        with self._lock:
            conn = self._connect()
            try:
                with conn:
                    (count,) = conn.execute("SELECT COUNT(*) FROM notes").fetchone()
                    if count >= MAX_NOTES:
                        raise OverflowError(f"the notes store is full ({MAX_NOTES} notes)")
                    (mine,) = conn.execute("SELECT COUNT(*) FROM notes WHERE owner = ?", (owner,)).fetchone()
                    if mine >= MAX_NOTES_PER_USER:
                        raise OverflowError(f"you have {MAX_NOTES_PER_USER} notes, the most one user may keep")
                    stamp = now.strftime("%Y-%m-%d %H:%M:%S")
                    cur = conn.execute(
                        "INSERT INTO notes (title, text, created_at, owner) VALUES (?, ?, ?, ?)",
                        (title, text, stamp, owner),
                    )
                return {"id": cur.lastrowid, "title": title, "text": text, "created_at": stamp}
            finally:
                conn.close()

    def list(self, owner: str, limit: int, contains: str | None) -> tuple[list[dict[str, Any]], int]:
        """`owner`'s notes, newest first, optionally only those whose title or text holds `contains`."""
        where = " WHERE owner = ?"
        params: tuple[str, ...] = (owner,)
        if contains:
            where += " AND (instr(fold(title), ?) > 0 OR instr(fold(text), ?) > 0)"
            params += (fold(contains), fold(contains))
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
