"""`agent-admin`: manage API keys and read, verify and query the audit log (settings from the environment).

With `local-agent` it finds that command's state directory by itself (`--home`, LOCAL_AGENT_HOME, or the
default one when nothing in the environment names another keys file or audit log).
"""

from __future__ import annotations

import argparse
import errno
import json
import re
import sys
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from agent import cli
from agent.home import found_home, state_settings
from agent.security.audit import AuditLog, resolve_key
from agent.security.audit_check import query, verify
from agent.security.auth import add_key, read_keys, revoke_key
from agent.security.frontend_keys import frontend_key
from agent.security.privacy import pseudonymizer
from agent.settings import Settings, get_settings
from agent_contract.policy import PolicyError, load_policy
from agent_contract.secrets import read_secret

FIRST_KEY_BANNER = "=" * 72
T = TypeVar("T")
ANCHOR = re.compile(r"^(\d+):([0-9a-f]{64})$")
# Keys are written through the one-shot keys-init service: agent-api mounts the keys volume read-only.
READ_ONLY_HINT = "in the compose stack run it through keys-init: docker compose run --rm keys-init agent-admin keys ..."


def _parser() -> argparse.ArgumentParser:
    parser = cli.parser("agent-admin", __doc__)
    parser.add_argument("--home", type=Path, help="local-agent's state directory (env LOCAL_AGENT_HOME)")
    sub = parser.add_subparsers(dest="area", required=True)
    keys = sub.add_parser("keys", help="API keys (AGENT_KEYS_FILE)").add_subparsers(dest="action", required=True)
    add = keys.add_parser("add", help="create a key and print it once")
    add.add_argument("name")
    add.add_argument("--role", required=True)
    add.add_argument(
        "--frontend",
        action="store_true",
        help="a chat front-end's key (Open WebUI): it may name its end users, whose roles come from the policy",
    )
    front = keys.add_parser(
        "frontend",
        help="make sure the front-end key NAME exists with --role and its key is in --out (compose `webui` profile)",
    )
    front.add_argument("name")
    front.add_argument(
        "--role", help="role of the users the policy's `users:` does not map (changes an existing key's role)"
    )
    front.add_argument("--out", type=Path, required=True, help="file the front-end reads its key from")
    front.add_argument("--rotate", action="store_true", help="replace the key: the old one is refused at once")
    listing = keys.add_parser("list", help="names, roles and hash prefixes (never keys)")
    revoke = keys.add_parser("revoke", help="delete a key by name")
    revoke.add_argument("name")
    boot = keys.add_parser("bootstrap", help="create the first admin key if the file has no keys (first start)")
    boot.add_argument("--name", default="admin")
    boot.add_argument("--role", default="admin")
    for p in (add, front, listing, revoke, boot):
        p.add_argument("--keys-file", type=Path, help="default: AGENT_KEYS_FILE")
    audit = sub.add_parser("audit", help="the audit log (AUDIT_DIR)").add_subparsers(dest="action", required=True)
    ver = audit.add_parser("verify", help="check the whole chain; exit 1 and name the first bad line")
    ver.add_argument("--anchor", help="SEQ:MAC from an earlier `audit head`, kept elsewhere: detects truncation")
    audit.add_parser("head", help="print the last record's seq and mac (copy it somewhere safe)")
    audit.add_parser("prune", help="apply AUDIT_RETENTION_DAYS now")
    q = audit.add_parser("query", help="who looked at customer X between A and B")
    q.add_argument("--customer", help="customer ID (C1001) or name (matched through its pseudonym)")
    q.add_argument("--user")
    q.add_argument("--since", help="ISO date or time, UTC (2026-01-31 or 2026-01-31T08:00)")
    q.add_argument("--until")
    q.add_argument("--json", action="store_true", help="whole records as JSON lines")
    return parser


def _keys_file(settings: Settings, override: Path | None) -> Path:
    path = override or settings.agent_keys_file
    if path is None:
        raise cli.UsageError("set AGENT_KEYS_FILE (or pass --keys-file)")
    return path


def keys_command(args: argparse.Namespace, settings: Settings) -> int:
    path = _keys_file(settings, args.keys_file)
    if args.action in ("add", "bootstrap"):
        if args.action == "bootstrap" and read_keys(path):
            print(f"agent-admin: {path} already holds keys; no key created")
            return 0
        _known_role(settings, args.role)
        frontend = bool(getattr(args, "frontend", False))
        key = _write(path, lambda: add_key(path, args.name, args.role, frontend=frontend))
        print(
            f"{FIRST_KEY_BANNER}\nAPI key {args.name!r} (role {args.role}), shown only now; store it safely:\n\n"
            f"    {key}\n\nClients send it as `Authorization: Bearer <key>`.\n{FIRST_KEY_BANNER}"
        )
        return 0
    if args.action == "frontend":
        if args.role is not None:
            _known_role(settings, args.role)
        return _write(path, lambda: frontend_key(path, args.name, args.role, args.out, rotate=args.rotate))
    if args.action == "revoke":
        if not _write(path, lambda: revoke_key(path, args.name)):
            raise cli.UsageError(f"no key named {args.name!r} (agent-admin keys list shows the names)")
        print(f"revoked {args.name!r}")
        return 0
    for entry in read_keys(path):
        kind = "\tfrontend" if entry.frontend else ""
        print(f"{entry.name}\t{entry.role}\tsha256:{entry.sha256[:12]}…\t{entry.created}{kind}")
    return 0


