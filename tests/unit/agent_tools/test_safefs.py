"""Hostile-path corpus for dosya_oku/dosya_ara: every attempt is refused with a clear message and nothing
outside FILES_ROOT is ever read (a secret file sits beside the root)."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import pytest

from agent_tools import safefs
from tests.unit.agent_tools.conftest import SECRET, Box

CAP = safefs.MAX_READ_BYTES


def build_corpus(box: Box) -> None:
    root = box.root
    (root / "sub").mkdir()
    (root / "sub" / "file.txt").write_text("inner text\n")
    (root / "ok.txt").write_text("fine\n")
    (root / "link_out").symlink_to(box.secret)
    (root / "rel_link_out").symlink_to(Path("..") / "outside" / "secret.txt")
    (root / "dirlink").symlink_to(box.outside, target_is_directory=True)
    (root / "sub" / "loop").symlink_to("loop")
    (root / "devzero").symlink_to("/dev/zero")
    os.mkfifo(root / "fifo")
    (root / "bin.dat").write_bytes(b"text\x00more")
    (root / "latin1.txt").write_bytes("Müşteri".encode("latin-1", "replace") + b"\xff\xfe")
    (root / "big.txt").write_text("a" * (CAP + 1))
    (root / "exact.txt").write_text("b" * CAP)
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("[core]\n")
    (root / ".venv").mkdir()
    (root / ".venv" / "pyvenv.cfg").write_text("home = x\n")


HOSTILE = [
    ("../outside/secret.txt", "'..'"),
    ("sub/../../outside/secret.txt", "'..'"),
    ("sub/./../../outside/secret.txt", "'..'"),
    ("..\\outside\\secret.txt", "'..'"),
    ("..", "'..'"),
    ("/etc/passwd", "absolute paths"),
    ("/etc/../etc/passwd", "absolute paths"),
    ("link_out", "symbolic link"),
    ("rel_link_out", "symbolic link"),
    ("dirlink/secret.txt", "symbolic link"),
    ("dirlink", "symbolic link"),
    ("sub/loop", "symbolic link"),
    ("devzero", "symbolic link"),
    ("fifo", "not a regular file"),
    ("bin.dat", "binary"),
    ("latin1.txt", "not UTF-8"),
    ("big.txt", f"over {CAP} bytes"),
    (".git/config", "not served"),
    ("sub/../.venv/pyvenv.cfg", "'..'"),
    (".venv/pyvenv.cfg", "not served"),
    ("sub", "is a directory"),
    ("ok.txt/x", "not a directory"),
    ("missing.txt", "not found"),
    ("ok\x00.txt", "NUL byte"),
    ("a" * 300, "longer than 255 bytes"),
    ("a/" * 600, "longer than 1024 characters"),
    ("", "empty"),
    (".", "files root itself"),
]


@pytest.mark.parametrize(("path", "message"), HOSTILE, ids=[repr(p)[:40] for p, _ in HOSTILE])
async def test_hostile_paths_are_refused_with_a_clear_message(box: Box, path: str, message: str) -> None:
    build_corpus(box)
    is_error, text = await box.call("dosya_oku", path=path)
    assert is_error, text
    assert message in text
    assert SECRET not in text


async def test_absolute_path_to_the_secret_is_refused(box: Box) -> None:
    is_error, text = await box.call("dosya_oku", path=str(box.secret))
    assert is_error and "absolute paths outside the files root" in text and SECRET not in text


async def test_socket_file_is_refused(box: Box) -> None:
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(box.root / "s"))
        is_error, text = await box.call("dosya_oku", path="s")
    assert is_error and "not a regular file" in text


async def test_exact_cap_and_absolute_path_inside_root_are_read(box: Box) -> None:
    build_corpus(box)
    got = await box.ok("dosya_oku", path="exact.txt")
    assert got["size_bytes"] == CAP and got["content"] == "b" * CAP
    inside = await box.ok("dosya_oku", path=str(box.root.resolve() / "sub" / "file.txt"))
    assert (inside["path"], inside["content"]) == ("sub/file.txt", "inner text\n")


async def test_search_never_follows_links_or_lists_skipped_dirs(box: Box) -> None:
    build_corpus(box)
    everything = await box.ok("dosya_ara", pattern="*", max_results=200)
    paths = {f["path"] for f in everything["files"]}
    assert paths == {"sub/file.txt", "ok.txt", "bin.dat", "latin1.txt", "big.txt", "exact.txt"}
    assert (await box.ok("dosya_ara", pattern="secret"))["count"] == 0


async def test_search_is_capped(box: Box) -> None:
    for i in range(30):
        (box.root / f"r{i:02}.md").write_text("x")
    got = await box.ok("dosya_ara", pattern="*.md", max_results=5)
    assert got["count"] == 5 and got["truncated"] is True
    is_error, text = await box.call("dosya_ara", pattern="x\x00")
    assert is_error and "invalid" in text


def _swap_for_link(target: Path, secret: Path) -> None:
    target.unlink()
    target.symlink_to(secret)


@pytest.mark.parametrize("stage", ["validated", "parent_opened"])
async def test_file_swapped_for_a_symlink_after_the_check_is_not_followed(
    box: Box, stage: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_corpus(box)
    victim = box.root / "sub" / "file.txt"

    def race(seen: str, parts: list[str]) -> None:
        if seen == stage:
            _swap_for_link(victim, box.secret)

    monkeypatch.setattr(safefs, "race_hook", race)
    is_error, text = await box.call("dosya_oku", path="sub/file.txt")
    assert is_error and "symbolic link" in text and SECRET not in text


def _swap_dir_for_link(box: Box) -> None:
    """The attack: the checked directory `sub` is replaced by a link to a folder outside the root."""
    (box.root / "sub").rename(box.root / "sub_old")
    (box.root / "sub").symlink_to(box.outside, target_is_directory=True)


async def test_directory_swapped_for_a_symlink_before_the_walk_is_refused(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_corpus(box)
    (box.outside / "file.txt").write_text(SECRET)

    def race(seen: str, parts: list[str]) -> None:
        if seen == "validated":
            _swap_dir_for_link(box)

    monkeypatch.setattr(safefs, "race_hook", race)
    is_error, text = await box.call("dosya_oku", path="sub/file.txt")
    assert is_error and "symbolic link" in text and SECRET not in text


async def test_directory_swapped_after_it_was_opened_still_reads_the_original(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    build_corpus(box)
    (box.outside / "file.txt").write_text(SECRET)

    def race(seen: str, parts: list[str]) -> None:
        if seen == "parent_opened":
            _swap_dir_for_link(box)

    monkeypatch.setattr(safefs, "race_hook", race)
    got = await box.ok("dosya_oku", path="sub/file.txt")
    assert got["content"] == "inner text\n"


def test_fifo_open_does_not_block(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "p")
    with pytest.raises(Exception, match="not a regular file"):
        safefs.read_text(tmp_path, "p")


def test_missing_root_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="FILES_ROOT"):
        safefs.read_text(tmp_path / "nope", "a.txt")
