"""A front-end's signed end user: the token Open WebUI sends with FORWARD_USER_INFO_HEADER_JWT_SECRET set.

With FRONTEND_JWT_SECRET (or _FILE) set, a front-end key no longer names users by plain headers: the user comes
from an HS256 token in FRONTEND_JWT_HEADER (Open WebUI: `X-OpenWebUI-User-Jwt`, claims sub, email, name, role,
iss "open-webui", iat, exp), signed with the secret both sides share. The key alone then names nobody: whoever
reads it (Open WebUI shows its connection keys to its own admins) cannot speak for an analyst without also
holding the secret. A token that is missing, expired, badly signed or from another issuer is a 401 saying
which. The token's own `role` claim is never read: the operator's policy decides.
"""

from __future__ import annotations

import time

import jwt
from fastapi import Request

from agent.errors import Unauthorized
from agent.security.names import checked
from agent.settings import Settings

ISSUER = "open-webui"
ALGORITHMS = ["HS256"]  # the one Open WebUI signs with; "none" and public-key algorithms are never accepted
LEEWAY_SECONDS = 10  # clock skew between the front-end's host and ours
REQUIRED = ["exp", "iat", "iss"]
MIN_SECRET_CHARS = 32  # HS256 wants a key of at least its hash's size (RFC 7518 3.2); secrets-init makes 43


class SignedUsers:
    """Verifies a front-end's user tokens against the shared secret, re-read when its file changes."""

    def __init__(self, settings: Settings) -> None:
        self.secret = settings.frontend_jwt_source()
        self.header = settings.frontend_jwt_header
        self.max_age = settings.frontend_jwt_max_age_seconds
        secret = self.secret.get()
        if secret is not None and len(secret) < MIN_SECRET_CHARS:
            raise ValueError(f"FRONTEND_JWT_SECRET must be at least {MIN_SECRET_CHARS} characters (HS256)")

    @property
    def enabled(self) -> bool:
        return self.secret.get() is not None

    def end_user(self, request: Request) -> str | None:
        """The user a valid token names (its e-mail, else its subject); None when the request carries no token."""
        values = request.headers.getlist(self.header)
        if len(values) > 1:
            raise Unauthorized(
                f"The {self.header} header came {len(values)} times: a user token must be sent once.",
                code="repeated_identity_header",
            )
        token = (values[0] if values else "").strip()
        if not token:
            return None
        claims = self._claims(token)
        for claim in ("email", "sub"):
            value = claims.get(claim)
            if isinstance(value, str) and value:
                return checked(value, f"the front-end's signed token ({claim})")
        raise Unauthorized(f"The front-end's user token ({self.header}) names no user (no email, no sub).", code=_CODE)

    def missing(self) -> Unauthorized:
        return Unauthorized(
            f"Missing the signed user token ({self.header}): this front-end key names its users only through it. "
            "Set Open WebUI's FORWARD_USER_INFO_HEADER_JWT_SECRET to the agent's FRONTEND_JWT_SECRET.",
            code="missing_user_token",
        )

    def _claims(self, token: str) -> dict[str, object]:
        secret = self.secret.get() or ""
        try:
            claims: dict[str, object] = jwt.decode(
                token,
                secret,
                algorithms=ALGORITHMS,
                issuer=ISSUER,
                leeway=LEEWAY_SECONDS,
                options={"require": REQUIRED},
            )
        except jwt.ExpiredSignatureError as exc:
            raise Unauthorized(
                f"The front-end's user token ({self.header}) has expired: check both hosts' clocks.",
                code="expired_user_token",
            ) from exc
        except jwt.InvalidSignatureError as exc:
            raise Unauthorized(
                f"The front-end's user token ({self.header}) has a bad signature: the front-end signs with another "
                "secret than FRONTEND_JWT_SECRET.",
                code="bad_user_token_signature",
            ) from exc
        except jwt.InvalidIssuerError as exc:
            raise Unauthorized(
                f"The front-end's user token ({self.header}) has the wrong issuer: expected {ISSUER!r}.",
                code="wrong_user_token_issuer",
            ) from exc
        except jwt.InvalidTokenError as exc:  # malformed, another algorithm, a claim missing, issued in the future
            raise Unauthorized(f"The front-end's user token ({self.header}) is invalid: {exc}.", code=_CODE) from exc
        self._fresh(claims)
        return claims

    def _fresh(self, claims: dict[str, object]) -> None:
        """A signed token is good for FRONTEND_JWT_MAX_AGE_SECONDS from when it was issued, whatever its `exp`
        says: a token minted to last (or leaked) is not a key."""
        iat, exp = claims.get("iat"), claims.get("exp")
        if not isinstance(iat, int | float) or not isinstance(exp, int | float):
            raise Unauthorized(f"The front-end's user token ({self.header}) has a non-numeric iat or exp.", code=_CODE)
        allowed = self.max_age + LEEWAY_SECONDS
        if exp - iat > allowed:
            raise Unauthorized(
                f"The front-end's user token ({self.header}) is valid for {exp - iat:.0f} s, longer than "
                f"FRONTEND_JWT_MAX_AGE_SECONDS={self.max_age} (+{LEEWAY_SECONDS} s leeway): refused.",
                code="user_token_lifetime_too_long",
            )
        if time.time() - iat > allowed:
            raise Unauthorized(
                f"The front-end's user token ({self.header}) was issued {time.time() - iat:.0f} s ago, more than "
                f"FRONTEND_JWT_MAX_AGE_SECONDS={self.max_age} (+{LEEWAY_SECONDS} s leeway): refused as stale.",
                code="stale_user_token",
            )


_CODE = "invalid_user_token"
