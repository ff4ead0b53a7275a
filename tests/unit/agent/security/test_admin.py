"""`agent-admin`: keys printed once and listed without secrets; audit verify names the bad line, query answers who."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.security import admin as cli
from agent.security.audit import AuditLog
from agent.security.auth import KeyStore
from agent.settings import get_settings

AUDIT_KEY = "admin-test-audit-key-0123456789"


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def admin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., Result]:
    monkeypatch.setenv("AGENT_KEYS_FILE", str(tmp_path / "keys.yaml"))
    monkeypatch.setenv("AUDIT_DIR", str(tmp_path / "audit"))
    monkeypatch.setenv("AUDIT_KEY", AUDIT_KEY)

    def run(*args: str) -> Result:
        get_settings.cache_clear()
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                code = cli.main(list(args))
            except SystemExit as exc:  # argparse and fatal errors
                code = exc.code if isinstance(exc.code, int) else 2
                err.write(str(exc.code) if not isinstance(exc.code, int) else "")
        get_settings.cache_clear()
        return Result(code, out.getvalue(), err.getvalue())

    return run


def test_keys_add_list_revoke_and_bootstrap(admin: Callable[..., Result], tmp_path: Path) -> None:
    run = admin
    first = run("keys", "bootstrap")
    assert first.returncode == 0 and "shown only now" in first.stdout
    key = next(line.strip() for line in first.stdout.splitlines() if line.strip().startswith("la-"))
    again = run("keys", "bootstrap")
    assert again.returncode == 0 and "la-" not in again.stdout  # idempotent: never a second first key
    assert run("keys", "add", "carol", "--role", "support").returncode == 0
    refused = run("keys", "add", "dave", "--role", "superuser")
    assert refused.returncode != 0 and "not in the policy" in refused.stderr
    listing = run("keys", "list").stdout
    assert "admin\tadmin\tsha256:" in listing and "carol\tsupport" in listing and key not in listing
    assert key not in (tmp_path / "keys.yaml").read_text()
    assert run("keys", "revoke", "carol").returncode == 0
    assert "carol" not in run("keys", "list").stdout
    assert run("keys", "revoke", "carol").returncode == 2  # a user mistake: one line, exit 2


def test_audit_verify_names_the_first_bad_line_and_query_answers_who(
    admin: Callable[..., Result], tmp_path: Path
) -> None:
    run = admin
    log = AuditLog(tmp_path / "audit", AUDIT_KEY.encode())
    for i, user in enumerate(["alice", "bob", "alice"]):
        log.append(
            {
                "event": "request",
                "user": user,
                "role": "support",
                "status": 200,
                "request_id": f"r{i}",
                "tool_calls": [
                    {
                        "name": "musteri_bakiyesi",
                        "arguments": {"customer": f"C100{i}"},
                        "outcome": "ok",
                        "customer_ids": [f"C100{i}"],
                    }
                ],
            }
        )
    ok = run("audit", "verify")
    assert ok.returncode == 0 and "OK: 3 records" in ok.stdout
    head = run("audit", "head").stdout.strip()
    assert head.startswith("3:")
    who = run("audit", "query", "--customer", "C1001", "--since", "2000-01-01", "--until", "2999-01-01")
    assert who.returncode == 0 and [line.split("\t")[1] for line in who.stdout.splitlines()] == ["bob"]
    as_json = run("audit", "query", "--user", "alice", "--json").stdout.splitlines()
    assert [json.loads(line)["request_id"] for line in as_json] == ["r0", "r2"]
    path = tmp_path / "audit" / "audit.jsonl"
    path.write_text(path.read_text().replace('"user":"bob"', '"user":"eve"'))
    bad = run("audit", "verify")
    assert bad.returncode == 1 and "audit.jsonl:2:" in bad.stdout and "seal mismatch" in bad.stdout
    anchored = run("audit", "verify", "--anchor", head)
    assert anchored.returncode == 1


def test_the_module_runs_as_a_command_and_refuses_verify_without_the_key(tmp_path: Path) -> None:
    env = {**os.environ, "AUDIT_DIR": str(tmp_path)}
    env.pop("AUDIT_KEY", None)
    result = subprocess.run(
        [sys.executable, "-m", "agent.security.admin", "audit", "verify"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode != 0 and "audit key cannot be read" in result.stderr


def test_frontend_key_is_created_once_flagged_and_written_for_the_front_end(
    admin: Callable[..., Result], tmp_path: Path
) -> None:
    out = tmp_path / "webui" / "key"
    assert admin("keys", "frontend", "openwebui", "--role", "guest", "--out", str(out)).returncode == 0
    key = out.read_text().strip()
    assert oct(out.stat().st_mode & 0o777) == "0o600"
    assert admin("keys", "frontend", "openwebui", "--role", "guest", "--out", str(out)).returncode == 0
    assert out.read_text().strip() == key  # a restart keeps the key Open WebUI already uses
    listing = admin("keys", "list").stdout
    assert "openwebui\tguest" in listing and listing.rstrip().endswith("frontend") and key not in listing
    out.unlink()  # the front-end lost its copy: a fresh key replaces the old one, which stops working
    admin("keys", "frontend", "openwebui", "--role", "guest", "--out", str(out))
    assert out.read_text().strip() != key and admin("keys", "list").stdout.count("openwebui") == 1


def test_frontend_key_role_changes_in_place_and_unknown_roles_are_refused_with_the_known_ones(
    admin: Callable[..., Result], tmp_path: Path
) -> None:
    out = tmp_path / "webui" / "key"
    admin("keys", "frontend", "openwebui", "--role", "guest", "--out", str(out))
    key = out.read_text().strip()
    changed = admin("keys", "frontend", "openwebui", "--role", "support", "--out", str(out))
    assert changed.returncode == 0 and "guest -> support" in changed.stdout
    assert out.read_text().strip() == key and "openwebui\tsupport" in admin("keys", "list").stdout  # same key
    unknown = admin("keys", "frontend", "openwebui", "--role", "boss", "--out", str(out))
    assert unknown.returncode != 0 and "known roles: admin" in unknown.stderr and "guest" in unknown.stderr
    assert "openwebui\tsupport" in admin("keys", "list").stdout  # nothing changed


def test_frontend_key_rotation_refuses_the_old_key_and_keeps_the_role(
    admin: Callable[..., Result], tmp_path: Path
) -> None:
    out = tmp_path / "webui" / "key"
    admin("keys", "frontend", "openwebui", "--role", "support", "--out", str(out))
    old = out.read_text().strip()
    rotated = admin("keys", "frontend", "openwebui", "--out", str(out), "--rotate")
    new = out.read_text().strip()
    assert rotated.returncode == 0 and new != old and "old key is refused" in rotated.stdout
    store = KeyStore(tmp_path / "keys.yaml")
    assert store.lookup(old) is None
    entry = store.lookup(new)
    assert entry is not None and (entry.name, entry.role, entry.frontend) == ("openwebui", "support", True)
    assert admin("keys", "frontend", "newfront", "--out", str(tmp_path / "k2")).returncode != 0  # no role yet
