"""The agent's errors: one base class, a shallow tree, each carrying what an operator needs to act.

AgentError
├── BadRequest            400  malformed body, wrong roles, invalid arguments
├── Unauthorized          401
├── Forbidden             403
├── ModelNotFound         404  a model the agent does not serve, or Ollama has not pulled
├── PayloadTooLarge       413
├── QueueFull             429  with Retry-After
├── DependencyDown        503  Ollama, Redis, MCP server or the worker is unreachable
│   └── QueueTimeout      503  a round waited past the queue timeout
├── UpstreamTimeout       504  a round or the model took too long
└── UpstreamError         502  Ollama answered with an error we cannot map
"""

from __future__ import annotations


class AgentError(Exception):
    status = 500
    type = "api_error"
    code: str | None = None

    def __init__(
        self, message: str, *, param: str | None = None, code: str | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        self.retry_after = retry_after

    def body(self) -> dict[str, object]:
        """The OpenAI error shape: all four keys present, param/code nullable."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class BadRequest(AgentError):
    status = 400
    type = "invalid_request_error"


class Unauthorized(AgentError):
    status = 401
    type = "authentication_error"
    code = "invalid_api_key"


class Forbidden(AgentError):
    status = 403
    type = "permission_error"


class ModelNotFound(AgentError):
    status = 404
    type = "invalid_request_error"
    code = "model_not_found"


class PayloadTooLarge(AgentError):
    status = 413
    type = "invalid_request_error"
    code = "payload_too_large"


class QueueFull(AgentError):
    status = 429
    type = "rate_limit_error"
    code = "queue_full"


class DependencyDown(AgentError):
    status = 503
    type = "service_unavailable"
    code = "dependency_unavailable"


class QueueTimeout(DependencyDown):
    code = "queue_timeout"


class UpstreamTimeout(AgentError):
    status = 504
    type = "timeout_error"
    code = "timeout"


class UpstreamError(AgentError):
    status = 502
    type = "api_error"
    code = "upstream_error"
