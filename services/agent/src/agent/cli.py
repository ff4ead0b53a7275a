"""Console-script plumbing for every agent command: `--version`, one-line usage errors with exit 2, no tracebacks.

A user's mistake (a wrong flag, a bad date, a duplicate key name, a setting that does not parse, a
dependency that is down at start) is one line on stderr naming the fix, and exit status 2. A traceback
is kept for what is really a bug.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NoReturn, TypeGuard

if TYPE_CHECKING:
    from pydantic import ValidationError

EXIT_USAGE = 2


class UsageError(Exception):
    """A mistake the user can fix: the command prints `prog: message` and exits 2."""


def package_version() -> str:
    from importlib.metadata import PackageNotFoundError, version  # for --version: every command imports this module

    try:
        return version("local-agent")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "0+unknown"


class Parser(argparse.ArgumentParser):
    """argparse with a one-line error (argparse prints the whole usage block first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {message} (see {self.prog.split()[0]} --help)\n")


class Version(argparse.Action):
    """`--version`, the package's version looked up only when asked: importlib.metadata and the lookup cost every
    command 3 MB (agent-api's supervisor keeps them all its life)."""

    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: Any) -> None:
        kwargs.setdefault("help", "show program's version number and exit")
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(f"{parser.prog} (local-agent) {package_version()}")
        parser.exit()


def parser(prog: str, description: str | None) -> Parser:
    """A command's parser with `--version`; subcommand parsers made from it inherit the one-line errors."""
    p = Parser(prog=prog, description=description)
    p.add_argument("--version", action=Version)
    return p


def settings_problem(exc: ValidationError) -> str:
    """The first invalid environment variable, in one line: `AGENT_PORT='abc': Input should be a valid integer`."""
    first = exc.errors()[0]
    name = "_".join(str(part) for part in first.get("loc", ())).upper() or "settings"
    return f"invalid setting {name}={first.get('input')!r}: {first.get('msg')}"


def is_settings_error(exc: Exception) -> TypeGuard[ValidationError]:
    """Whether `exc` is the environment refused by a Settings model. pydantic is looked up, not imported: a
    command that never loaded it (agent-api's supervisor) cannot have raised its error, and stays small."""
    pydantic_core = sys.modules.get("pydantic_core")
    return pydantic_core is not None and isinstance(exc, pydantic_core.ValidationError) and exc.title == "Settings"


def run(prog: str, body: Callable[[], int | None]) -> int:
    """Run a command's body; turn the user's mistakes into one line and exit 2."""
    try:
        return int(body() or 0)
    except UsageError as exc:
        print(f"{prog}: {exc}", file=sys.stderr)
    except Exception as exc:
        if not is_settings_error(exc):  # only the environment is the user's input; other models are our bug
            raise
        print(f"{prog}: {settings_problem(exc)}", file=sys.stderr)
    except KeyboardInterrupt:
        return 130
    return EXIT_USAGE
