"""Who is calling: API keys (stored only as SHA-256 hashes), SSO headers from trusted proxies, or nobody.

AGENT_AUTH=api_key         Authorization: Bearer <key>, looked up by hash in AGENT_KEYS_FILE; a key flagged
                           `frontend` (a chat front-end such as Open WebUI) may name its end user, whose role
                           then comes from the policy's `users:`: in a signed token when FRONTEND_JWT_SECRET
                           is set (agent.security.signed), else in FRONTEND_USER_HEADERS
AGENT_AUTH=trusted_header  user and groups from headers, accepted only from TRUSTED_PROXIES
AGENT_AUTH=none            everyone is "anonymous" with ANONYMOUS_ROLE

Every user name is taken exactly as received or refused (agent.security.names): never cleaned into another.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import tempfile
import threading
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import structlog
import yaml
from fastapi import Request

from agent.errors import Unauthorized
from agent.security.forwarded import client_address, is_trusted, parse_networks, split_groups
from agent.security.names import from_header
from agent.security.signed import SignedUsers
from agent.settings import Settings
from agent_contract.policy import ROLE_NAME, Policy

log = structlog.get_logger("agent.security.auth")
KEY_PREFIX = "la-"


@dataclass(frozen=True)
class Identity:
    user: str
    role: str
    method: str  # api_key | frontend | trusted_header | none
    client: str  # the socket peer, or the right-most untrusted X-Forwarded-For hop when the peer is a trusted proxy
    via: str | None = None  # method "frontend": the name of the front-end's key that named this user

    @property
    def limit_key(self) -> str:
        """Whose rate limit: a front-end's users apart from each other and from any key of the same name."""
        return f"{self.via}/{self.user}" if self.via else self.user


@dataclass(frozen=True)
class KeyEntry:
    name: str
    role: str
    sha256: str
    created: str = ""
    frontend: bool = False  # a chat front-end's key: may name the end user of each request


def new_key() -> str:
    """A fresh API key: 256 random bits; only its hash is ever stored."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def read_keys(path: Path) -> list[KeyEntry]:
    """The entries of a keys file; a missing file is an empty list, a malformed one an error."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError:
        return []
    entries = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise ValueError(f"{path}: expected `keys: [{{name, role, sha256}}]`")
    out = []
    for item in entries:
        if not isinstance(item, dict) or not {"name", "role", "sha256"} <= set(item):
            raise ValueError(f"{path}: every key needs name, role and sha256")
        out.append(
            KeyEntry(
                str(item["name"]),
                str(item["role"]),
                str(item["sha256"]).lower(),
                str(item.get("created", "")),
                item.get("frontend") is True,
            )
        )
    return out


