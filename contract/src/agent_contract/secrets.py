"""Secret-or-file settings: a secret comes from VAR, else from the file named by VAR_FILE (docker secrets).

An empty VAR counts as unset (compose passes `VAR=` through when .env leaves it blank), so VAR_FILE then
applies. A VAR_FILE that is configured but cannot be read is an error naming the file, never a silent
"no secret".
"""

from __future__ import annotations

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
