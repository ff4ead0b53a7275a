"""Secret-or-file settings: a secret comes from VAR, else from the file named by VAR_FILE (docker secrets).

An empty VAR counts as unset (compose passes `VAR=` through when .env leaves it blank), so VAR_FILE then
applies. A VAR_FILE that is configured but cannot be read is an error naming the file, never a silent
"no secret". `RotatingSecret` follows the file while the service runs, so a rotated secret (secrets-init
rewriting the volume after `docker compose up -d`) reaches running services without a restart.
"""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import SecretStr


class SecretFileError(ValueError):
    """A configured secret file cannot be read; the message names the variable and the file."""


def read_secret(value: SecretStr | str | None, path: Path | None, name: str) -> str | None:
    """The secret from `value`, else the stripped contents of `path`; None when neither gives one."""
    text = value.get_secret_value() if isinstance(value, SecretStr) else value
    if text:
        return text
    if path is None:
        return None
    try:
        return path.read_text(encoding="utf-8").strip() or None
    except OSError as exc:
        raise SecretFileError(f"{name}_FILE {path} cannot be read: {exc}") from exc


class RotatingSecret:
    """A secret-or-file that re-reads its file whenever the file changes (inode, size or mtime).

    A fixed VAR never changes. Once read, a file that vanishes or becomes unreadable keeps the last value (a
    rotation replaces the file atomically); before the first read that is a SecretFileError.
    """

    def __init__(self, value: SecretStr | str | None, path: Path | None, name: str) -> None:
        text = value.get_secret_value() if isinstance(value, SecretStr) else value
        self._fixed, self._path, self._name = text or None, path, name
        self._seen: tuple[int, int, int] | None = None
        self._value: str | None = None
        self.get()  # an unreadable file is a start-up error

    def get(self) -> str | None:
        if self._fixed is not None or self._path is None:
            return self._fixed
        try:
            st = os.stat(self._path)
        except OSError:
            if self._seen is None:
                return read_secret(None, self._path, self._name)  # raises SecretFileError naming the file
            return self._value
        seen = (st.st_ino, st.st_size, st.st_mtime_ns)
        if seen != self._seen:
            self._value, self._seen = read_secret(None, self._path, self._name), seen
        return self._value
