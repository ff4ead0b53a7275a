"""A pytest plugin that adds tools the way an engineer would, for tests/unit/agent_tools/test_adding_a_tool.py.

EXTRA_TOOLS_DIR: a directory of tool modules, read as if they were in agent_tools/tools/.
EXTRA_TOOLS_POLICY: a policy file read as the shipped contract/src/agent_contract/policy.yaml.
Nothing else changes: whatever the tests then check comes from the registry and the policy.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def pytest_configure(config: pytest.Config) -> None:
    import agent_contract.policy
    import agent_tools.tools

    agent_tools.tools.__path__.append(os.environ["EXTRA_TOOLS_DIR"])
    policy = Path(os.environ["EXTRA_TOOLS_POLICY"])
    agent_contract.policy.shipped_policy_text = lambda: policy.read_text(encoding="utf-8")


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    from agent_tools.tools import discover

    terminalreporter.write_line("registered tools: " + " ".join(spec.name for spec in discover()))
