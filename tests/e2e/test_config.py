"""The compose files, Prometheus rules and Grafana provisioning are valid and keep the hardening promises."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.stack import REPO, Stack, run

pytestmark = pytest.mark.e2e

OURS = ["agent-api", "agent-worker", "mcp-server"]


def config(*files: str, profiles: str = "", env: dict[str, str] | None = None) -> dict[str, Any]:
    args = [arg for name in files for arg in ("-f", name)]
    out = run(
        ["docker", "compose", "-p", "la-config", *args, "config", "--format", "json"],
        env={"COMPOSE_BAKE": "false", "COMPOSE_PROFILES": profiles, **(env or {})},
    ).stdout
    data: dict[str, Any] = json.loads(out)
    return data


@pytest.fixture(scope="module")
def base(docker_ready: None) -> dict[str, Any]:
    return config("docker-compose.yml")


def test_base_reserves_the_gpu_and_the_cpu_override_drops_it(base: dict[str, Any]) -> None:
    devices = base["services"]["ollama"]["deploy"]["resources"]["reservations"]["devices"]
    assert devices[0]["driver"] == "nvidia" and devices[0]["capabilities"] == ["gpu"]
    cpu = config("docker-compose.yml", "compose.cpu.yml")
    assert "deploy" not in cpu["services"]["ollama"]
    assert cpu["services"].keys() == base["services"].keys()


def test_our_containers_are_hardened(base: dict[str, Any]) -> None:
    for name in OURS:
        svc = base["services"][name]
        assert svc["user"] == "10001:10001", name
        assert svc["read_only"] is True, name
        assert svc["cap_drop"] == ["ALL"] and "cap_add" not in svc, name
        assert "no-new-privileges:true" in svc["security_opt"], name
        assert any(t.startswith("/tmp") for t in svc["tmpfs"]), name
        assert svc["pids_limit"] > 0 and svc["mem_limit"], name
        assert svc["healthcheck"]["test"][0] == "CMD", name
        assert svc["logging"]["driver"] == "json-file" and svc["logging"]["options"]["max-size"], name
        assert "container_name" not in svc, name
    for name in ("agent-api", "agent-worker"):
        assert base["services"][name]["stop_grace_period"] == "2m30s"


def test_only_the_api_and_grafana_publish_ports(base: dict[str, Any]) -> None:
    published = {name for name, svc in base["services"].items() if svc.get("ports")}
    assert published == {"agent-api", "grafana"}
    assert [p["target"] for p in base["services"]["agent-api"]["ports"]] == [8000]


def test_sandboxed_services_sit_on_internal_networks_only(base: dict[str, Any]) -> None:
    internal = {name for name, net in base["networks"].items() if net.get("internal")}
    for name in ("mcp-server", "ollama", "redis", "agent-worker"):
        assert set(base["services"][name]["networks"]) <= internal, name
    assert set(base["services"]["mcp-server"]["networks"]) == {"tools", "monitoring"}
    tools_members = {n for n, s in base["services"].items() if "tools" in s.get("networks", {})}
    assert tools_members == {"agent-api", "mcp-server"}
    pull_net = base["services"]["ollama-pull"]["networks"]
    assert [n for n in pull_net if n not in internal] == ["pull"]


def test_ollama_settings_follow_the_design(base: dict[str, Any]) -> None:
    env = base["services"]["ollama"]["environment"]
    assert env["OLLAMA_NUM_PARALLEL"] == "1" and env["OLLAMA_KEEP_ALIVE"] == "-1"
    assert env["OLLAMA_NOPRUNE"] == "1" and env["OLLAMA_NO_CLOUD"] == "1"
    assert int(env["OLLAMA_CONTEXT_LENGTH"]) > 0 and env["OLLAMA_MAX_LOADED_MODELS"] == "1"
    assert base["services"]["ollama"]["healthcheck"]["test"] == ["CMD", "ollama", "list"]
    for name, svc in base["services"].items():
        if "build" not in svc:
            assert ":" in svc["image"] and not svc["image"].endswith(":latest"), name


def test_policy_override_mounts_one_file_read_only_into_api_keys_init_and_mcp() -> None:
    merged = config("docker-compose.yml", "compose.policy.yml")["services"]
    env_names = {"agent-api": "AGENT_POLICY_FILE", "keys-init": "AGENT_POLICY_FILE", "mcp-server": "MCP_POLICY_FILE"}
    for name, variable in env_names.items():
        target = merged[name]["environment"][variable]
        mounts = [v for v in merged[name]["volumes"] if v["target"] == target]
        assert len(mounts) == 1 and mounts[0]["read_only"] is True, name
        assert mounts[0]["source"].endswith("/config/policy.yaml"), name
    assert merged["mcp-server"]["environment"]["MCP_REQUIRE_IDENTITY"] == "true"


def test_no_secret_is_a_constant_in_the_repository(base: dict[str, Any]) -> None:
    for svc in base["services"].values():
        for key, value in (svc.get("environment") or {}).items():
            if any(word in key for word in ("TOKEN", "PASSWORD")) and not key.endswith("_FILE"):
                assert not value, f"{key} has a default value in docker-compose.yml"


def test_every_compose_variable_is_documented() -> None:
    text = "".join(p.read_text() for p in [REPO / "docker-compose.yml", *sorted(REPO.glob("compose.*.yml"))])
    used = set(re.findall(r"\$\{([A-Z0-9_]+)", text))
    documented = set(re.findall(r"^#?\s*([A-Z0-9_]+)=", (REPO / ".env.example").read_text(), re.M))
    assert used <= documented, f"not in .env.example: {sorted(used - documented)}"


WORKER_HOST_ENV = {"REDIS_URL": "rediss://main-host:6380/0", "WORKER_HOST_NAME": "gpu-host-2"}


def test_a_worker_host_runs_ollama_and_a_hardened_worker_joining_the_main_servers_redis(docker_ready: None) -> None:
    merged = config("compose.worker-host.yml", env=WORKER_HOST_ENV)
    assert merged["services"].keys() == {"ollama", "ollama-pull", "agent-worker"}  # no API, no Redis of its own
    worker = merged["services"]["agent-worker"]
    env = worker["environment"]
    assert env["REDIS_URL"] == "rediss://main-host:6380/0" and env["GPU_ID"] == "gpu-host-2-gpu0"
    assert env["REDIS_PASSWORD_FILE"] == "/run/local-agent/secrets/redis-password"
    assert env["REDIS_USERNAME"] == "worker-gpu-host-2"  # its own Redis user, revoked alone (scripts/worker-host)
    assert [(v["target"], v["read_only"]) for v in worker["volumes"]] == [("/run/local-agent/secrets", True)]
    assert [p["target"] for p in worker["ports"]] == [9101]  # Prometheus on the main server scrapes it
    assert worker["user"] == "10001:10001" and worker["read_only"] is True and worker["cap_drop"] == ["ALL"]
    assert set(worker["depends_on"]) == {"ollama", "ollama-pull"}
    assert merged["networks"]["gpu"].get("internal") is True and merged["services"]["ollama"]["networks"] == {
        "gpu": None
    }
    for missing in WORKER_HOST_ENV:
        refused = run(
            ["docker", "compose", "-p", "la-config", "-f", "compose.worker-host.yml", "config", "-q"],
            env={**{k: v for k, v in WORKER_HOST_ENV.items() if k != missing}, missing: ""},
            check=False,
        )
        assert refused.returncode != 0 and missing in refused.stderr, refused.stderr


def test_the_queue_host_publishes_redis_over_tls_only_and_lets_prometheus_reach_worker_hosts(
    base: dict[str, Any],
) -> None:
    merged = config("docker-compose.yml", "compose.queue-host.yml")
    redis = merged["services"]["redis"]
    assert [p["target"] for p in redis["ports"]] == [6380]
    command = redis["command"]
    assert command[command.index("--tls-port") + 1] == "6380" and "--tls-cert-file" in command
    assert not merged["networks"]["queue-uplink"].get("internal") and merged["networks"]["queue"]["internal"]
    assert "scrape-uplink" in merged["services"]["prometheus"]["networks"]
    assert merged["services"].keys() == base["services"].keys()


def promtool(stack: Stack, *args: str) -> str:
    """Run Prometheus's own checker from the stack's Prometheus image, offline, on the repo's config."""
    mount = f"{REPO / 'infra/prometheus'}:/etc/prometheus:ro"
    docker = ["docker", "run", "--rm", "--network", "none", "-v", mount, "--entrypoint", "promtool"]
    image = f"local-agent/prometheus-debian:{stack.env['STANDIN_TAG']}"
    return str(run([*docker, image, "check", *args]).stdout)


