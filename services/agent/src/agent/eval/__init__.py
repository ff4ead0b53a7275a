"""agent-eval: the tool-selection benchmark — ask a question set, record the tools called, score, compare runs.

Modules: `questions` (the YAML set and argument matchers), `runner` (talks to the agent over HTTP),
`scoring` (verdicts and scores), `compare` (two runs question by question), `report` (Markdown), `cli`.
"""

from __future__ import annotations

FORMAT = "agent-eval/1"
NO_TOOL = "(none)"
