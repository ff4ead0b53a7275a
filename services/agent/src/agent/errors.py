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
    └── RoundIntruded     502  a round's answer came from more than one worker host: withheld
"""

from __future__ import annotations

import re
from typing import Literal

Language = Literal["en", "tr"]
# Letters English never uses, and frequent Turkish words written without them ("kac", "mi"): a small,
# deterministic guess of the question's language for the chat user's error text.
_TURKISH_LETTERS = re.compile("[çğıöşüÇĞİÖŞÜ]")
# (words with a Turkish-only letter are caught by the letters; these are the ASCII spellings)
_TURKISH_WORDS = frozenset(
    {"kac", "ne", "nedir", "neden", "nasil", "mi", "mu", "var", "yok", "bugun", "dun", "hangi", "kim", "hesap"}
    | {"hesaplar", "cekim", "yatirim", "onay", "bekliyor", "saat", "lutfen", "ve", "ile", "icin", "bu", "kac"}
)


def guess_language(text: str) -> Language:
    """Turkish ("tr") for a question (a Turkish-only letter, or two common Turkish words), else "en"."""
    if _TURKISH_LETTERS.search(text):
        return "tr"
    words = re.findall(r"[a-z]+", text.lower())
    return "tr" if sum(w in _TURKISH_WORDS for w in words) >= 2 else "en"


class AgentError(Exception):
    status = 500
    type = "api_error"
    code: str | None = None
    # What a client reads for a server-side failure: `message` names internal addresses and commands,
    # which belong in the logs and /readyz, not in a chat window. None: `message` is for the client.
    public: str | None = "The agent failed while answering. Try again; if it keeps happening, tell the operator."
    # The same text for a Turkish question; None: `public` (or `message`) in every language.
    public_tr: str | None = "Ajan yanıtlarken bir hata oluştu. Yeniden deneyin; sürerse operatöre haber verin."

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

    def client_message_in(self, language: Language) -> str:
        """The chat user's text in the question's language (English where no translation exists)."""
        # A text set on this error alone (e.g. the tools' outage) is not what the class's translation says.
        own = "public" not in vars(self) or "public_tr" in vars(self)
        return self.public_tr if language == "tr" and own and self.public_tr and self.public else self.client_message

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
    # What to do, for the analyst; the operator's part (agent logs, /readyz) is in the logged `message`.
    public = (
        "The model service is unavailable right now. Try again in a minute; if it keeps happening, tell the operator."
    )
    public_tr = "Model hizmetine şu an ulaşılamıyor. Bir dakika sonra yeniden deneyin; sürerse operatöre haber verin."


class QueueTimeout(DependencyDown):
    code = "queue_timeout"
    public = "The GPU is busy: your question waited too long for its turn. Try again in a minute."
    public_tr = "GPU meşgul: sorunuz sırasını çok uzun bekledi. Bir dakika sonra yeniden deneyin."


class UpstreamTimeout(AgentError):
    status = 504
    type = "timeout_error"
    code = "timeout"
    public = "The model took too long to answer. Try again, or ask a shorter question."
    public_tr = "Model yanıt vermekte çok gecikti. Yeniden deneyin ya da daha kısa bir soru sorun."


class UpstreamError(AgentError):
    status = 502
    type = "api_error"
    code = "upstream_error"
    public = "The model failed while answering. Try again; if it keeps happening, tell the operator."
    public_tr = "Model yanıtlarken bir hata oluştu. Yeniden deneyin; sürerse operatöre haber verin."


class RoundIntruded(UpstreamError):
    """More than one worker host wrote a round (a stolen worker credential answering a round another host runs): the
    round fails closed, its text is never shown, and the log and audit name every host involved."""

    code = "round_intruded"
    public = "The answer could not be verified and was withheld. Try again, and tell the operator."
    public_tr = "Yanıt doğrulanamadığı için gösterilmedi. Yeniden deneyin ve operatöre haber verin."
