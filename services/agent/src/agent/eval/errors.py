"""agent-eval's errors: one base class, each carrying what the operator needs to fix the problem.

EvalError
├── QuestionSetError   the YAML set is malformed (file, question id, what is wrong)
├── AgentUnreachable   the agent did not answer the run's first requests (url, why)
└── RunFileError       a run JSON could not be read for `compare` / `report` (path, why)
"""

from __future__ import annotations


class EvalError(Exception):
    """Base class: the CLI prints the message and exits with status 2."""


class QuestionSetError(EvalError):
    def __init__(self, source: str, where: str, problem: str) -> None:
        self.source, self.where, self.problem = source, where, problem
        super().__init__(f"{source}: {where}: {problem}")


class AgentUnreachable(EvalError):
    def __init__(self, url: str, why: str) -> None:
        self.url, self.why = url, why
        super().__init__(f"cannot reach the agent at {url} ({why}); is agent-api running, and is --base-url right?")


class RunFileError(EvalError):
    def __init__(self, path: str, why: str) -> None:
        self.path, self.why = path, why
        super().__init__(f"{path}: {why}")
