"""The agent's errors: one base class, a shallow tree, each carrying what an operator needs to act.

AgentError
├── BadRequest            400  malformed body, wrong roles, invalid arguments
├── Unauthorized          401
├── Forbidden             403  a browser page of a site not in ALLOWED_ORIGINS (trusted_header)
├── ModelNotFound         404  a model the agent does not serve, or Ollama has not pulled
├── PayloadTooLarge       413
├── UnsupportedMediaType  415  a POST body that is not JSON (a form or text a foreign page can send)
├── QueueFull             429  the GPU queue is full; with Retry-After
│   └── TaskRefused       429  a front-end's background task not queued while users wait
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
    # What a client reads for a server-side failure: `message` names internal addresses and commands,
    # which belong in the logs and /readyz, not in a chat window. None: `message` is for the client.
    public: str | None = (
        "The agent failed while answering. Try again; if it keeps happening, tell the operator (agent logs)."
    )

    def __init__(
        self, message: str, *, param: str | None = None, code: str | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        if code is not None:
            self.code = code
        self.retry_after = retry_after

    @property
    def client_message(self) -> str:
        return self.public or self.message

    def body(self) -> dict[str, object]:
        """The OpenAI error shape: all four keys present, param/code nullable."""
        return {"error": {"message": self.client_message, "type": self.type, "param": self.param, "code": self.code}}


class BadRequest(AgentError):
    status = 400
    type = "invalid_request_error"
    public: str | None = None


class Unauthorized(AgentError):
    status = 401
    type = "authentication_error"
    code = "invalid_api_key"
    public: str | None = None


class Forbidden(AgentError):
    status = 403
    type = "permission_error"
    code = "origin_not_allowed"
    public: str | None = None


class ModelNotFound(AgentError):
    status = 404
    type = "invalid_request_error"
    code = "model_not_found"
    public: str | None = None


class PayloadTooLarge(AgentError):
    status = 413
    type = "invalid_request_error"
    code = "payload_too_large"
    public: str | None = None


class UnsupportedMediaType(AgentError):
    status = 415
    type = "invalid_request_error"
    code = "unsupported_media_type"
    public: str | None = None


class QueueFull(AgentError):
    status = 429
    type = "rate_limit_error"
    code = "queue_full"
    public: str | None = None


class UserShareFull(QueueFull):
    code = "user_rounds_limit"


class TaskRefused(QueueFull):
    code = "client_task_refused"


class DependencyDown(AgentError):
    status = 503
    type = "service_unavailable"
    code = "dependency_unavailable"
    public = (
        "The model service is unavailable right now. Try again in a minute; if it keeps happening, "
        "tell the operator (details in the agent logs and /readyz)."
    )


class QueueTimeout(DependencyDown):
    code = "queue_timeout"
    public = "The GPU is busy: your question waited too long for its turn. Try again in a minute."


class UpstreamTimeout(AgentError):
    status = 504
    type = "timeout_error"
    code = "timeout"
    public = "The model took too long to answer. Try again, or ask a shorter question."


class UpstreamError(AgentError):
    status = 502
    type = "api_error"
    code = "upstream_error"
    public = "The model failed while answering. Try again; if it keeps happening, tell the operator (agent logs)."
