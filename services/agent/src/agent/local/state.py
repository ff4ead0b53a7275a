"""The state directory of `local-agent`: what the first start generates and every later start keeps.

It holds the keys file, the admin key, the MCP token and the audit key: whoever can write it can let
themselves in. So it is created 0700, and an existing one that another user owns or may write into is
refused with the command that fixes it (as ssh refuses a `~/.ssh` others can write), never used as is; so is
one below a folder another user owns or may write into (OpenSSH's StrictModes: every ancestor owned by root or
the user, not writable by others unless sticky, like /tmp), who could otherwise swap the whole folder. Once
checked, the folder is opened once (`anchored`): the server reads keys, audit and secrets through that handle,
so a folder swapped under a running server changes nothing it reads.
"""

from __future__ import annotations

import os
import secrets
import stat
from dataclasses import dataclass
from pathlib import Path

from agent.cli import UsageError
from agent.security.auth import add_key, read_keys

ADMIN = "admin"


def default_home() -> Path:
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "local-agent"


def _secret_file(path: Path, make: str) -> tuple[str, bool]:
    """The secret in `path`, created (mode 0600) with `make` on the first start; True when it was created now."""
    if path.is_file():
        return path.read_text().strip(), False
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(make + "\n")
    return make, True


def check_private(path: Path) -> None:
    """Refuse a state entry another user owns or may write (group or world), in one sentence with the fix."""
    info = path.lstat()
    if stat.S_ISLNK(info.st_mode):
        raise UsageError(f"{path} is a symbolic link; remove it, or choose another state directory with --home DIR")
    if info.st_uid != os.getuid():
        raise UsageError(
            f"{path} belongs to another user (uid {info.st_uid}), who could replace its keys; "
            "choose a directory of your own with --home DIR"
        )
    if info.st_mode & 0o022:
        raise UsageError(
            f"{path} is writable by other users (mode {stat.S_IMODE(info.st_mode):o}), who could replace its keys; "
            f"fix it with `chmod go-w {path}` (or choose another state directory with --home DIR)"
        )


def check_ancestors(home: Path) -> None:
    """Refuse a state directory below a folder another user owns or may write into (sticky folders excepted)."""
    for folder in home.absolute().parents:
        info = folder.stat()
        if info.st_uid not in (0, os.getuid()):
            raise UsageError(
                f"{folder}, above the state directory, belongs to another user (uid {info.st_uid}), who could swap "
                "the state directory for their own; choose a directory of your own with --home DIR"
            )
        if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            raise UsageError(
                f"{folder}, above the state directory, is writable by other users (mode "
                f"{stat.S_IMODE(info.st_mode):o}), who could swap the state directory; fix it with "
                f"`chmod go-w {folder}` (or choose another state directory with --home DIR)"
            )


@dataclass(frozen=True)
class State:
    home: Path  # where files are read and written: after `anchored`, the opened folder's handle
    shown: Path | None = None  # the folder's name, for messages (None: `home` is the name)

    @property
    def where(self) -> Path:
        return self.shown or self.home

    def anchored(self) -> State:
        """This state, read from now on through one handle on the folder checked (Linux: /proc/self/fd/N), not
        by its name: renaming it and planting another in its place changes nothing the server reads. Elsewhere
        (no /proc/self/fd) the name is kept."""
        if not Path("/proc/self/fd").is_dir():
            return self
        fd = os.open(self.home, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
        opened, named = os.fstat(fd), os.lstat(self.home)
        if (opened.st_dev, opened.st_ino) != (named.st_dev, named.st_ino):  # swapped between the check and now
            os.close(fd)
            raise UsageError(f"{self.home} changed while it was being checked; start again")
        return State(Path(f"/proc/self/fd/{fd}"), self.home)

    @property
    def keys_file(self) -> Path:
        return self.home / "keys.yaml"

    @property
    def audit_dir(self) -> Path:
        return self.home / "audit"

    @property
    def data_dir(self) -> Path:
        return self.home / "mcp-data"

    @property
    def files_root(self) -> Path:
        return self.home / "files"

    @property
    def audit_key_file(self) -> Path:
        return self.home / "audit.key"  # beside the log would be weaker; the agent warns about that layout

    @property
    def mcp_log(self) -> Path:
        return self.home / "mcp-server.log"

    def mcp_token(self) -> tuple[str, bool]:
        return _secret_file(self.home / "mcp-token", secrets.token_urlsafe(32))

    def admin_key(self) -> tuple[str, bool]:
        """The admin API key: its hash in the keys file, the key itself kept (0600) so the user can read it again."""
        path = self.home / "admin.key"
        if path.is_file() and any(e.name == ADMIN for e in read_keys(self.keys_file)):
            return path.read_text().strip(), False
        path.unlink(missing_ok=True)
        key = add_key(self.keys_file, ADMIN, ADMIN)
        return _secret_file(path, key)[0], True

    def entries(self) -> list[Path]:
        """Everything in the state directory whose owner and mode decide who may act as the admin."""
        names = ("keys.yaml", "admin.key", "mcp-token", "audit.key")
        return [self.home, self.audit_dir, self.data_dir, self.files_root, *(self.home / n for n in names)]

    def prepare(self) -> dict[str, bool]:
        """Create what is missing (0700), refuse what others could write; says, per item, whether it was
        made now (True) or kept from an earlier start."""
        try:
            for folder in reversed([p for p in self.home.absolute().parents if not p.exists()]):
                folder.mkdir(mode=0o755)  # not writable by others, whatever the umask (mkdir -p would leave it)
            self.home.mkdir(exist_ok=True, mode=0o700)
            check_ancestors(self.home)
            for entry in self.entries():
                if entry.exists() or entry.is_symlink():
                    check_private(entry)
            for folder in (self.audit_dir, self.data_dir, self.files_root):
                folder.mkdir(exist_ok=True, mode=0o700)
            return self._secrets()
        except OSError as exc:  # /proc/nope, a read-only disk, a file where the directory should be
            raise UsageError(
                f"cannot use {exc.filename or self.home} as the state directory ({exc.strerror or exc}); "
                "choose another with --home DIR"
            ) from exc

    def _secrets(self) -> dict[str, bool]:
        _, token_new = self.mcp_token()
        _, key_new = self.admin_key()
        _secret_file(self.audit_key_file, secrets.token_hex(32))
        return {"MCP token": token_new, "admin API key": key_new}
