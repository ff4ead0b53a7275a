"""A chat front-end's key, kept in step with the file the front-end reads it from (`agent-admin keys frontend`).

The compose `webui` profile runs this on every `up` (service `webui-key`): the key is created once, its
secret written to a volume only the front-end mounts, and its role follows WEBUI_USER_ROLE. `--rotate`
replaces the key: the keys file is rewritten first, so the API refuses the old key from its next request,
then the new key goes to the front-end's file (the front-end reads it when it restarts).
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from agent.security.auth import add_key, key_hash, read_keys, revoke_key, write_keys


def frontend_key(path: Path, name: str, role: str | None, out: Path, rotate: bool = False) -> int:
    """Idempotent: the front-end key `name` exists, flagged, with `role` (None: keep it), its key in `out`."""
    current = next((e for e in read_keys(path) if e.name == name), None)
    in_place = (
        current is not None
        and current.frontend
        and out.is_file()
        and key_hash(out.read_text().strip()) == current.sha256
    )
    if current is not None and in_place and not rotate:
        if role is None or role == current.role:
            print(f"agent-admin: front-end key {name!r} (role {current.role}) already in place")
            return 0
        write_keys(path, [replace(e, role=role) if e.name == name else e for e in read_keys(path)])
        print(f"agent-admin: front-end key {name!r}: role {current.role} -> {role} (the key is unchanged)")
        return 0
    role = role or (current.role if current is not None else None)
    if role is None:
        raise ValueError(f"no front-end key {name!r} yet: give its --role")
    revoke_key(path, name)
    key = add_key(path, name, role, frontend=True)
    _write_secret(out, key)
    how = "rotated; the old key is refused from now on" if current is not None else "created"
    print(f"agent-admin: front-end key {name!r} (role {role}) {how}; written to {out}")
    return 0


def _write_secret(out: Path, key: str) -> None:
    """Readable by its owner only, replaced atomically (the front-end may be reading the old one)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key + "\n")
    os.replace(tmp, out)
