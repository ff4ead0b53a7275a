"""Several "hosts" on one machine for tests: a network namespace per host, all on one bridge, reachable from here.

Each host is a namespace with its own loopback and one NIC (`eth0`, an address in a private /24), plugged
into a bridge that lives in a namespace of its own (so the machine's firewall rules, Docker's among them,
never see the traffic). This test process reaches every host through one more veth on that bridge. A host
"dies" when its bridge port goes down: its processes keep running but nothing reaches them, nor they anything, which
is what a machine that lost power or its cable looks like to the others. Needs root and iproute2's `ip`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import random
import secrets
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

IP = shutil.which("ip") or "/usr/sbin/ip"


def unavailable() -> str | None:
    """Why this machine cannot build the namespaces, or None when it can."""
    if os.geteuid() != 0:
        return "network namespaces need root (CI runs as root)"
    if not os.path.exists(IP):
        return "iproute2's `ip` is missing (scripts/services installs it)"
    return None


def ip(*args: str) -> None:
    done = subprocess.run([IP, *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {done.stderr.strip()}")


@dataclass(frozen=True)
class Host:
    """One namespace: `address` is its NIC's address, `run(cmd)` the command line that runs cmd inside it."""

    name: str
    namespace: str
    address: str
    lan: str  # the bridge's namespace

    def run(self, *cmd: str) -> list[str]:
        return [IP, "netns", "exec", self.namespace, *cmd]

    def cut_off(self) -> None:
        """The host's cable is pulled: its bridge port goes down, so no packet gets in or out from now on.

        Its processes keep running and are not told (their sends vanish on a NIC without carrier), which is
        what the other hosts see of a machine that lost power."""
        ip("-n", self.lan, "link", "set", f"p-{self.name}", "down")

    def reconnect(self) -> None:
        """The cable is back."""
        ip("-n", self.lan, "link", "set", f"p-{self.name}", "up")


def _free_subnet() -> ipaddress.IPv4Network:
    used = subprocess.run([IP, "-4", "route", "show", "table", "all"], capture_output=True, text=True).stdout
    for _ in range(100):
        net = ipaddress.IPv4Network(f"10.{random.randint(200, 250)}.{random.randint(0, 255)}.0/24")
        if str(net.network_address).rsplit(".", 1)[0] + "." not in used:
            return net
    raise RuntimeError("no free 10.x.y.0/24 for the test network")


@contextlib.contextmanager
def hosts(*names: str) -> Iterator[dict[str, Host]]:
    """Namespaces named after `names` on one bridge, this process at the subnet's .1; removed afterwards."""
    tag = secrets.token_hex(3)
    net = _free_subnet()
    addresses = [str(a) for a in net.hosts()]
    lan, root_nic = f"la-{tag}-lan", f"la{tag}r"
    made = [lan]
    try:
        ip("netns", "add", lan)
        ip("-n", lan, "link", "add", "br0", "type", "bridge")
        ip("-n", lan, "link", "set", "br0", "up")
        ip("link", "add", root_nic, "type", "veth", "peer", "name", "p-here", "netns", lan)
        ip("addr", "add", f"{addresses[0]}/{net.prefixlen}", "dev", root_nic)
        ip("link", "set", root_nic, "up")
        ip("-n", lan, "link", "set", "p-here", "master", "br0", "up")
        result = {}
        for index, name in enumerate(names, start=1):
            host = Host(name, f"la-{tag}-{name}", addresses[index], lan)
            ip("netns", "add", host.namespace)
            made.append(host.namespace)
            ip("-n", lan, "link", "add", f"p-{name}", "type", "veth", "peer", "name", "eth0", "netns", host.namespace)
            ip("-n", lan, "link", "set", f"p-{name}", "master", "br0", "up")
            ip("-n", host.namespace, "addr", "add", f"{host.address}/{net.prefixlen}", "dev", "eth0")
            ip("-n", host.namespace, "link", "set", "eth0", "up")
            ip("-n", host.namespace, "link", "set", "lo", "up")
            result[name] = host
        yield result
    finally:
        for namespace in reversed(made):  # deleting a namespace deletes its veth ends, and so their peers
            with contextlib.suppress(RuntimeError):
                ip("netns", "del", namespace)
        with contextlib.suppress(RuntimeError):
            ip("link", "del", root_nic)
