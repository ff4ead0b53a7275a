"""Every console script: `--help`/`--version` do only that; each user mistake is one line on stderr and exit 2.

The commands run as real processes from the venv, each in an empty working directory, so "no side effect"
means exactly that: the directory is still empty afterwards (agent-api used to start the server on `--help`
and write an audit key into the current directory).
"""

from __future__ import annotations

import errno
import io
import os
import subprocess
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.security import admin
from agent.security.audit import AuditLog
from agent.settings import get_settings
from tests.integration.conftest import FakeOllama, McpServer, agent_env
from tests.support.procs import REPO, VENV_BIN, free_port, running

COMMANDS = ["agent-api", "agent-worker", "agent-admin", "agent-eval", "mcp-server", "local-agent"]
AUDIT_KEY = "cli-test-audit-key-0123456789abcdef"
QUESTION = "time-now-en"
EVAL_SET = ["--questions", str(REPO / "evals/questions.yaml"), "--only", QUESTION, "--quiet"]


@dataclass
class Done:
    returncode: int
    stdout: str
    stderr: str


def run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None, timeout: float = 30) -> Done:
    full = {**os.environ, "PATH": f"{VENV_BIN}:{os.environ['PATH']}", **(env or {})}
    p = subprocess.run(cmd, cwd=cwd, env=full, capture_output=True, text=True, timeout=timeout, check=False)
    return Done(p.returncode, p.stdout, p.stderr)


def assert_one_line_usage_error(done: Done, *expected: str) -> None:
    assert done.returncode == 2, done
    assert "Traceback" not in done.stderr + done.stdout, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    for text in expected:
        assert text in done.stderr, done.stderr


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_do_only_that(command: str, flag: str, tmp_path: Path) -> None:
    # Settings that would make a started server fail loudly: if the flag started anything, we would see it.
    done = run([command, flag], tmp_path, {"AGENT_PORT": "1", "MCP_PORT": "1", "REDIS_URL": "redis://127.0.0.1:1"})
    assert done.returncode == 0, done
    assert done.stderr == "" and command in done.stdout
    if flag == "--version":
        assert done.stdout.strip() == f"{command} (local-agent) 0.1.0"
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def admin_env(tmp_path: Path) -> dict[str, str]:
    env = {"AGENT_KEYS_FILE": str(tmp_path / "keys.yaml"), "AUDIT_DIR": str(tmp_path / "audit"), "AUDIT_KEY": AUDIT_KEY}
    log = AuditLog(tmp_path / "audit", AUDIT_KEY.encode())
    log.append({"event": "request", "user": "alice", "status": 200})
    return env


WRONG_INVOCATIONS: list[tuple[str, list[str], dict[str, str], tuple[str, ...]]] = [
    ("agent-api: unknown flag", ["agent-api", "--port", "9"], {}, ("unrecognized arguments",)),
    ("agent-api: unparsable setting", ["agent-api"], {"AGENT_PORT": "abc"}, ("AGENT_PORT='abc'",)),
    ("agent-worker: unknown flag", ["agent-worker", "--gpu"], {}, ("unrecognized arguments",)),
    (
        "agent-worker: Redis down at start",
        ["agent-worker"],
        {"REDIS_URL": "redis://:secret-pw@127.0.0.1:1/0", "WORKER_METRICS_PORT": "0"},
        ("Redis unreachable at redis://127.0.0.1:1/0", "REDIS_URL"),
    ),
    (
        "agent-worker: TLS file with a redis:// URL",
        ["agent-worker"],
        {"REDIS_URL": "redis://:secret-pw@127.0.0.1:1/0", "REDIS_TLS_CA_FILE": "/nonexistent/ca.crt"},
        ("REDIS_TLS_CA_FILE set, but REDIS_URL redis://127.0.0.1:1/0 is not TLS", "rediss://"),
    ),
    (
        "agent-worker: unreadable Redis password file",
        ["agent-worker"],
        {"REDIS_URL": "redis://127.0.0.1:1/0", "REDIS_PASSWORD_FILE": "/nonexistent/redis-password"},
        ("REDIS_PASSWORD_FILE /nonexistent/redis-password cannot be read",),
    ),
    (
        "agent-worker: no round verify key",
        ["agent-worker"],
        {"ROUND_VERIFY_KEY": "", "REDIS_URL": "redis://127.0.0.1:1/0"},
        ("ROUND_VERIFY_KEY_FILE (or ROUND_VERIFY_KEY) is unset",),
    ),
    ("agent-admin: no area", ["agent-admin"], {}, ("required",)),
    ("agent-admin: role missing", ["agent-admin", "keys", "add", "bob"], {}, ("--role",)),
    ("agent-admin: unknown role", ["agent-admin", "keys", "add", "bob", "--role", "root"], {}, ("not in the policy",)),
    ("agent-admin: duplicate key", ["agent-admin", "keys", "add", "al", "--role", "support"], {}, ("already exists",)),
    ("agent-admin: revoke unknown", ["agent-admin", "keys", "revoke", "nobody"], {}, ("no key named 'nobody'",)),
    ("agent-admin: anchor typo", ["agent-admin", "audit", "verify", "--anchor", "9"], {}, ("SEQ:MAC",)),
    ("agent-admin: bad --since", ["agent-admin", "audit", "query", "--since", "yesterday"], {}, ("--since",)),
    ("agent-admin: bad --until", ["agent-admin", "audit", "query", "--until", "31.01.2026"], {}, ("--until",)),
    ("agent-eval: no command", ["agent-eval"], {}, ("required",)),
    ("agent-eval: bad repeat", ["agent-eval", "run", "--repeat", "0"], {}, ("--repeat",)),
    ("agent-eval: missing run file", ["agent-eval", "report", "nope.json"], {}, ("nope.json",)),
    ("mcp-server: unknown command", ["mcp-server", "load"], {}, ("invalid choice",)),
    ("mcp-server: bad --date", ["mcp-server", "load-demo", "--db-url", "sqlite:///x.db", "--date", "today"], {}, ()),
    ("mcp-server: unparsable setting", ["mcp-server"], {"MCP_PORT": "abc"}, ("MCP_PORT='abc'",)),
    ("mcp-server: no token", ["mcp-server"], {"MCP_TOKEN": "", "MCP_ALLOW_NO_TOKEN": "false"}, ("MCP_TOKEN",)),
    ("local-agent: unknown flag", ["local-agent", "--gpu"], {}, ("unrecognized arguments",)),
]


