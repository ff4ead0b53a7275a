"""`local-agent`: start the whole agent on one machine — state, tool server, model checks, API on :8000.

The same code as the compose stack (the API, the tool loop, the MCP server), with the embedded choices:
rounds go straight to the model server (MODEL_BACKEND=direct, no Redis, no queue), the MCP server is a child
process on the demo database, and what must persist (MCP token, admin key, audit log, notes) lives in a state
directory, so a second start only checks and serves. Every other setting is read from the environment exactly
as agent-api reads it (the same Settings, the same backend choice by MODEL_PROTOCOL, the same server options).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from pydantic import SecretStr

from agent import cli
from agent.local.state import State, default_home
from agent.local.steps import Checks, GatedBackend, Step
from agent.settings import Settings, get_settings

DESCRIPTION = """Run local-agent on this machine: no Docker, no Redis. Starts the tool server on the demo database,
checks the model server and the model (Ollama at OLLAMA_URL by default; any OpenAI-protocol server with
MODEL_PROTOCOL=openai MODEL_URL=...; MODEL_NAME names the model), warms it, and serves the OpenAI- and
Ollama-compatible API on AGENT_HOST:AGENT_PORT (default 127.0.0.1:8000). Every variable of
docs/configuration.md applies, as for agent-api."""


def say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _mcp_command() -> str:
    """The `mcp-server` installed beside this Python (a venv), else on PATH."""
    beside = Path(sys.executable).parent / "mcp-server"
    found = str(beside) if beside.exists() else shutil.which("mcp-server")
    if found is None:
        raise cli.UsageError("mcp-server is not installed: from a source checkout run `uv sync --all-packages`")
    return found


def _die_with_parent() -> None:
    """In the child: Linux sends it SIGTERM when local-agent dies, even by SIGKILL (no orphaned tool server)."""
    # Not Linux: no prctl; the `finally` in start() still stops the child on a normal exit.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _exit_on_sigterm(signum: int, frame: object) -> None:
    # uvicorn re-raises the SIGTERM it caught after its graceful shutdown; turning it into SystemExit lets
    # start()'s `finally` stop the tool server instead of the process dying on the default handler.
    raise SystemExit(0)


def start_mcp(state: State, token: str, files: Path) -> tuple[subprocess.Popen[bytes], str]:
    """The tool server as a child process on loopback, its log in the state directory."""
    port = _free_port()
    env = {
        **os.environ,
        "MCP_HOST": "127.0.0.1",
        "MCP_PORT": str(port),
        "MCP_TOKEN": token,
        # the child is a process of its own (its /proc/self/fd differs): it gets the folder by name
        "DATA_DIR": str(state.where / "mcp-data"),
        "FILES_ROOT": str(files),
        "LOG_LEVEL": os.environ.get("LOG_LEVEL", "WARNING"),
    }
    with state.mcp_log.open("ab") as log:
        child = subprocess.Popen(
            [_mcp_command()], env=env, stdout=log, stderr=subprocess.STDOUT, preexec_fn=_die_with_parent
        )
    deadline = time.monotonic() + 60
    while not _answers(f"http://127.0.0.1:{port}/healthz"):
        if child.poll() is not None or time.monotonic() > deadline:
            child.kill()
            raise cli.UsageError(f"the tool server did not start; its log: {state.mcp_log}")
        time.sleep(0.1)
    return child, f"http://127.0.0.1:{port}/mcp"


def embedded_settings(state: State, mcp_url: str, token: str) -> Settings:
    """The environment's settings (OLLAMA_URL, MODEL_NAME, AGENT_PORT, …) with the one-machine choices."""
    return Settings(
        model_backend="direct",
        mcp_url=mcp_url,
        mcp_token=SecretStr(token),
        agent_auth="api_key",
        agent_keys_file=state.keys_file,
        audit_dir=state.audit_dir,
        audit_key_file=state.audit_key_file,
        rate_limit_backend="memory",
        log_level=os.environ.get("LOG_LEVEL", "WARNING"),
    )


async def _first_checks(checks: Checks) -> list[Step]:
    try:
        return await checks.run()
    finally:  # this event loop ends here; the server's loop gets a fresh client
        await checks.reset_client()


def serve(settings: Settings, checks: Checks, sock: socket.socket) -> None:
    from agent.api.app import create_app
    from agent.api.server import serve as serve_app
    from agent.backends.engine import direct_backend
    from agent_contract.logs import configure

    configure(settings.log_level)
    app = create_app(settings, backend=GatedBackend(direct_backend(settings), checks))
    serve_app(app, settings, sock)


def bind(settings: Settings) -> socket.socket:
    """The API's port, bound before anything is generated or started: a busy port fails first, in one line."""
    from agent.api.server import PortBusy
    from agent.api.server import bind as bind_port

    try:
        return bind_port(settings)
    except PortBusy as exc:
        raise cli.UsageError(str(exc)) from exc


def start(home: Path, files: Path | None) -> int:
    base = get_settings()
    url = f"http://{base.agent_host}:{base.agent_port}"
    if _answers(f"{url}/healthz"):
        say(f"local-agent is already serving at {url}: nothing to do")
        return 0
    sock = bind(base)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    state = State(home)
    say(f"local-agent {cli.package_version()}, state in {state.home}")
    made = state.prepare()
    state = state.anchored()  # from here on keys, audit and secrets are read through one handle on the folder
    for item, new in made.items():
        say(Step("ok" if new else "kept", f"{item} {'generated' if new else 'kept'}").line())
    token, _ = state.mcp_token()
    child, mcp_url = start_mcp(state, token, files or state.where / "files")
    try:
        say(Step("ok", f"tool server on {mcp_url} (demo database in {state.where / 'mcp-data'})").line())
        settings = embedded_settings(state, mcp_url, token)
        checks = Checks(settings)
        for step in asyncio.run(_first_checks(checks)):
            say(step.line())
        say(f"serving on {url} (OpenAI: {url}/v1, Ollama: {url}/api)")
        say(key_notice(state, made["admin API key"]))
        serve(settings, checks, sock)
    finally:
        sock.close()
        child.terminate()
        child.wait(timeout=15)
    return 0


def key_notice(state: State, new: bool) -> str:
    """The admin key is shown once, when it is made; a terminal's scroll-back or a log of every later start
    would otherwise keep a copy. Afterwards: where it is."""
    path = state.where / "admin.key"
    if new:
        return f"admin API key, shown this once (also kept in {path}, readable only by you):\n  {state.admin_key()[0]}"
    return f"admin API key: in {path} (e.g. KEY=$(cat {path}))"


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser("local-agent", DESCRIPTION)
    parser.add_argument(
        "--home",
        type=Path,
        default=Path(os.environ.get("LOCAL_AGENT_HOME") or default_home()),
        help="state directory (env LOCAL_AGENT_HOME; default %(default)s)",
    )
    parser.add_argument("--files", type=Path, help="the folder the file tools may read (default: HOME/files)")
    args = parser.parse_args(argv)
    return cli.run("local-agent", lambda: start(args.home, args.files))


if __name__ == "__main__":
    raise SystemExit(main())
