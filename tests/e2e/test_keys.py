"""API keys in compose: keys-init prints the first admin key once; agent-api only reads the keys volume."""

from __future__ import annotations

import httpx
import pytest

from tests.e2e.fake import PLAIN_MODEL, chat_body, script
from tests.e2e.stack import Stack

pytestmark = pytest.mark.e2e

KEYS_DIR = "/var/lib/agent/keys"


def chat_status(stack: Stack, key: str) -> int:
    api = stack.url("agent-api", 8000)
    body = chat_body("hello", model=PLAIN_MODEL)
    reply = httpx.post(f"{api}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=60)
    return reply.status_code


def test_the_bootstrap_key_from_keys_init_logs_opens_the_api(stack: Stack) -> None:
    script(stack, {"default": {"content": "hi"}})
    key = stack.bootstrap_key()
    assert key.startswith("la-"), key
    assert chat_status(stack, key) == 200
    assert chat_status(stack, key[:-4] + "xxxx") == 401
    # A second run finds the key and creates none: the first key is shown once only.
    again = stack.compose("run", "--rm", "-T", "keys-init").stdout
    assert "already holds keys" in again and key not in again


def test_agent_api_mounts_the_keys_volume_read_only(stack: Stack) -> None:
    mounts = {m["Destination"]: m for m in stack.inspect("agent-api")["Mounts"]}
    assert mounts[KEYS_DIR]["RW"] is False
    touch = stack.exec("agent-api", "touch", f"{KEYS_DIR}/forged.yaml", check=False)
    assert touch.returncode != 0 and "Read-only file system" in touch.stderr


def test_a_key_added_through_keys_init_works_without_a_restart(stack: Stack) -> None:
    script(stack, {"default": {"content": "hi"}})
    started = stack.inspect("agent-api")["State"]["StartedAt"]
    key = stack.add_api_key("e2e-guest", "guest")
    assert chat_status(stack, key) == 200
    listing = stack.compose("run", "--rm", "-T", "keys-init", "agent-admin", "keys", "list").stdout
    assert "e2e-guest\tguest" in listing and key not in listing
    assert stack.inspect("agent-api")["State"]["StartedAt"] == started
