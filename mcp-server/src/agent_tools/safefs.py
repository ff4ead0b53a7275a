"""Confined file access under one root: no `..`, no symlinks, regular files only, bounded reads.

Every path component is opened relative to its parent's descriptor with O_NOFOLLOW, so a symlink
swapped in after validation makes the open fail instead of leading outside the root; the checks
(regular file, size) run with fstat on the very descriptor that is then read.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from mcp.server.mcpserver.exceptions import ToolError

MAX_READ_BYTES = 20 * 1024
MAX_PATH_CHARS = 1024
MAX_NAME_BYTES = 255
SKIP_DIRS = frozenset({".git", ".venv"})
MAX_DEPTH = 64  # directory levels dosya_ara descends; deeper ones are reported as not searched
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: opening a FIFO must not wait for a writer; O_NOCTTY: a tty never becomes ours.
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC


def _no_hook(stage: str, parts: list[str]) -> None:
    """Test seam between validation and opening (tests swap in a symlink here to simulate a race)."""


race_hook: Callable[[str, list[str]], None] = _no_hook


def split_path(path: str, root: Path) -> list[str]:
    """Validate `path` and return its components relative to `root`; refuse anything that could leave it."""
    if not isinstance(path, str) or not path.strip():
        raise ToolError("the path is empty: give a file path relative to the files root")
    if "\x00" in path:
        raise ToolError("the path contains a NUL byte and was refused")
    if len(path) > MAX_PATH_CHARS:
        raise ToolError(f"the path is longer than {MAX_PATH_CHARS} characters and was refused")
    text = path.replace("\\", "/")
    if text.startswith("/"):
        root_text = str(root).rstrip("/") + "/"
        if not text.startswith(root_text):
            raise ToolError("absolute paths outside the files root are refused: give a path relative to it")
        text = text[len(root_text) :]
    parts = [p for p in text.split("/") if p not in ("", ".")]
    for part in parts:
        if part == "..":
            raise ToolError("paths with '..' are refused: only files under the files root can be read")
        if len(part.encode("utf-8", "surrogateescape")) > MAX_NAME_BYTES:
            raise ToolError(f"a path component is longer than {MAX_NAME_BYTES} bytes and was refused")
        if part in SKIP_DIRS:
            raise ToolError(f"files inside {part} are not served")
    return parts


def _open_error(exc: OSError, shown: str) -> ToolError:
    if exc.errno == errno.ENOENT:
        return ToolError(f"{shown} was not found under the files root (use dosya_ara to find files)")
    if exc.errno in (errno.ELOOP, errno.EMLINK):
        return ToolError(f"{shown} is a symbolic link; links are not followed")
    if exc.errno == errno.ENOTDIR:
        return ToolError(f"{shown}: a part of the path is not a directory (or is a symbolic link)")
    if exc.errno == errno.ENXIO:  # a socket (or a device without a driver)
        return ToolError(f"{shown} is not a regular file (socket or device) and was refused")
    if exc.errno == errno.ENAMETOOLONG:
        return ToolError(f"{shown}: the name is too long")
    if exc.errno in (errno.EACCES, errno.EPERM):
        return ToolError(f"{shown} cannot be read: permission denied")
    return ToolError(f"{shown} cannot be opened ({errno.errorcode.get(exc.errno or 0, 'error')})")


def open_root(root: Path) -> int:
    try:
        return os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as exc:
        raise ToolError("the files root is not available on this server (FILES_ROOT)") from exc


def _open_parent(root: Path, dirs: list[str], shown: str) -> int:
    """Walk the directories one openat at a time, never following a link; returns the last dir's fd."""
    fd = open_root(root)
    try:
        for name in dirs:
            next_fd = os.open(name, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = next_fd
    except OSError as exc:
        os.close(fd)
        raise _open_error(exc, shown) from exc
    return fd


def read_text(root: Path, path: str, limit: int = MAX_READ_BYTES) -> tuple[str, int]:
    """The UTF-8 text of a regular file under `root` and its size; ToolError for anything else."""
    parts = split_path(path, root)
    if not parts:
        raise ToolError("the path names the files root itself, not a file")
    shown = "/".join(parts)
    race_hook("validated", parts)
    dir_fd = _open_parent(root, parts[:-1], shown)
    try:
        race_hook("parent_opened", parts)
        fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        raise _open_error(exc, shown) from exc
    finally:
        os.close(dir_fd)
    try:
        return _read_checked(fd, shown, limit)
    finally:
        os.close(fd)


def _read_checked(fd: int, shown: str, limit: int) -> tuple[str, int]:
    info = os.fstat(fd)
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{shown} is a directory; use dosya_ara to list files")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(f"{shown} is not a regular file (device, FIFO or socket) and was refused")
    if info.st_size > limit:
        raise ToolError(f"{shown} is {info.st_size} bytes; files over {limit} bytes are not read")
    os.set_blocking(fd, True)
    data = _read_at_most(fd, limit + 1)
    if len(data) > limit:  # it grew after fstat
        raise ToolError(f"{shown} is larger than {limit} bytes; files over the limit are not read")
    if b"\x00" in data:
        raise ToolError(f"{shown} looks like a binary file; only text files are read")
    try:
        return data.decode("utf-8"), len(data)
    except UnicodeDecodeError:
        raise ToolError(f"{shown} is not UTF-8 text (binary?); only text files are read") from None


def _read_at_most(fd: int, count: int) -> bytes:
    chunks: list[bytes] = []
    remaining = count
    while remaining > 0:
        chunk = os.read(fd, remaining)
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    return b"".join(chunks)


@dataclass(frozen=True)
class Found:
    path: str
    size: int
    modified: float


def search(root: Path, pattern: str, *, limit: int, max_visits: int = 50_000) -> tuple[list[Found], bool]:
    """Regular files whose name (or relative path, if the pattern has '/') matches; (hits, truncated)."""
    glob = _glob(pattern)
    hits: list[Found] = []
    too_deep: list[str] = []
    for visits, (rel, entry_stat) in enumerate(_walk(open_root(root), "", too_deep), start=1):
        if visits > max_visits:
            return hits, True
        target = rel if "/" in glob else rel.rsplit("/", 1)[-1]
        if fnmatchcase(target.casefold(), glob):
            hits.append(Found(rel, entry_stat.st_size, entry_stat.st_mtime))
            if len(hits) >= limit:
                return hits, True
    return hits, bool(too_deep)


def _glob(pattern: str) -> str:
    text = (pattern or "").strip()
    if not text:
        raise ToolError("the search pattern is empty: give part of a file name or a glob like *.md")
    if "\x00" in text or len(text) > 200:
        raise ToolError("the search pattern is invalid (NUL byte or longer than 200 characters)")
    text = text.casefold().lstrip("/")
    return text if any(c in text for c in "*?[") else f"*{text}*"


def _walk(dir_fd: int, prefix: str, too_deep: list[str], depth: int = 1) -> Iterator[tuple[str, os.stat_result]]:
    """Depth-first, sorted, over directory descriptors; symlinks and special files are skipped.

    Directories below MAX_DEPTH are not entered (noted in `too_deep`): each level holds one descriptor and
    one stack frame, so a directory nested a thousand levels deep must not take the whole search down.
    """
    try:
        with os.scandir(dir_fd) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            rel = f"{prefix}{entry.name}"
            if entry.is_symlink():
                continue
            if entry.is_dir(follow_symlinks=False):
                if entry.name in SKIP_DIRS:
                    continue
                if depth >= MAX_DEPTH:
                    too_deep.append(rel)
                    continue
                try:
                    child = os.open(entry.name, _DIR_FLAGS, dir_fd=dir_fd)
                except OSError:
                    continue
                yield from _walk(child, f"{rel}/", too_deep, depth + 1)
            elif entry.is_file(follow_symlinks=False):
                yield rel, entry.stat(follow_symlinks=False)
    finally:
        os.close(dir_fd)
