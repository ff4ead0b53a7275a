"""How the agent reaches Redis: credentials from a secret file, TLS files only with rediss://, no credential shown."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from redis.exceptions import AuthenticationError, BusyLoadingError, ResponseError
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import TimeoutError as RedisTimeoutError

from agent import redisconn
from agent.redisconn import RedisConfigError, connection_options, fix_hint, redacted, ride_through, unreachable
from agent.settings import Settings
from agent_contract.secrets import SecretFileError


def settings(**values: object) -> Settings:
    return Settings(**values)  # type: ignore[arg-type]


def test_redis_url_in_messages_never_carries_a_credential() -> None:
    assert redacted("redis://:s3cret@redis:6379/0") == "redis://redis:6379/0"
    assert redacted("redis://user:pw@10.0.0.5/2") == "redis://10.0.0.5:6379/2"
    assert redacted("rediss://agent:pw@queue-host:6380/0") == "rediss://queue-host:6380/0"


def test_the_password_comes_from_its_file_when_the_url_has_none(tmp_path: Path) -> None:
    secret = tmp_path / "password"
    secret.write_text("from-the-file\n")
    options = connection_options(settings(redis_url="redis://queue-host:6379/0", redis_password_file=secret))
    assert options == {"password": "from-the-file"}
    both = settings(redis_url="redis://q/0", redis_password="from-env", redis_password_file=secret)
    assert connection_options(both) == {"password": "from-env"}
    with_user = settings(redis_url="redis://q/0", redis_username="worker-b", redis_password="pw")
    assert connection_options(with_user) == {"username": "worker-b", "password": "pw"}


def test_credentials_in_the_url_win_and_no_file_is_read(tmp_path: Path) -> None:
    missing = tmp_path / "never-read"
    given = settings(redis_url="redis://agent:in-url@q/0", redis_username="other", redis_password_file=missing)
    assert connection_options(given) == {}


def test_an_unreadable_password_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(SecretFileError, match=r"REDIS_PASSWORD_FILE .*missing"):
        connection_options(settings(redis_url="redis://q/0", redis_password_file=tmp_path / "missing"))


def test_tls_files_need_a_rediss_url_and_must_be_readable(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text("-----BEGIN CERTIFICATE-----\n")
    ok = settings(redis_url="rediss://:pw@q:6380/0", redis_tls_ca_file=ca)
    assert connection_options(ok) == {"ssl_ca_certs": str(ca)}
    with pytest.raises(RedisConfigError, match=r"REDIS_TLS_CA_FILE set, but REDIS_URL redis://q:6379/0 is not TLS"):
        connection_options(settings(redis_url="redis://:pw@q/0", redis_tls_ca_file=ca))
    with pytest.raises(RedisConfigError, match=r"REDIS_TLS_CA_FILE .*absent\.crt cannot be read"):
        connection_options(settings(redis_url="rediss://q/0", redis_tls_ca_file=tmp_path / "absent.crt"))
    with pytest.raises(RedisConfigError, match="go together"):
        connection_options(settings(redis_url="rediss://q/0", redis_tls_cert_file=ca))


def test_the_hint_names_what_to_fix() -> None:
    assert "REDIS_PASSWORD_FILE" in fix_hint(AuthenticationError("invalid username-password pair"))
    assert "REDIS_TLS_CA_FILE" in fix_hint(RedisConnectionError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate"))
    assert "TLS" in fix_hint(RedisConnectionError("EOF occurred in violation of protocol (_ssl.c:2427)."))
    assert "REDIS_URL" in fix_hint(RedisConnectionError("Error 111 connecting to 127.0.0.1:6379."))


def test_empty_values_from_compose_mean_unset() -> None:
    empty = settings(redis_url="redis://q/0", redis_username="", redis_password_file="", redis_tls_ca_file="")
    assert empty.redis_tls_ca_file is None and empty.redis_password_file is None
    assert connection_options(empty) == {}


@pytest.mark.parametrize(
    ("exc", "away"),
    [
        (RedisConnectionError("Error 111 connecting to 127.0.0.1:6379. Connection refused."), True),
        (RedisConnectionError("Connection closed by server."), True),
        (BusyLoadingError("Redis is loading the dataset in memory"), True),
        (RedisTimeoutError("Timeout connecting to server"), True),  # a network cut: nothing was sent
        (RedisTimeoutError("Timeout reading from 127.0.0.1:6379"), False),  # the command may have run
        (AuthenticationError("WRONGPASS invalid username-password pair"), False),
        (ResponseError("NOSCRIPT"), False),
    ],
)
def test_only_a_redis_that_is_away_counts_as_a_blip(exc: Exception, away: bool) -> None:
    assert unreachable(exc) is away


def failing(errors: list[Exception], answer: str = "ok") -> Callable[[], Awaitable[str]]:
    async def call() -> str:
        if errors:
            raise errors.pop(0)
        return answer

    return call


async def test_ride_through_tries_again_while_redis_is_away(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(redisconn, "BACKOFF_FIRST", 0.001)
    errors: list[Exception] = [RedisConnectionError("refused"), RedisTimeoutError("Timeout connecting to server")]
    assert await ride_through(failing(errors), 5.0, "test") == "ok"
    assert errors == []


async def test_ride_through_raises_at_once_what_is_no_blip_and_after_its_wait() -> None:
    with pytest.raises(RedisTimeoutError):
        await ride_through(failing([RedisTimeoutError("Timeout reading from socket")]), 5.0, "test")
    with pytest.raises(RedisConnectionError):
        await ride_through(failing([RedisConnectionError("refused")] * 1000), 0.0, "test")
