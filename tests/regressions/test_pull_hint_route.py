"""The "model missing" fix named `docker compose exec ollama ollama pull`, which cannot work: the serving
`ollama` sits on an internal network. The fix must name the ollama-pull service (and plain `ollama pull`)."""

from __future__ import annotations

from agent.backends.ollama import pull_hint


def test_the_model_missing_fix_uses_the_ollama_pull_service() -> None:
    hint = pull_hint("qwen3:4b")
    assert "OLLAMA_PULL_MODELS=qwen3:4b docker compose run --rm ollama-pull" in hint
    assert "ollama pull qwen3:4b" in hint
    assert "exec ollama" not in hint
