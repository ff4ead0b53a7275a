"""agent-eval's errors: one base class, each carrying what the operator needs to fix the problem.

EvalError
├── QuestionSetError   the YAML set is malformed (file, question id, what is wrong)
├── AgentUnreachable   the agent did not answer the run's first requests (url, why)
├── AgentRefused       the agent answered 401/403: no key, or a key it does not accept
├── AllRequestsFailed  every question of a run failed: the stack is broken, not the model
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


class AgentRefused(EvalError):
    def __init__(self, url: str, status: int, message: str) -> None:
        self.url, self.status = url, status
        super().__init__(
            f"the agent at {url} refused the request (HTTP {status}: {message}); "
            "pass a valid key with --api-key or AGENT_EVAL_API_KEY (agent-admin keys add NAME --role admin)"
        )


class AllRequestsFailed(EvalError):
    def __init__(self, model: str, total: int, first_error: str, results: str) -> None:
        super().__init__(
            f"every one of the {total} requests to {model} failed, first: {first_error} "
            f"(results kept in {results}; this is the stack failing, not the model)"
        )
