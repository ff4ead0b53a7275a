"""How every process reaches Redis: the ACL user, the password and the TLS files from the settings, and the
Redis URL as messages show it (never a credential).

REDIS_URL names the server (`redis://host:6379/0`, or `rediss://` for TLS). Its credentials, when it carries
any, win; otherwise REDIS_USERNAME and REDIS_PASSWORD / REDIS_PASSWORD_FILE (agent_contract.secrets) apply,
so a worker host keeps the password in a file instead of a URL in its environment.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import structlog
from redis.exceptions import AuthenticationError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from agent.settings import Settings
from agent_contract.secrets import read_secret

T = TypeVar("T")
log = structlog.get_logger("agent.redisconn")
BACKOFF_FIRST, BACKOFF_MAX = 0.05, 1.0  # seconds between tries while Redis is away: doubling, capped


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


def unreachable(exc: BaseException) -> bool:
    """Redis is away (refused, reset, loading its AOF, or silent while a connection was being opened: a network
    cut), as opposed to refusing us or failing a command it was sent. redis-py says a connect timeout only in
    the message of its TimeoutError; a timeout after a command went out is not a blip (it may have run)."""
    if isinstance(exc, RedisTimeoutError):
        return str(exc).startswith("Timeout connecting")
    return isinstance(exc, RedisConnectionError | ConnectionError) and not isinstance(exc, AuthenticationError)


async def ride_through(call: Callable[[], Awaitable[T]], seconds: float, what: str) -> T:
    """Await `call()`; while Redis is unreachable, try again with backoff until `seconds` have passed, then raise the
    last error. Only for calls that may run twice: a reply lost with the connection means the command may have run.
    A command that timed out or a refused credential is not a blip and raises at once."""
    deadline = time.monotonic() + seconds
    pause = BACKOFF_FIRST
    while True:
        try:
            return await call()
        except Exception as exc:
            left = deadline - time.monotonic()
            if not unreachable(exc) or left <= 0:
                raise
            log.info("redis_unreachable_retrying", what=what, error=type(exc).__name__, seconds_left=round(left, 2))
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, BACKOFF_MAX)
