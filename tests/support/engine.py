"""The real engine for tests: llama.cpp's llama-server, started as users start it (`scripts/llama-server serve`).

`built()` says whether scripts/llama-server has built it (it never builds here: a cold build takes minutes);
without it a test skips, except under REQUIRE_E2E=1 (CI), where it fails. `Engine.failure_note()` is the
engine's own last log lines and exit status: tests/integration/conftest.py adds it to every failure of a test
that uses an engine, so a crash at load (the AMX repack SIGSEGV) or mid-answer is seen, not only a timeout.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass

import httpx
import pytest

from tests.support.procs import REPO, Proc

MODEL = "smollm2:135m"  # the alias scripts/llama-server serves SmolLM2 as (LLAMA_MODEL=smollm2)
TAIL = 40


def built(model: str = "smollm2") -> None:
    """Skip (or, under REQUIRE_E2E=1, fail) when scripts/llama-server has not built the engine or fetched `model`."""
    cmd = [str(REPO / "scripts/llama-server"), "--model", model, "--check"]
    found = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if found.returncode != 0:
        why = f"llama-server or {model} is not there: run scripts/llama-server --model {model} (.ci/run does)"
        if os.environ.get("REQUIRE_E2E") == "1":
            pytest.fail(why)
        pytest.skip(why)


@dataclass
class Engine:
    url: str
    proc: Proc

    def failure_note(self) -> str:
        code = self.proc.popen.poll()
        state = "still running" if code is None else f"exited with status {code}"
        lines = self.proc.output().splitlines()[-TAIL:]
        return f"llama-server ({state}), its last {len(lines)} log lines:\n" + "\n".join(lines)

    def predicted_tokens(self) -> float:
        """Tokens the engine generated since it started (its own Prometheus counter, --metrics)."""
        text = httpx.get(f"{self.url}/metrics", timeout=10).text
        found = re.search(r"^llamacpp:tokens_predicted_total (\S+)$", text, re.M)
        assert found is not None, text[:500]
        return float(found.group(1))
