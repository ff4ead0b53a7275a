"""What one checkout's e2e run names: its image tags and its compose project, derived from the checkout.

The suffix is a hash of the checkout's absolute path, computed at run time and never written into the repo:
one checkout gets the same names on every run (its images are reused, a stack it left behind is found
again), two checkouts on one host get different ones (neither overwrites the other's images or stack).
`python -m tests.e2e.names` prints them as `NAME=value` lines.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def checkout_tag(repo: Path = REPO) -> str:
    """`e2e-` and 12 hex digits of the checkout's absolute path."""
    return "e2e-" + hashlib.sha256(str(repo.resolve()).encode()).hexdigest()[:12]


def image_env(tag: str) -> dict[str, str]:
    """The compose variables that name every image the e2e files build (docker-compose.yml, compose.e2e.yml)."""
    return {
        "AGENT_IMAGE": f"local-agent/agent:{tag}",
        "MCP_IMAGE": f"local-agent/mcp-server:{tag}",
        "STANDIN_TAG": tag,  # the scripted Ollama, Redis and Prometheus stand-ins of compose.e2e.yml
    }


def checkout_env(repo: Path = REPO) -> dict[str, str]:
    """Image variables and the compose project of this checkout's e2e stack."""
    tag = checkout_tag(repo)
    return {"COMPOSE_PROJECT_NAME": f"la-{tag}", **image_env(tag)}


if __name__ == "__main__":
    print("".join(f"{name}={value}\n" for name, value in checkout_env().items()), end="")
