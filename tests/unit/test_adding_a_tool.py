"""Adding a tool is its function plus its policy lines: with a throwaway tool added that way, the tool-server
and policy tests still pass, unedited (every tool list and count they check is derived from the registry)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent_contract.policy import shipped_policy_text
from tests.support.procs import REPO

TOOL = '''
from agent_tools.tools import tool


@tool()
def bonus_ozeti() -> dict[str, int]:
    """Returns the bonuses granted today: their count.

    WHEN TO USE: questions about bonuses ("how many bonuses today", "bugün kaç bonus verildi").
    ALWAYS call this tool for bonus questions.

    Example: "Bugün kaç bonus verildi?"

    WHEN NOT TO USE: deposits -> depozit_ozeti.
    """
    return {"count": 0}
'''
# The derived checks: the registry's names, the policy's known tools, the server's listing and /healthz count.
CHECKED = ["tests/unit/agent_tools", "tests/unit/agent_contract"]


@pytest.mark.timeout(600)  # a second pytest run of two unit folders
def test_a_new_tool_needs_its_function_and_its_policy_lines_only(tmp_path: Path) -> None:
    (tmp_path / "tools").mkdir()
    (tmp_path / "tools" / "bonuses.py").write_text(TOOL)
    policy = shipped_policy_text().replace("    - kyc_ozeti\n", "    - kyc_ozeti\n    - bonus_ozeti\n")
    assert policy.count("bonus_ozeti") == 2  # one line for support, one for operations
    (tmp_path / "policy.yaml").write_text(policy)
    env = {
        **os.environ,
        "EXTRA_TOOLS_DIR": str(tmp_path / "tools"),
        "EXTRA_TOOLS_POLICY": str(tmp_path / "policy.yaml"),
        "PYTHONPATH": str(REPO),
    }
    # Its own --basetemp: a second pytest on the shared /tmp/pytest-of-<user> root prunes the numbered dirs of any
    # other run on the machine at its end, and a directory another run is still filling fails it (seen with two
    # `make test` in parallel: "(rm_rf) error removing … garbage-…", a warning this suite turns into an error).
    inner = ["-p", "tests.support.extra_tool", "-p", "no:cacheprovider", "--basetemp", str(tmp_path / "inner")]
    cmd = [sys.executable, "-m", "pytest", "-q", *inner, *CHECKED]
    run = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert " bonus_ozeti" in run.stdout.split("registered tools:")[1]  # the checks ran with the new tool
