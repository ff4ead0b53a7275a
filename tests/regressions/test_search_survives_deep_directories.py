"""Regression (issue 11, item 7): `dosya_ara` failed entirely when one directory under FILES_ROOT was nested
~1000 levels deep (the recursive walk ran out of stack and file descriptors). Now the walk stops at a
depth limit, says it did, and still finds everything above it."""

from __future__ import annotations

import os
from pathlib import Path

from agent_tools import safefs


def nest(root: Path, levels: int) -> None:
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY)
    try:
        for _ in range(levels):
            os.mkdir("d", dir_fd=fd)
            child = os.open("d", os.O_RDONLY | os.O_DIRECTORY, dir_fd=fd)
            os.close(fd)
            fd = child
        with open(os.open("deep-report.txt", os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=fd), "w") as f:
            f.write("too deep")
    finally:
        os.close(fd)


def unnest(root: Path) -> None:
    """Remove the chain again without recursion (shutil.rmtree, and so pytest's tmp cleanup, recurse)."""
    depth = 0
    while (root / "/".join(["d"] * (depth + 1))).is_dir():
        depth += 1
    for level in range(depth, 0, -1):
        here = root / "/".join(["d"] * level)
        for child in here.iterdir():
            child.unlink()
        here.rmdir()


def test_a_thousand_levels_deep_directory_does_not_break_the_search(tmp_path: Path) -> None:
    (tmp_path / "report-q3.txt").write_text("q3")
    (tmp_path / "a" / "b").mkdir(parents=True)
    (tmp_path / "a" / "b" / "report-q4.txt").write_text("q4")
    nest(tmp_path, 1000)
    try:
        hits, truncated = safefs.search(tmp_path, "report", limit=50)
    finally:
        unnest(tmp_path)
    assert [h.path for h in hits] == ["a/b/report-q4.txt", "report-q3.txt"]
    assert truncated  # the part below the depth limit was not searched, and the answer says so
