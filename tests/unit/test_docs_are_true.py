"""The docs say only what is there: every message troubleshooting.md quotes is one the code can produce, and
every repository path the docs (and the README) cite exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.support.doc_quotes import REPO, could_produce, pieces, quoted_messages, templates

# Messages of other programs that troubleshooting.md quotes on purpose (they are what the user sees).
FOREIGN_MESSAGES = {"read-only file system"}  # Ollama's own error, writing outside its volume
TOP_DIRS = ("services/", "tests/", "scripts/", "docs/", "images/", "infra/", "evals/", "mcp-server/", "contract/",
            "ollama/", ".ci/", "licenses/")  # fmt: skip
ROOT_FILE = re.compile(r"(docker-)?compose[\w.-]*\.yml|\.env\.example|Makefile|pyproject\.toml|uv\.lock")
# Paths the docs name that are not in the repository by design.
NOT_IN_REPO = {
    "images/images.tar.zst",  # inside the air-gap bundle
    "ollama/ollama",  # the Ollama image's name
    "compose.gpu2.yml",  # the copy the operator makes for a third GPU
    "infra/prometheus/worker-hosts/gpu-host-2.yml",  # the file the operator writes per GPU host
}
DOCS = [*sorted((REPO / "docs").glob("*.md")), REPO / "README.md"]


def test_every_message_troubleshooting_quotes_is_one_the_code_can_produce() -> None:
    known = list(templates())
    quotes = quoted_messages((REPO / "docs/troubleshooting.md").read_text(encoding="utf-8"))
    assert len(quotes) > 10  # the check reads the tables at all
    unknown = [
        q
        for q in quotes
        if q not in FOREIGN_MESSAGES and not all(any(could_produce(p, t) for t in known) for p in pieces(q))
    ]
    assert unknown == [], "quoted in docs/troubleshooting.md but produced nowhere in the code"


def test_the_quote_check_fails_on_a_message_the_code_never_says() -> None:
    known = list(templates())
    assert not any(could_produce("Ollama ate the model", t) for t in known)
    assert any(could_produce("model qwen3:4b missing at http://x", t) for t in known)  # placeholders filled


def cited_paths(doc: Path) -> set[str]:
    text = doc.read_text(encoding="utf-8")
    cited = set()
    for match in re.finditer(r"`([^`\s]+)`", text):
        token = match.group(1).rstrip(".,:;")
        if ":" in token or any(c in token for c in "*<>{}$…"):  # image references, patterns, placeholders
            continue
        if token.startswith(TOP_DIRS) or ROOT_FILE.fullmatch(token):
            cited.add(token)
    for match in re.finditer(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", text):
        if "://" not in match.group(1):
            cited.add(str((doc.parent / match.group(1)).resolve().relative_to(REPO)))
    return cited


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_path_the_docs_cite_exists(doc: Path) -> None:
    missing = sorted(p for p in cited_paths(doc) - NOT_IN_REPO if not (REPO / p.split("::")[0]).exists())
    assert missing == []


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_docker_compose_ps_always_shows_the_finished_one_shots(doc: Path) -> None:
    """Plain `docker compose ps` hides exited containers: the one-shot services (and a crashed service) vanish."""
    text = doc.read_text(encoding="utf-8")
    assert re.findall(r"docker compose ps(?! -a)\b", text) == []
