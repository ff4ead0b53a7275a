"""The setup scripts read what they need from the machine: the apt mirror from its sources, in both formats."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.e2e.stack import REPO

pytestmark = pytest.mark.e2e


def mirror(apt_etc: Path) -> str:
    out = subprocess.run(
        [str(REPO / "scripts/base-images"), "--mirror"],
        env={"APT_ETC": str(apt_etc), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.strip()


def test_mirror_from_a_one_line_sources_list(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(
        "# deb http://commented.invalid/debian bookworm main\n"
        "deb http://security.invalid/debian-security bookworm-security main\n"
        "deb [arch=amd64 signed-by=/k.gpg] http://mirror.invalid/debian bookworm main contrib\n"
    )
    assert mirror(tmp_path) == "http://mirror.invalid/debian"


def test_mirror_from_deb822_skips_disabled_and_other_suites(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list.d/debian.sources").write_text(
        "Types: deb\nURIs: http://off.invalid/debian\nSuites: bookworm\nComponents: main\nEnabled: no\n\n"
        "Types: deb-src\nURIs: http://src.invalid/debian\nSuites: bookworm\nComponents: main\n\n"
        "Types: deb\nURIs: http://sec.invalid/debian-security\nSuites: bookworm-security\nComponents: main\n\n"
        "Types: deb\n# a comment inside\nURIs: https://on.invalid/debian http://second.invalid/debian\n"
        "Suites: bookworm bookworm-updates\nComponents: main\nSigned-By: /usr/share/keyrings/k.gpg\n"
    )
    assert mirror(tmp_path) == "https://on.invalid/debian"


def test_no_mirror_is_empty(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    assert mirror(tmp_path) == ""