def write_keys(path: Path, entries: list[KeyEntry]) -> None:
    """Replace the keys file atomically (the API may be reading it at the same moment)."""
    body: dict[str, Any] = {
        "keys": [{"name": e.name, "role": e.role, "sha256": e.sha256, "created": e.created} | _flag(e) for e in entries]
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".keys-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("# API keys of local-agent: SHA-256 hashes only. Manage with `agent-admin keys`.\n")
        yaml.safe_dump(body, f, sort_keys=False, allow_unicode=True)
        f.flush()
        os.fsync(f.fileno())
    os.chmod(tmp, 0o644)  # hashes of 256-bit random keys are not secret; readers may run as another user
    os.replace(tmp, path)


def _flag(entry: KeyEntry) -> dict[str, bool]:
    return {"frontend": True} if entry.frontend else {}


def add_key(path: Path, name: str, role: str, frontend: bool = False) -> str:
    """Store the hash of a new key under `name`; returns the key itself (shown once, never stored)."""
    if not ROLE_NAME.match(name):
        raise ValueError(f"key name {name!r} must match {ROLE_NAME.pattern}")
    entries = read_keys(path)
    if any(e.name == name for e in entries):
        raise ValueError(f"a key named {name!r} already exists; revoke it first or pick another name")
    key = new_key()
    created = datetime.now(UTC).isoformat(timespec="seconds")
    write_keys(path, [*entries, KeyEntry(name, role, key_hash(key), created, frontend)])
    return key


def revoke_key(path: Path, name: str) -> bool:
    entries = read_keys(path)
    kept = [e for e in entries if e.name != name]
    if len(kept) == len(entries):
        return False
    write_keys(path, kept)
    return True


class KeyStore:
    """The keys file, re-read when it changes, so `agent-admin keys add|revoke` applies without a restart."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._by_hash: dict[str, KeyEntry] = {}
        self._lock = threading.Lock()

    def lookup(self, key: str) -> KeyEntry | None:
        self._refresh()
        return self._by_hash.get(key_hash(key))

    def count(self) -> int:
        self._refresh()
        return len(self._by_hash)

    def _refresh(self) -> None:
        if self.path is None:
            return
        try:
            st = self.path.stat()
            stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
        except FileNotFoundError:
            stamp = None
        with self._lock:
            if stamp == self._stamp:
                return
            try:
                entries = read_keys(self.path)
            except (ValueError, OSError, yaml.YAMLError) as exc:
                log.error("keys_file_invalid", path=str(self.path), error=str(exc))  # keep the last good keys
                return
            self._by_hash = {e.sha256: e for e in entries}
            self._stamp = stamp
            log.info("keys_loaded", path=str(self.path), keys=len(entries))


class Authenticator:
    """Turns a request into an Identity or raises Unauthorized (401): a key is only "invalid" (never which part
    was wrong); a refused user name or front-end token says why, for the operator wiring the front-end."""

    def __init__(self, settings: Settings, policy: Policy) -> None:
        self.settings, self.policy = settings, policy
        self.keys = KeyStore(settings.agent_keys_file)
        self.proxies = parse_networks(settings.trusted_proxies)
        self.signed = SignedUsers(settings)

    def startup_warnings(self) -> list[str]:
        mode = self.settings.agent_auth
        if mode == "api_key" and self.keys.count() == 0:
            return [
                "AGENT_AUTH=api_key but AGENT_KEYS_FILE holds no keys: every request gets 401. "
                "Create one with `agent-admin keys add NAME --role admin`."
            ]
        if mode == "trusted_header" and not self.proxies:
            return ["AGENT_AUTH=trusted_header but TRUSTED_PROXIES is empty: every request gets 401."]
        if mode == "none":
            return [f"AGENT_AUTH=none: every caller gets role {self.settings.anonymous_role!r}."]
        return []

    def authenticate(self, request: Request, chat: bool = False) -> Identity:
        """`chat`: the request asks the model, so a front-end that signs its users must name one."""
        peer = request.client.host if request.client else ""
        client = client_address(peer, request.headers.get("x-forwarded-for"), self.proxies)
        mode = self.settings.agent_auth
        if mode == "none":
            return Identity("anonymous", self.settings.anonymous_role, "none", client)
        if mode == "trusted_header":
            return self._from_proxy(request, peer, client)
        return self._from_key(request, client, chat)

    def client_of(self, request: Request) -> str:
        """The audited client address of a request that has no identity (yet)."""
        peer = request.client.host if request.client else ""
        return client_address(peer, request.headers.get("x-forwarded-for"), self.proxies)

    def _from_key(self, request: Request, client: str, chat: bool) -> Identity:
        scheme, _, key = (request.headers.get("authorization") or "").partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise Unauthorized("Missing API key: send `Authorization: Bearer <key>`.", code="missing_api_key")
        entry = self.keys.lookup(key.strip())
        if entry is None:
            raise Unauthorized("Invalid API key.", code="invalid_api_key")
        end_user = self._end_user(request, chat) if entry.frontend else ""
        if end_user:  # the front-end's role header is never read: the operator's policy decides
            return Identity(end_user, self.policy.role_for_user(end_user) or entry.role, "frontend", client, entry.name)
        return Identity(entry.name, entry.role, "api_key", client)

    def _end_user(self, request: Request, chat: bool) -> str:
        """The signed token's user when FRONTEND_JWT_SECRET is set (plain headers ignored; a chat without a token
        is refused, a model listing without one is the front-end itself), else the first non-empty
        FRONTEND_USER_HEADERS value (Open WebUI: its user's e-mail, else id)."""
        if self.signed.enabled:
            user = self.signed.end_user(request)
            if user is None and chat:
                raise self.signed.missing()
            return user or ""
        for header in self.settings.frontend_user_headers.split(","):
            raw = single(request, header.strip()) if header.strip() else ""
            if raw:
                return from_header(raw, f"the front-end's {header.strip()} header")
        return ""

    def _from_proxy(self, request: Request, peer: str, client: str) -> Identity:
        if not is_trusted(peer, self.proxies):
            raise Unauthorized("Requests must come through the intranet's SSO proxy.", code="untrusted_proxy")
        raw = single(request, self.settings.auth_user_header)
        user = from_header(raw, f"the SSO proxy's {self.settings.auth_user_header} header") if raw else ""
        if not user:
            raise Unauthorized("The SSO proxy sent no user.", code="missing_user")
        raw = _utf8(single(request, self.settings.auth_groups_header))
        role = self.policy.role_for_groups(split_groups(raw)) or self.settings.anonymous_role
        return Identity(user, role, "trusted_header", client)


def single(request: Request, header: str) -> str:
    """The one value of an identity header; sent more than once it is a 401 naming it: a proxy that appends its
    header to the client's (rather than replacing it) would otherwise let the client's copy decide."""
    values = request.headers.getlist(header)
    if len(values) > 1:
        raise Unauthorized(
            f"The {header} header came {len(values)} times: an identity header must be sent once. The proxy must "
            "replace the client's copy, not append to it.",
            code="repeated_identity_header",
        )
    return values[0] if values else ""


def _utf8(value: str) -> str:
    """Header values arrive decoded as latin-1; SSO proxies send UTF-8 names ("ayşe"), so decode them again."""
    try:
        return value.encode("latin-1").decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return value
