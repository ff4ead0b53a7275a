"""THINK_HOLDBACK_MODELS: which models keep the strict hold (reasoning may come untagged), as shipped."""

import pytest

from agent.settings import Settings

SHIPPED = Settings(think_holdback_models=Settings.model_fields["think_holdback_models"].default)


@pytest.mark.parametrize(
    "model",
    ["qwen3:4b", "qwen3:4b-q4_K_M", "qwen3:30b", "qwen3:30b-a3b", "qwen3:235b", "qwen3:4b-thinking-2507-q4_K_M",
     "qwen3-vl:8b-thinking", "deepseek-r1:8b", "qwq:32b", "qwq"],
)  # fmt: skip
def test_models_whose_template_opens_the_think_block_are_held(model: str) -> None:
    assert SHIPPED.holds_back_think(model)


@pytest.mark.parametrize(
    "model", ["qwen3:8b", "qwen3", "qwen3:1.7b", "qwen3:14b", "qwen3:4b-instruct-2507-q4_K_M", "qwen2.5:3b", "llama3.2"]
)
def test_models_that_open_it_themselves_or_never_think_stream(model: str) -> None:
    assert not SHIPPED.holds_back_think(model)


def test_entries_are_prefixes_globs_and_exclusions() -> None:
    settings = Settings(think_holdback_models=" qwen3 , *-r1:*, !qwen3:0.6b* ")
    assert settings.holds_back_think("qwen3:8b")  # a bare entry is a prefix, as the setting always was
    assert settings.holds_back_think("deepseek-r1:8b")
    assert not settings.holds_back_think("qwen3:0.6b")  # `!` wins
    assert not settings.holds_back_think("llama3.2")
    assert not Settings(think_holdback_models="").holds_back_think("qwen3:4b")