def _known_role(settings: Settings, role: str) -> None:
    """A role the policy defines, else a usage error listing the ones it does."""
    try:
        roles = load_policy(settings.agent_policy_file).roles
    except PolicyError as exc:
        raise cli.UsageError(str(exc)) from exc
    if role not in roles:
        raise cli.UsageError(f"role {role!r} is not in the policy; known roles: {', '.join(roles)}")


def _write(path: Path, change: Callable[[], T]) -> T:
    """Run a change to the keys file; a refused write or a bad name is the user's to fix, not a traceback."""
    try:
        return change()
    except ValueError as exc:  # a duplicate or malformed key name
        raise cli.UsageError(str(exc)) from exc
    except OSError as exc:
        hint = f"; {READ_ONLY_HINT}" if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM) else ""
        raise cli.UsageError(f"cannot write {path}: {exc.strerror or exc}{hint}") from exc


def _time(text: str | None, flag: str) -> datetime | None:
    if not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as exc:
        raise cli.UsageError(f"{flag} {text!r} is not an ISO date or time (2026-01-31 or 2026-01-31T08:00)") from exc
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _anchor(text: str | None) -> tuple[int, str] | None:
    """SEQ:MAC as `audit head` prints it; anything else is a typo, never a "rewritten log" alarm."""
    if not text:
        return None
    match = ANCHOR.match(text.strip())
    if match is None:
        raise cli.UsageError(f"--anchor {text!r} is not SEQ:MAC as `agent-admin audit head` prints it")
    return int(match.group(1)), match.group(2)


def _audit_key(settings: Settings) -> bytes:
    secret = read_secret(settings.audit_key, None, "AUDIT_KEY")
    try:
        return resolve_key(settings.audit_dir, secret, settings.audit_key_file, create=False)
    except ValueError as exc:
        raise cli.UsageError(str(exc)) from exc


def audit_command(args: argparse.Namespace, settings: Settings) -> int:
    key = _audit_key(settings)
    if args.action == "prune":
        log = AuditLog(
            settings.audit_dir,
            key,
            rotate_bytes=settings.audit_rotate_bytes,
            retention_days=settings.audit_retention_days,
        )
        print("\n".join(f"deleted {p.name}" for p in log.prune()) or "nothing older than the retention period")
        return 0
    if args.action == "query":
        found = query(
            settings.audit_dir,
            pseudonymizer(settings, key),
            customer=args.customer,
            user=args.user,
            since=_time(args.since, "--since"),
            until=_time(args.until, "--until"),
        )
        if not found:
            print(f"no audit record matched{_criteria(args)} in {settings.audit_dir}", file=sys.stderr)
        for r in found:
            tools = ",".join(f"{c['name']}({c['outcome']})" for c in r.get("tool_calls") or []) or "-"
            print(
                json.dumps(r, ensure_ascii=False)
                if args.json
                else f"{r['time']}\t{r.get('user')}\t{r.get('role')}\t{r.get('client')}\t{r.get('request_id')}\t"
                f"{r.get('status')}\t{tools}"
            )
        return 0
    report = verify(settings.audit_dir, key, _anchor(getattr(args, "anchor", None)))
    if args.action == "head":
        print(f"{report.last_seq}:{report.last_mac}")
        return 0 if report.ok else 1
    for note in report.notes:
        print(f"note: {note}")
    if report.problem is not None:
        print(f"FAILED after {report.records} good records: {report.problem}")
        return 1
    print(f"OK: {report.records} records, chain intact, last seq {report.last_seq} at {report.last_time or '-'}")
    return 0


def _criteria(args: argparse.Namespace) -> str:
    names = ("customer", "user", "since", "until")
    given = [f"--{name} {getattr(args, name)}" for name in names if getattr(args, name)]
    return f" ({', '.join(given)})" if given else ""


def _settings(home: Path | None) -> Settings:
    """The environment's settings; with local-agent's state directory, its keys file, audit log and key."""
    found = found_home(home)
    if found is None:
        return get_settings()
    print(f"agent-admin: local-agent's state in {found}", file=sys.stderr)
    return Settings(**state_settings(found))  # type: ignore[arg-type]


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)

    def body() -> int:
        settings = _settings(args.home)
        return keys_command(args, settings) if args.area == "keys" else audit_command(args, settings)

    return cli.run("agent-admin", body)


if __name__ == "__main__":
    sys.exit(main())
