"""The MCP sandbox holds: non-root, read-only, no capabilities, no route out; internals stay unreachable.

"No egress" is proved only against containers this test starts (never another address): a canary HTTP server on
the published `edge` network. Addresses are container IPs, never names: on an engine without the
CVE-2024-29018 fix, an unknown name would be forwarded to the host's resolvers.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.e2e.stack import Stack, run
from tests.support.procs import wait_until

pytestmark = pytest.mark.e2e

CANARY_PORT = 8080
# Exit 0 when a TCP connection to argv[1]:argv[2] succeeds within 3 s, 1 otherwise.
CONNECT = (
    "import socket, sys\n"
    "try:\n    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=3).close()\n"
    "except OSError as exc:\n    print(exc); sys.exit(1)\n"
)


@pytest.fixture(scope="module")
def canary(stack: Stack) -> Iterator[str]:
    """A tiny HTTP server on the edge network; yields its IP there."""
    name = f"{stack.project}-canary"
    run(
        [
            "docker",
            "run",
            "-d",
            "--rm",
            "--name",
            name,
            "--network",
            f"{stack.project}_edge",
            "--read-only",
            "--cap-drop",
            "ALL",
            "--user",
            "65534:65534",
            stack.env["PYTHON_IMAGE"],
            "python3",
            "-m",
            "http.server",
            str(CANARY_PORT),
            "--bind",
            "0.0.0.0",
            "--directory",
            "/",
        ]
    )
    try:
        ip = run(
            ["docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", name]
        ).stdout.strip()
        wait_until(lambda: connects(stack, "agent-api", ip, CANARY_PORT), timeout=20, what="canary up")
        yield ip
    finally:
        run(["docker", "rm", "-f", name], check=False)


def connects(stack: Stack, service: str, host: str, port: int) -> bool:
    return stack.exec(service, "python3", "-c", CONNECT, host, str(port), check=False).returncode == 0


def test_mcp_server_runs_unprivileged_on_a_read_only_root(stack: Stack) -> None:
    info = stack.inspect("mcp-server")
    assert info["Config"]["User"] == "10001:10001"
    assert info["HostConfig"]["ReadonlyRootfs"] is True
    assert info["HostConfig"]["CapDrop"] == ["ALL"] and not info["HostConfig"]["CapAdd"]
    assert "no-new-privileges:true" in info["HostConfig"]["SecurityOpt"]
    assert not info["HostConfig"]["Privileged"]
    assert not any("docker.sock" in m.get("Source", "") for m in info["Mounts"])
    assert stack.exec("mcp-server", "id", "-u").stdout.strip() == "10001"
    status = stack.exec("mcp-server", "cat", "/proc/self/status").stdout
    caps = {line.split(":")[0]: line.split()[1] for line in status.splitlines() if line.startswith("Cap")}
    assert int(caps["CapEff"], 16) == 0 and int(caps["CapBnd"], 16) == 0
    assert stack.exec("mcp-server", "touch", "/opt/x", check=False).returncode != 0


def test_mcp_server_has_no_route_out(stack: Stack) -> None:
    """Every network of mcp-server is internal: no NAT out of its subnets, and packets leaving them drop.

    (Engines before 25 still give an internal network's containers a default route to the bridge; the
    bridge forwards nothing off the subnet, which the canary test below shows from the inside.)
    """
    networks = stack.inspect("mcp-server")["NetworkSettings"]["Networks"]
    assert set(networks) == {f"{stack.project}_tools", f"{stack.project}_monitoring"}
    nat = run(["iptables", "-t", "nat", "-S", "POSTROUTING"]).stdout
    rules = run(["iptables", "-S", "DOCKER-ISOLATION-STAGE-1"]).stdout
    for name in networks:
        subnet = run(["docker", "network", "inspect", "-f", "{{range .IPAM.Config}}{{.Subnet}}{{end}}", name])
        cidr = subnet.stdout.strip()
        assert cidr and f"-s {cidr}" not in nat, f"{name} ({cidr}) is masqueraded: it has a way out"
        assert f"! -d {cidr}" in rules, f"no rule drops packets leaving {name} ({cidr})"


def test_mcp_server_cannot_reach_a_canary_the_api_reaches(stack: Stack, canary: str) -> None:
    assert connects(stack, "agent-api", canary, CANARY_PORT)
    assert not connects(stack, "mcp-server", canary, CANARY_PORT)


def test_redis_and_ollama_are_not_reachable_from_the_published_side(stack: Stack, canary: str) -> None:
    name = f"{stack.project}-canary"
    for service, network, port in (("redis", "queue", 6379), ("ollama", "gpu", 11434)):
        ip = stack.ip(service, network)
        assert connects(stack, "agent-worker", ip, port), f"{service} should answer its own network"
        probe = run(["docker", "exec", name, "python3", "-c", CONNECT, ip, str(port)], check=False)
        assert probe.returncode == 1, f"{service} reachable from the edge network: {probe.stdout}"
    assert not connects(stack, "mcp-server", stack.ip("redis", "queue"), 6379)


def test_internal_networks_are_internal(stack: Stack) -> None:
    for network in ("tools", "queue", "gpu", "monitoring"):
        flag = run(["docker", "network", "inspect", "-f", "{{.Internal}}", f"{stack.project}_{network}"])
        assert flag.stdout.strip() == "true", network
