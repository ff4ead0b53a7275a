"""scripts/airgap-bundle ships the Apache-2.0 licence text with the Qwen2.5-Coder weights (their GGUFs and the parts
packages carry none), and only with them; `--licenses` lists what would ride along without building anything (the
whole bundle, Docker images included, is built in tests/e2e/test_airgap.py)."""

from __future__ import annotations

import os
import subprocess

import pytest

from tests.support.procs import REPO


def licences(models: str) -> list[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("MODEL_NAME", "EXTRA_MODELS", "OLLAMA_MODEL")}
    cmd = [str(REPO / "scripts/airgap-bundle"), "--models", models, "--licenses"]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, check=True, timeout=30).stdout.split()


@pytest.mark.parametrize("models", ["qwen2.5-coder:1.5b", "qwen3:4b,qwen2.5-coder:0.5b qwen2.5-coder:1.5b-instruct"])
def test_the_qwen_coder_weights_ship_with_their_licence_text(models: str) -> None:
    assert licences(models) == ["licenses/Qwen2.5-Coder-LICENSE"]
    text = (REPO / "licenses/Qwen2.5-Coder-LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "Alibaba Cloud" in text
    assert "4. Redistribution." in text  # the whole licence, not a pointer to it


def test_a_bundle_without_those_weights_ships_no_licence_file_for_them() -> None:
    assert licences("qwen3:4b qwen2.5:3b") == []
