"""What a request must look like before any work is done for it: a JSON body on POST, and, when the SSO
proxy's session identifies the user (trusted_header), a browser `Origin` the operator listed.

Why: a page on any intranet site can make a signed-in user's browser POST a form, `text/plain` or multipart
body with their SSO session attached, without a CORS preflight. Only `application/json` (or `…+json`) needs
a preflight, which this API never grants; so a body of any other type, and an `Origin` not in
ALLOWED_ORIGINS, is refused before the body is read. Non-browser clients send no `Origin`.
"""

from __future__ import annotations

from starlette.datastructures import Headers

from agent.errors import Forbidden, UnsupportedMediaType

JSON = "application/json"


def is_json(content_type: str) -> bool:
    """`application/json` or `application/<anything>+json`, any parameters (`; charset=utf-8`), any case."""
    media = content_type.split(";", 1)[0].strip().lower()
    return media == JSON or (media.startswith("application/") and media.endswith("+json"))


def has_body(headers: Headers) -> bool:
    length = headers.get("content-length")
    return "transfer-encoding" in headers or (length is not None and length.strip() not in ("", "0"))


def check_body_type(method: str, headers: Headers) -> None:
    """415 for a POST whose body is not declared JSON (a missing type with a body included)."""
    if method != "POST":
        return
    content_type = headers.get("content-type")
    if content_type is None and not has_body(headers):
        return  # nothing to read: the route's own 400 says the body is empty
    if content_type is None or not is_json(content_type):
        raise UnsupportedMediaType(
            f"Content-Type {content_type or '(none)'} is not accepted: send the body as JSON with "
            "`Content-Type: application/json`."
        )


def parse_origins(value: str) -> frozenset[str]:
    """ALLOWED_ORIGINS: comma-separated `scheme://host[:port]`, compared exactly (case of the host ignored)."""
    return frozenset(o.strip().rstrip("/").lower() for o in value.split(",") if o.strip())


def check_origin(headers: Headers, allowed: frozenset[str]) -> None:
    """403 for a browser request (it carries `Origin`) from a site not in ALLOWED_ORIGINS."""
    origin = headers.get("origin")
    if origin is not None and origin.strip().rstrip("/").lower() not in allowed:
        raise Forbidden(
            f"Requests from the web page at {origin[:200]!r} are not accepted: that site is not in ALLOWED_ORIGINS. "
            "Use the chat front-end the operator set up, or a client that is not a browser."
        )
