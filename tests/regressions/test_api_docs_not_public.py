"""Regression (issue 11, item 7): /docs, /redoc and /openapi.json answered without a key, and /docs pulled
its scripts from a public CDN. Now the schema needs a key, the HTML pages are not served at all, and the
schema documents the real bodies of both chat routes (unknown fields allowed)."""

from __future__ import annotations

import httpx
import pytest

from tests.integration.test_auth_api import Stack, stack

pytestmark = pytest.mark.integration
__all__ = ["stack"]


def test_docs_pages_are_not_served_and_the_schema_needs_a_key(stack: Stack) -> None:
    key = {"Authorization": f"Bearer {stack.keys['guest']}"}
    for path in ("/docs", "/redoc", "/docs/oauth2-redirect"):
        assert httpx.get(stack.url + path, timeout=10).status_code in (401, 404)
        resp = httpx.get(stack.url + path, headers=key, timeout=10)
        assert resp.status_code == 404 and "cdn" not in resp.text.lower()
    assert httpx.get(f"{stack.url}/openapi.json", timeout=10).status_code == 401
    assert httpx.get(f"{stack.url}/openapi.json", headers=key, timeout=10).status_code == 200


def test_the_schema_documents_both_chat_bodies_permissively(stack: Stack) -> None:
    key = {"Authorization": f"Bearer {stack.keys['guest']}"}
    schema = httpx.get(f"{stack.url}/openapi.json", headers=key, timeout=10).json()
    components = schema["components"]["schemas"]
    for path, name in (("/v1/chat/completions", "ChatCompletionRequest"), ("/api/chat", "OllamaChatRequest")):
        body = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]["schema"]
        assert body == {"$ref": f"#/components/schemas/{name}"}
        model = components[name]
        assert model["additionalProperties"] is True and {"model", "messages"} <= set(model["required"])
    assert components["ChatMessage"]["additionalProperties"] is True
