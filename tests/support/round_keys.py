"""A round-signing key pair for the test session: agent-api signs with one half, agent-worker verifies with the other.

The shipped stack reads both from files secrets-init writes (ROUND_SIGNING_KEY_FILE, ROUND_VERIFY_KEY_FILE); the
processes the tests start get the same keys as values (ROUND_SIGNING_KEY, ROUND_VERIFY_KEY), which tests/conftest.py
puts in the environment every test process inherits.
"""

from __future__ import annotations

import base64
import os
from functools import cache

from agent.queue.guard import RoundSigner, RoundVerifier


@cache
def signing_key() -> str:
    return base64.b64encode(os.urandom(32)).decode()  # any 32 random bytes are an Ed25519 private key


def signer() -> RoundSigner:
    return RoundSigner(signing_key())


def verify_key() -> str:
    return signer().verify_key()


def verifier(max_age: float = 600) -> RoundVerifier:
    return RoundVerifier(verify_key(), max_age)


def env() -> dict[str, str]:
    return {"ROUND_SIGNING_KEY": signing_key(), "ROUND_VERIFY_KEY": verify_key()}
