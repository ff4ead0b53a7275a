"""The benches' own measuring helpers: CPU over a whole process tree (bench-loop printed "API CPU 0.0 ms/round"
reading agent-api's supervisor while its child did the work), and peers' versions read from their venvs."""

from __future__ import annotations

import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

from tests.bench.stats import tree_cpu_seconds, venv_version

BURN = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\ntime.sleep(60)"
BURN_IN_CHILD = f"""
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", {BURN!r}])
print("started", flush=True)
child.wait()
"""


def own_cpu_seconds(pid: int) -> float:
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_the_cpu_of_a_supervisors_child_is_counted() -> None:
    parent = subprocess.Popen([sys.executable, "-c", BURN_IN_CHILD], stdout=subprocess.PIPE, text=True)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == "started"
        deadline = time.monotonic() + 60
        while tree_cpu_seconds(parent.pid) - own_cpu_seconds(parent.pid) < 0.5:  # the child's burn, seen live
            assert time.monotonic() < deadline, "the child's CPU never showed in the tree's"
            time.sleep(0.05)
        assert own_cpu_seconds(parent.pid) < 0.5  # the parent alone (what bench-loop read) shows almost nothing
    finally:
        for proc in subprocess.run(["pgrep", "-P", str(parent.pid)], capture_output=True, text=True).stdout.split():
            subprocess.run(["kill", proc], check=False)
        parent.kill()
        parent.communicate()


def test_a_peers_version_is_read_from_its_venv() -> None:
    venv = Path(sys.prefix)
    assert venv_version(venv, "httpx") == version("httpx")
