"""The `mcp-server` command: serve the tools over streamable HTTP, or load the demo data into a database."""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import NoReturn

import psycopg
import structlog
from pydantic import ValidationError

from agent_contract.logs import configure
from agent_tools import demo
from agent_tools.db import DatabaseError, is_postgres_url, psycopg_url, redact_url, sqlite_path_from_url
from agent_tools.settings import ConfigError, environ_summary, get_settings

DESCRIPTION = """MCP tool server of local-agent: streamable HTTP at /mcp (bearer token), /healthz, /metrics.
Configured by environment variables (MCP_HOST, MCP_PORT, MCP_TOKEN, MCP_ALLOWED_HOSTS, FILES_ROOT,
DATA_DIR, REPORTS_DB_URL, MCP_TIMEZONE/TZ); see mcp-server/README.md."""


class _Parser(argparse.ArgumentParser):
    """A wrong invocation is one line and exit 2 (argparse prints the whole usage block first)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see mcp-server --help)\n")


def _version() -> str:
    try:
        return version("agent-tools")
    except PackageNotFoundError:  # a source tree that was never installed
        return "0+unknown"


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="mcp-server", description=DESCRIPTION)
    parser.add_argument("--version", action="version", version=f"mcp-server (local-agent) {_version()}")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("serve", help="serve the tools (the default when no command is given)")
    load = sub.add_parser("load-demo", help="create the demo reports schema and rows in a database")
    load.add_argument("--db-url", required=True, help="postgresql://user@host:port/db or sqlite:///path.db")
    load.add_argument("--date", help="the day the demo rows are relative to (default: today in MCP_TIMEZONE)")
    load.add_argument("--replace", action="store_true", help="drop the demo tables first if they exist")
    return parser


def serve() -> int:
    import uvicorn

    from agent_contract.slowclients import deadline_protocol
    from agent_tools.server import create_app

    settings = get_settings()
    configure(settings.log_level, service="mcp-server")
    log = structlog.get_logger("agent_tools")
    try:
        app = create_app(settings)
    except ConfigError as exc:  # one line on stderr, no JSON log line beside it: the user's mistake, said once
        print(f"mcp-server: {exc}", file=sys.stderr)
        return 2
    log.info(
        "server_starting",
        host=settings.mcp_host,
        port=settings.mcp_port,
        env=environ_summary(),
        reports_db=redact_url(settings.reports_db_url) if settings.reports_db_url else "sqlite demo",
        allowed_hosts=settings.mcp_allowed_hosts,
    )
    uvicorn.run(
        app,
        host=settings.mcp_host,
        port=settings.mcp_port,
        log_config=None,
        access_log=False,
        proxy_headers=False,  # request.client stays the socket peer: a client cannot rewrite it with X-Forwarded-For
        loop="asyncio",  # as in its image, which has no uvloop (the shared test venv has it, for agent-worker)
        http=deadline_protocol(settings.mcp_request_read_timeout_seconds),  # half-sent requests are cut
        timeout_graceful_shutdown=10,
    )
    return 0


def load_demo(db_url: str, day: str | None, replace: bool) -> int:
    settings = get_settings()
    try:
        today = dt.date.fromisoformat(day) if day else dt.datetime.now(settings.zone()).date()
    except (ValueError, ConfigError) as exc:
        print(f"mcp-server load-demo: {exc}", file=sys.stderr)
        return 2
    try:
        if is_postgres_url(db_url):
            counts = demo.load_postgres(psycopg_url(db_url), today, replace=replace)
        else:
            demo.write_sqlite(sqlite_path_from_url(db_url), today)
            counts = {table: len(rows) for table, rows in demo.generate(today).items()}
    except (psycopg.Error, DatabaseError, OSError) as exc:
        # By SQLSTATE (42P07), not by the message: a server with lc_messages set translates the text.
        existing = isinstance(exc, psycopg.errors.DuplicateTable)
        hint = " (add --replace to drop the existing demo tables)" if existing else ""
        print(f"mcp-server load-demo: {exc}{hint}", file=sys.stderr)
        return 1
    print(
        f"loaded demo data for {today} into {redact_url(db_url)}: "
        + ", ".join(f"{table}={n}" for table, n in counts.items())
    )
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.command == "load-demo":
            return load_demo(args.db_url, args.date, args.replace)
        return serve()
    except ValidationError as exc:  # a variable that does not parse (MCP_PORT=abc): the user's to fix
        first = exc.errors()[0]
        name = "_".join(str(p) for p in first.get("loc", ())).upper()
        print(f"mcp-server: invalid setting {name}={first.get('input')!r}: {first.get('msg')}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