@pytest.mark.parametrize(
    ("key", "says"),
    [
        ("", "ROUND_SIGNING_KEY_FILE (or ROUND_SIGNING_KEY) is unset"),
        ("not-base64!", "ROUND_SIGNING_KEY is not base64"),
    ],
    ids=["no round key", "a round key that is not one"],
)
def test_agent_api_in_queue_mode_refuses_to_start_without_a_usable_round_key(
    key: str, says: str, tmp_path: Path
) -> None:
    """Queue mode signs every round: no key is a start-up error naming it (its config_refused log line, then the
    command's one line), never a 500 on the first chat."""
    env = {"MODEL_BACKEND": "queue", "ROUND_SIGNING_KEY": key, "AGENT_PORT": "0", "MCP_TOKEN": "x"}
    done = run(["agent-api"], tmp_path, env)
    assert done.returncode == 2 and "Traceback" not in done.stderr + done.stdout, done
    assert done.stderr.strip().splitlines()[-1].startswith(f"agent-api: {says}"), done


@pytest.mark.parametrize(("case", "cmd", "env", "expected"), WRONG_INVOCATIONS, ids=[c[0] for c in WRONG_INVOCATIONS])
def test_wrong_invocation_is_one_line_and_exit_2(
    case: str, cmd: list[str], env: dict[str, str], expected: tuple[str, ...], admin_env: dict[str, str], tmp_path: Path
) -> None:
    if case == "agent-admin: duplicate key":
        assert run(cmd, tmp_path, admin_env).returncode == 0
    done = run(cmd, tmp_path, {**admin_env, **env})
    assert_one_line_usage_error(done, *expected)
    assert "secret-pw" not in done.stderr


def test_anchor_typo_is_not_a_rewritten_log_alarm(admin_env: dict[str, str], tmp_path: Path) -> None:
    head = run(["agent-admin", "audit", "head"], tmp_path, admin_env)
    assert head.returncode == 0
    assert run(["agent-admin", "audit", "verify", "--anchor", head.stdout.strip()], tmp_path, admin_env).returncode == 0
    typo = run(["agent-admin", "audit", "verify", "--anchor", "9"], tmp_path, admin_env)
    assert "rewritten" not in typo.stdout + typo.stderr and typo.returncode == 2


def test_keys_add_on_a_read_only_keys_volume_points_to_keys_init(
    admin_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # agent-api mounts the keys volume read-only; root ignores file modes, so the refusal is simulated at the
    # one place the keys file is written.
    def read_only(*_: object) -> None:
        raise OSError(errno.EROFS, "Read-only file system")

    for name, value in admin_env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr("agent.security.auth.write_keys", read_only)
    get_settings.cache_clear()
    err = io.StringIO()
    with redirect_stderr(err), redirect_stdout(io.StringIO()):
        code = admin.main(["keys", "add", "bob", "--role", "support"])
    get_settings.cache_clear()
    assert code == 2
    assert err.getvalue().count("\n") == 1
    assert "Read-only file system" in err.getvalue() and "docker compose run --rm keys-init" in err.getvalue()


def test_agent_eval_names_a_401_and_fails_when_every_request_failed(
    fake_ollama: FakeOllama, mcp_server: McpServer, tmp_path: Path
) -> None:
    port = free_port()
    keys = tmp_path / "keys.yaml"
    keys.write_text("keys: []\n")
    env = agent_env(fake_ollama.url, mcp_server, port, AGENT_AUTH="api_key", AGENT_KEYS_FILE=str(keys))
    url = f"http://127.0.0.1:{port}"
    with running(["agent-api"], env=env, ready_url=f"{url}/healthz"):
        refused = run(["agent-eval", "run", "--base-url", f"{url}/v1", "--api-key", "wrong", *EVAL_SET], tmp_path)
    assert_one_line_usage_error(refused, "HTTP 401", "--api-key")
    assert "cannot reach" not in refused.stderr

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    dead_ollama = f"http://127.0.0.1:{free_port()}"
    with running(["agent-api"], env=agent_env(dead_ollama, mcp_server, port), ready_url=f"{url}/healthz"):
        failed = run(
            ["agent-eval", "run", "--base-url", f"{url}/v1", "--model", "qwen3:4b", *EVAL_SET, "--out", str(tmp_path)],
            tmp_path,
        )
    assert_one_line_usage_error(failed, "every one of the 1 requests", "not the model")
