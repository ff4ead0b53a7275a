"""The benches' own measuring helpers: CPU and memory over a whole process tree (bench-loop printed "API CPU 0.0
ms/round" reading agent-api's supervisor while its child did the work), and peers' versions read from their venvs."""

from __future__ import annotations

import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

from tests.bench.stats import pss_mb, rss_mb, tree_cpu_seconds, tree_pss_mb, tree_rss_mb, venv_version

BURN = "import time\nend = time.process_time() + 0.6\nwhile time.process_time() < end: pass\ntime.sleep(60)"
BURN_IN_CHILD = f"""
import subprocess, sys
child = subprocess.Popen([sys.executable, "-c", {BURN!r}])
print("started", flush=True)
child.wait()
"""


HOLD_IN_CHILD = """
import subprocess, sys
code = "held = b'x' * (64 * 2**20); print('held', flush=True); sys.stdin.read()"
child = subprocess.Popen([sys.executable, "-c", "import sys\\n" + code], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
print(child.stdout.readline().decode().strip(), flush=True)
sys.stdin.read()
"""


# 64 MB written, then a fork: parent and child share every one of those pages until one writes it.
SHARED_WITH_CHILD = """
import os, sys
held = b'x' * (64 * 2**20)
if os.fork() == 0:
    sys.stdin.read()
    os._exit(0)
print('forked', flush=True)
sys.stdin.read()
os.wait()
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


def test_the_memory_of_a_supervisors_child_is_counted_and_the_supervisors_own_stays_apart() -> None:
    parent = subprocess.Popen([sys.executable, "-c", HOLD_IN_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == b"held"
        assert tree_rss_mb(parent.pid) - rss_mb(parent.pid) >= 60  # the child's 64 MB, written
        assert rss_mb(parent.pid) < 60
    finally:
        parent.communicate(timeout=30)  # end of input: the child's, then the parent's read returns


def test_pages_a_child_shares_with_its_parent_count_once_in_pss_and_twice_in_rss() -> None:
    parent = subprocess.Popen([sys.executable, "-c", SHARED_WITH_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    try:
        assert parent.stdout is not None and parent.stdout.readline().strip() == b"forked"
        assert tree_rss_mb(parent.pid) >= 128  # the 64 MB in each
        assert 64 <= tree_pss_mb(parent.pid) < tree_rss_mb(parent.pid) - 50  # ... counted once between the two
        assert pss_mb(parent.pid) < rss_mb(parent.pid) - 25  # the parent's own share: about half of them
    finally:
        parent.communicate(timeout=30)
