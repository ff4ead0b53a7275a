"""`scripts/try down` removes the project `scripts/try` started: TRY_PROJECT when set, else the one this checkout
started last (a stack started under another name is never left running). Docker is a recording stand-in here."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def checkout(tmp: Path) -> Path:
    """A copy of scripts/try in a directory of its own, with a `docker` that records its arguments."""
    (tmp / "scripts").mkdir()
    shutil.copy(REPO / "scripts/try", tmp / "scripts/try")
    (tmp / "bin").mkdir()
    docker = tmp / "bin/docker"
    docker.write_text(f'#!/bin/sh\necho "$*" >> {tmp}/docker.log\n')
    docker.chmod(0o755)
    return tmp


def down(tmp: Path, **env: str) -> str:
    path = f"{tmp / 'bin'}:{os.environ['PATH']}"
    subprocess.run([str(tmp / "scripts/try"), "down"], env={"PATH": path, **env}, check=True, capture_output=True)
    return (tmp / "docker.log").read_text()


def test_down_honours_try_project(tmp_path: Path) -> None:
    assert "compose -p mine " in down(checkout(tmp_path), TRY_PROJECT="mine")


def test_down_without_try_project_removes_the_project_last_started_here(tmp_path: Path) -> None:
    root = checkout(tmp_path)
    (root / "build").mkdir()
    (root / "build/try-project").write_text("started-as-other\n")
    assert "compose -p started-as-other " in down(root)
    assert not (root / "build/try-project").exists()
    assert "compose -p local-agent-try " in down(root)  # nothing remembered: the default
