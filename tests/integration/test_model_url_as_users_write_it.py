"""Issue 38: `MODEL_PROTOCOL=openai MODEL_URL=http://host:8080/v1` (the base URL every OpenAI client writes) gave
"model qwen3:4b is not served at http://host:8080/v1 (it serves: none)": the agent asked /v1/v1/models. Both forms
now reach the same models, on both protocols; a listing that fails says what was asked and what came back; and the
model's engine-neutral name MODEL_NAME is read, its old name OLLAMA_MODEL still works with one notice."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import pytest

from agent.backends.engine import engine_status
from agent.settings import Settings
from tests.integration.conftest import FakeOllama, FakeOpenAI

pytestmark = pytest.mark.integration


async def served(settings: Settings) -> tuple[bool, list[str], str]:
    async with httpx.AsyncClient() as http:
        status = await engine_status(http, settings)
    return status.reachable, status.models, status.detail


@pytest.mark.parametrize("suffix", ["", "/", "/v1", "/v1/"])
async def test_an_openai_base_url_with_or_without_v1_reaches_the_same_models(
    fake_openai: FakeOpenAI, suffix: str
) -> None:
    bare = await served(Settings(model_protocol="openai", model_url=fake_openai.url))
    assert bare[0] and bare[1]
    assert await served(Settings(model_protocol="openai", model_url=fake_openai.url + suffix)) == bare


@pytest.mark.parametrize("suffix", ["", "/v1"])
async def test_an_ollama_url_with_or_without_v1_reaches_the_same_models(fake_ollama: FakeOllama, suffix: str) -> None:
    reachable, models, _ = await served(Settings(model_protocol="ollama", ollama_url=fake_ollama.url + suffix))
    assert reachable and "qwen3:4b" in models


async def test_a_listing_that_fails_says_what_was_asked_and_what_came_back(fake_openai: FakeOpenAI) -> None:
    reachable, models, detail = await served(Settings(model_protocol="openai", model_url=fake_openai.url + "/v2"))
    assert not reachable and models == []
    assert f"GET {fake_openai.url}/v2/v1/models answered HTTP 404" in detail and "MODEL_URL" in detail


def settings_of(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    code = "from agent.settings import get_settings as g; g(); g(); print(g().model_name)"
    clean = {k: v for k, v in os.environ.items() if k not in ("MODEL_NAME", "OLLAMA_MODEL")}
    return subprocess.run([sys.executable, "-c", code], env=clean | env, capture_output=True, text=True, check=True)


def test_the_old_name_still_works_and_says_so_once_and_the_new_one_wins() -> None:
    old = settings_of({"OLLAMA_MODEL": "qwen2.5:3b"})
    assert old.stdout.strip() == "qwen2.5:3b"
    assert old.stderr.count("OLLAMA_MODEL is deprecated: use MODEL_NAME") == 1
    new = settings_of({"MODEL_NAME": "llama3.2:3b"})
    assert new.stdout.strip() == "llama3.2:3b" and new.stderr == ""
    both = settings_of({"MODEL_NAME": "llama3.2:3b", "OLLAMA_MODEL": "qwen2.5:3b"})
    assert both.stdout.strip() == "llama3.2:3b" and "ignored, since MODEL_NAME is set" in both.stderr
