"""One request's own state, made once at the API boundary (agent.api.access.context) and passed down as a parameter.

The tool loop, the MCP client and the model backends read the request id and the caller from it, and the queue
backend notes in it the worker hosts that ran the request's rounds, for its audit record. Nothing of a request
travels in context variables between layers; structlog's own contextvars only put `request_id` on log lines.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from agent_contract.headers import Caller

MAX_WORKER_NAME, MAX_WORKERS_NAMED = 200, 16


@dataclass(frozen=True)
class RequestContext:
    """Who asked, under which id, and who ran its rounds. Its fields are set once; `workers` is the one list its
    rounds add to (agent.queue.reader), and the audit record names it."""

    request_id: str = ""
    identity: Caller | None = None  # the authenticated caller: forwarded so the MCP server checks the policy again
    workers: list[str] = field(default_factory=list)  # the worker hosts that ran its rounds, as Redis's ACL names them

    def note_worker(self, worker: str) -> None:
        """Record that `worker` took one of this request's rounds."""
        name = worker[:MAX_WORKER_NAME]  # a host name from the ACL's user list: bounded all the same
        if name not in self.workers and len(self.workers) < MAX_WORKERS_NAMED:
            self.workers.append(name)
