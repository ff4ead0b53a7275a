"""Per-user rate limits: a sliding one-minute window, 429 with Retry-After, audited; other users unaffected."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.security.audit_check import records
from agent.security.ratelimit import MemoryLimiter, NoLimit, RedisLimiter, make_limiter
from agent.settings import Settings
from tests.unit.agent.security.test_auth import ASK, api, bearer, env, settings_for

__all__ = ["env"]  # the fixture, shared with test_auth


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_the_window_slides_per_user() -> None:
    clock = Clock()
    limiter = MemoryLimiter(3, clock)
    assert [await limiter.hit("alice") for _ in range(3)] == [None, None, None]
    clock.now += 20
    assert await limiter.hit("alice") == 40.0  # the first request leaves the window in 40 s
    assert await limiter.hit("bob") is None
    clock.now += 40.001
    assert await limiter.hit("alice") is None


def test_the_backend_follows_the_settings() -> None:
    assert isinstance(make_limiter(Settings(rate_limit_per_minute=0)), NoLimit)
    assert isinstance(make_limiter(Settings(rate_limit_per_minute=5, model_backend="direct")), MemoryLimiter)
    assert isinstance(make_limiter(Settings(rate_limit_per_minute=5, model_backend="queue")), RedisLimiter)


async def test_past_the_limit_a_user_gets_429_with_retry_after_and_an_audit_record(env: dict[str, Any]) -> None:
    settings = settings_for(env["tmp"], rate_limit_per_minute=2)
    async with api(settings) as (http, (backend, _)):
        codes = [
            (await http.post("/v1/chat/completions", json=ASK, headers=bearer(env["keys"]["desk"]))) for _ in range(3)
        ]
        other = await http.post("/v1/chat/completions", json=ASK, headers=bearer(env["keys"]["clock"]))
        models = await http.get("/v1/models", headers=bearer(env["keys"]["desk"]))
    assert [r.status_code for r in codes] == [200, 200, 429]
    limited = codes[2]
    assert 1 <= int(limited.headers["Retry-After"]) <= 60
    assert limited.json()["error"]["type"] == "rate_limit_error" and limited.json()["error"]["code"] == "rate_limited"
    assert other.status_code == 200 and models.status_code == 200  # per user, and only chats count
    assert len(backend.requests) == 3
    statuses = [(r["user"], r["status"]) for r in records(Path(settings.audit_dir))]
    assert statuses == [("desk-user", 200), ("desk-user", 200), ("desk-user", 429), ("clock-user", 200)]