def test_promtool_accepts_the_config_and_rules(built: Stack) -> None:
    out = promtool(built, "config", "/etc/prometheus/prometheus.yml")
    assert "SUCCESS" in out and "rule files found" in out
    promtool(built, "rules", "/etc/prometheus/alerts.yml")
    rules = yaml.safe_load((REPO / "infra/prometheus/alerts.yml").read_text())["groups"][0]["rules"]
    names = {r["alert"] for r in rules}
    assert {
        "AgentQueueBackingUp",
        "AgentRoundSlow",
        "AgentWorkerDown",
        "OllamaDown",
        "AgentErrorRate",
        "AgentAuditWriteFailing",
        "AgentAnswersUngrounded",
    } <= names


def dashboard() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REPO / "infra/grafana/dashboards/local-agent-ops.json").read_text())
    return data


def test_grafana_provisioning_points_at_the_dashboard_and_datasource() -> None:
    prov = REPO / "infra/grafana/provisioning"
    ds = yaml.safe_load((prov / "datasources/prometheus.yml").read_text())["datasources"][0]
    assert ds["type"] == "prometheus" and ds["url"] == "http://prometheus:9090"
    provider = yaml.safe_load((prov / "dashboards/local-agent.yml").read_text())["providers"][0]
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    mounts = compose["services"]["grafana"]["volumes"]
    assert f"./infra/grafana/dashboards:{provider['options']['path']}:ro" in mounts
    dash = dashboard()
    panels = [p for p in dash["panels"] if p["type"] != "row"]
    assert len({p["id"] for p in dash["panels"]}) == len(dash["panels"])
    for panel in panels:
        assert panel["datasource"]["uid"] == ds["uid"], panel["title"]
        assert panel["targets"] and all(t["expr"].strip() for t in panel["targets"]), panel["title"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0, panel["title"]


def test_dashboard_covers_the_design_metrics() -> None:
    exprs = " ".join(t["expr"] for p in dashboard()["panels"] for t in p.get("targets", []))
    for metric in (
        "agent_request_duration_seconds",
        "agent_round_duration_seconds",
        "agent_queue_depth",
        "agent_queue_wait_seconds",
        "agent_llm_tokens_total",
        "agent_tool_calls_total",
        "agent_gpu_busy",
        "agent_llm_time_to_first_token_seconds",
        "agent_rejected_total",
        "mcp_tool_calls_total",
        "agent_grounding_checks_total",
        "agent_ungrounded_figures_total",
        "agent_client_tasks_total",
    ):
        assert metric in exprs, metric
    assert "by (le, round)" in exprs  # per-round percentiles, one line per round


def panel_queries() -> list[tuple[str, str]]:
    """Every panel query, with Grafana's $__rate_interval replaced as Grafana would (4 x scrape)."""
    return [
        (p["title"], t["expr"].replace("$__rate_interval", "1m"))
        for p in dashboard()["panels"]
        for t in p.get("targets", [])
    ]


def test_webui_profile_is_offline_pinned_closed_and_names_users_in_signed_tokens(base: dict[str, Any]) -> None:
    assert "open-webui" not in base["services"]  # optional: only with the profile
    services = config("docker-compose.yml", profiles="webui")["services"]
    webui, key, api = services["open-webui"], services["webui-key"], services["agent-api"]
    assert re.fullmatch(r".+:v\d+\.\d+\.\d+", webui["image"])
    env = webui["environment"]
    assert env["ENABLE_FORWARD_USER_INFO_HEADERS"] == "true"
    # An OpenAI connection only: on it the agent's stream marks a stopped answer (docs/open-webui.md)
    connection = {"ENABLE_OPENAI_API": "true", "OPENAI_API_BASE_URLS": "http://agent-api:8000/v1"}
    assert connection.items() <= env.items() and env["ENABLE_OLLAMA_API"] == "false"
    offline = {"OFFLINE_MODE": "true", "HF_HUB_OFFLINE": "1", "ENABLE_VERSION_UPDATE_CHECK": "false"}
    assert offline.items() <= env.items() and env["ANONYMIZED_TELEMETRY"] == "false"
    people = {"ENABLE_SIGNUP": "false", "BYPASS_MODEL_ACCESS_CONTROL": "true", "ENABLE_PLUGINS": "false"}
    assert people.items() <= env.items() and env["ENABLE_PERSISTENT_CONFIG"] == "false"
    assert not any(("KEY" in n or "SECRET" in n or "PASSWORD" in n) and v for n, v in env.items())  # from volumes
    assert key["command"][:4] == ["agent-admin", "keys", "frontend", "openwebui"]
    mounts = {v["source"]: v for v in webui["volumes"] if v["type"] == "volume"}
    assert all(mounts[v]["read_only"] for v in ("webui-secret", "frontend-secret", "webui-admin-secret"))
    assert "webui-secret" not in str(api["volumes"]) and "webui-admin-secret" not in str(api["volumes"])
    assert api["environment"]["FRONTEND_JWT_SECRET_FILE"] == "/run/local-agent/frontend/jwt_secret"
    assert [p["target"] for p in webui["ports"]] == [8080] and list(webui["networks"]) == ["edge"]


def test_webui_entrypoint_reads_the_secret_files_and_keeps_the_session_secret(
    base: dict[str, Any], tmp_path: Path
) -> None:
    """The profile's entrypoint script with its mounts moved into tmp dirs: it exports the key, the token secret
    and the admin password from the files, and the session secret it makes once on the data volume stays."""
    webui = config("docker-compose.yml", profiles="webui")["services"]["open-webui"]
    assert "/app/backend/data" in [v["target"] for v in webui["volumes"] if v["source"] == "open-webui-data"]
    script = next(v["source"] for v in webui["volumes"] if v["target"] == webui["entrypoint"][-1])
    files = {"webui/key": "frontend-key", "frontend/jwt_secret": "s" * 64, "webui-admin/password": "pw"}
    for name, value in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(value + "\n")
    env = {"LOCAL_AGENT_SECRETS": str(tmp_path), "DATA_DIR": str(tmp_path / "data"), "WEBUI_ADMIN_EMAIL": "a@x"}
    names = ("WEBUI_SECRET_KEY", "OPENAI_API_KEYS", "FORWARD_USER_INFO_HEADER_JWT_SECRET", "WEBUI_ADMIN_PASSWORD")
    show = "; ".join(f'echo "${name}"' for name in names)
    first, second = (run(["bash", script, "bash", "-c", show], env=env).stdout.splitlines() for _ in range(2))
    assert first == second and len(first[0]) >= 40 and first[1] == "frontend-key"
    assert first[2:] == ["s" * 64, "pw"]
    assert (tmp_path / "data/.webui_secret_key").stat().st_mode & 0o077 == 0
