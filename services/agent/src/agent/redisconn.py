"""How every process reaches Redis: the ACL user, the password and the TLS files from the settings, and the
Redis URL as messages show it (never a credential).

REDIS_URL names the server (`redis://host:6379/0`, or `rediss://` for TLS). Its credentials, when it carries
any, win; otherwise REDIS_USERNAME and REDIS_PASSWORD / REDIS_PASSWORD_FILE (agent_contract.secrets) apply,
so a worker host keeps the password in a file instead of a URL in its environment.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from redis.exceptions import AuthenticationError

from agent.settings import Settings
from agent_contract.secrets import read_secret


class RedisConfigError(ValueError):
    """The Redis settings contradict each other or name a file that cannot be read; the message says which."""


def redacted(url: str) -> str:
    """The Redis URL as messages show it: never the user or the password."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}:{parts.port or 6379}{parts.path}"


def fix_hint(exc: Exception) -> str:
    """What the operator should check after a failed Redis call: the credentials, TLS, or the address."""
    if isinstance(exc, AuthenticationError):  # NOAUTH, WRONGPASS
        return "Redis refused this process's credentials: set REDIS_PASSWORD_FILE (or REDIS_PASSWORD, REDIS_USERNAME)."
    if any(word in str(exc).lower() for word in ("ssl", "tls", "certificate")):  # "[SSL: …]", "(_ssl.c:2427)"
        return "The TLS handshake failed: check rediss:// and REDIS_TLS_CA_FILE (and the client certificate, if any)."
    return "Check that the `redis` service is running and REDIS_URL is right (compose: `docker compose ps redis`)."


def connection_options(settings: Settings) -> dict[str, Any]:
    """Keyword arguments for every redis-py client built from REDIS_URL (credentials and TLS files)."""
    url = urlsplit(settings.redis_url)
    options: dict[str, Any] = {}
    if settings.redis_username and not url.username:
        options["username"] = settings.redis_username
    if not url.password:
        password = read_secret(settings.redis_password, settings.redis_password_file, "REDIS_PASSWORD")
        if password:
            options["password"] = password
    return options | _tls_options(settings, url.scheme)


def _tls_options(settings: Settings, scheme: str) -> dict[str, str]:
    files: dict[str, tuple[str, Path | None]] = {
        "ssl_ca_certs": ("REDIS_TLS_CA_FILE", settings.redis_tls_ca_file),
        "ssl_certfile": ("REDIS_TLS_CERT_FILE", settings.redis_tls_cert_file),
        "ssl_keyfile": ("REDIS_TLS_KEY_FILE", settings.redis_tls_key_file),
    }
    given = {key: (name, path) for key, (name, path) in files.items() if path is not None}
    if given and scheme != "rediss":
        names = ", ".join(name for name, _ in given.values())
        raise RedisConfigError(
            f"{names} set, but REDIS_URL {redacted(settings.redis_url)} is not TLS: write it rediss://host:port/db"
        )
    if ("ssl_certfile" in given) != ("ssl_keyfile" in given):
        raise RedisConfigError("REDIS_TLS_CERT_FILE and REDIS_TLS_KEY_FILE go together (the client's certificate)")
    for name, path in given.values():
        if not os.access(path, os.R_OK):
            raise RedisConfigError(f"{name} {path} cannot be read")
    return {key: str(path) for key, (_, path) in given.items()}
