"""What a worker runs: agent-api's signed rounds and nothing else, decided before anything is imported.

RQ imports a job's function from the dotted name in its hash, and any Redis user who may write a job hash (the
`api` user, every `worker-NAME` user) could name `os.system`. So a slot process checks every job it pops before RQ
touches it: the function must be `agent.queue.jobs.run_round`, with no instance, no callback, no webhook, no
dependency, no retry, arguments of the round's shape; and the job must carry agent-api's Ed25519 signature over its
id and its serialized call. Only agent-api holds the signing key (ROUND_SIGNING_KEY_FILE); workers hold the public
key (ROUND_VERIFY_KEY_FILE), so a stolen worker or api Redis password cannot enqueue a round that runs. A signed
round is also refused once older than its queue lifetime, so a captured round cannot be replayed later.
A refused job is logged at error level (`round_refused`), deleted, and the slot process keeps serving.

`python -m agent.queue.guard keygen SIGNING_FILE VERIFY_FILE` writes a new key pair (secrets-init), keeping an
existing one.
"""

from __future__ import annotations

import base64
import binascii
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

JOB_FUNCTION = "agent.queue.jobs.run_round"
META_SIGNATURE = "signature"  # the job's `meta` field that carries agent-api's signature
_DOMAIN = b"local-agent round v1\0"  # a signature made for anything else never verifies as a round


def _message(job_id: str, data: bytes) -> bytes:
    return _DOMAIN + job_id.encode() + b"\0" + data


def _key_bytes(text: str, what: str) -> bytes:
    try:
        raw = base64.b64decode(text.strip(), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"{what} is not base64: {exc}") from exc
    if len(raw) != 32:
        raise ValueError(f"{what} must be 32 bytes in base64 (an Ed25519 key), got {len(raw)}")
    return raw


class RoundSigner:
    """agent-api's half: signs each round's id and serialized call."""

    def __init__(self, private_key: str) -> None:
        self._key = Ed25519PrivateKey.from_private_bytes(_key_bytes(private_key, "ROUND_SIGNING_KEY"))

    def sign(self, job_id: str, data: bytes) -> str:
        return base64.b64encode(self._key.sign(_message(job_id, data))).decode()

    def verify_key(self) -> str:
        raw = self._key.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
        return base64.b64encode(raw).decode()


class RoundVerifier:
    """A worker's half: checks a popped job before RQ imports or runs anything of it."""

    def __init__(self, public_key: str, max_age: float) -> None:
        self._key = Ed25519PublicKey.from_public_bytes(_key_bytes(public_key, "ROUND_VERIFY_KEY"))
        self.max_age = max_age

    def refusal(
        self, job_id: str, data: bytes, call: Sequence[Any], fields: dict[str, Any], meta: dict[str, Any]
    ) -> str | None:
        """Why this job must not run (None: it is one of agent-api's rounds). `data` is the job's serialized call
        (RQ's `job.data`, decompressed) and `call` what it reads as: (function name, instance, args, kwargs), as
        RQ's JSON serializer gives them without importing anything; `fields` is what RQ restored beside it."""
        if len(call) != 4:
            return "malformed call"
        func, instance, args, kwargs = call
        if func != JOB_FUNCTION or instance is not None or kwargs:
            return f"names {func!r}, not the round function"
        extras = [name for name, value in fields.items() if value]
        if extras:
            return f"carries {', '.join(sorted(extras))}"
        signature = meta.get(META_SIGNATURE) if isinstance(meta, dict) else None
        if not isinstance(signature, str):
            return "no agent-api signature"
        try:
            self._key.verify(base64.b64decode(signature, validate=True), _message(job_id, data))
        except (InvalidSignature, binascii.Error, ValueError):
            return "signature does not verify"
        if not (isinstance(args, list | tuple) and len(args) == 3 and isinstance(args[0], dict) and args[2] == job_id):
            return "arguments are not a round's"
        if not isinstance(args[1], int | float) or time.time() - args[1] > self.max_age:
            return "older than a round may wait (a replay?)"
        return None


def keygen(signing_file: Path, verify_file: Path) -> str:
    """Write a new key pair unless `signing_file` holds one; (re)write the verify key from it. Returns how."""
    how = "kept"
    if not (signing_file.exists() and signing_file.read_text().strip()):
        seed = Ed25519PrivateKey.generate().private_bytes_raw()
        tmp = signing_file.with_suffix(".tmp")
        tmp.write_text(base64.b64encode(seed).decode())
        tmp.replace(signing_file)
        how = "generated"
    signer = RoundSigner(signing_file.read_text())
    tmp = verify_file.with_suffix(".tmp")
    tmp.write_text(signer.verify_key())
    tmp.replace(verify_file)
    return how


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] != "keygen":
        sys.exit("usage: python -m agent.queue.guard keygen SIGNING_FILE VERIFY_FILE")
    print(keygen(Path(sys.argv[2]), Path(sys.argv[3])))
