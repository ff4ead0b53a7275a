"""tests.e2e.names: two checkouts on one host get different image tags and compose projects; one checkout
always gets the same, computed where it runs and never written into the repo."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.e2e.names import REPO, checkout_env


def names_printed_in(checkout: Path) -> dict[str, str]:
    """What `python -m tests.e2e.names` prints when run from inside `checkout`."""
    out = subprocess.run(
        [sys.executable, "-m", "tests.e2e.names"], cwd=checkout, capture_output=True, text=True, check=True
    ).stdout
    return dict(line.split("=", 1) for line in out.splitlines())


def checkout(into: Path) -> Path:
    """A checkout as far as the names module can tell: the module at its place in the tree, nothing else."""
    for package in ("tests", "tests/e2e"):
        (into / package).mkdir(parents=True)
        (into / package / "__init__.py").touch()
    (into / "tests/e2e/names.py").write_bytes((REPO / "tests/e2e/names.py").read_bytes())
    return into


def files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts)


def test_two_checkouts_name_every_image_and_their_project_apart(tmp_path: Path) -> None:
    first, second = checkout(tmp_path / "a" / "local-agent"), checkout(tmp_path / "b" / "local-agent")
    a, b = names_printed_in(first), names_printed_in(second)
    assert a.keys() == b.keys() == {"COMPOSE_PROJECT_NAME", "AGENT_IMAGE", "MCP_IMAGE", "STANDIN_TAG"}
    for name in a:
        assert a[name] != b[name], name  # not one image, not the project: nothing the two runs share
    assert a != checkout_env() and b != checkout_env()


def test_one_checkout_gets_the_same_names_every_time_and_the_repo_stays_untouched(tmp_path: Path) -> None:
    root = checkout(tmp_path / "local-agent")
    before = files(root)
    assert names_printed_in(root) == names_printed_in(root) == checkout_env(root)
    assert files(root) == before


def test_the_names_are_valid_docker_references() -> None:
    env = checkout_env()
    assert env["COMPOSE_PROJECT_NAME"].startswith("la-e2e-") and env["COMPOSE_PROJECT_NAME"].islower()
    for name in ("AGENT_IMAGE", "MCP_IMAGE"):
        repository, tag = env[name].split(":")
        assert repository.startswith("local-agent/") and tag == env["STANDIN_TAG"]
    assert len(env["STANDIN_TAG"]) <= 128 and env["STANDIN_TAG"].replace("-", "").isalnum()
