"""Small statistics helpers shared by the benchmarks."""

from __future__ import annotations

import os
import statistics
from importlib.metadata import PackageNotFoundError, distributions
from pathlib import Path


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def summary_ms(values: list[float]) -> str:
    ms = [v * 1000 for v in values]
    return f"median {statistics.median(ms):7.2f} ms   p99 {pct(ms, 99):7.2f} ms   (n={len(ms)})"


def parents() -> dict[int, int]:
    """Every live process's parent, from /proc: pid → ppid."""
    found: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            found[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except OSError:  # the process ended while we looked
            continue
    return found


def tree_pids(pid: int) -> set[int]:
    """A process and every live process under it: agent-api's work and most of its memory are in its
    supervisor's child."""
    links = parents()
    tree, grew = {pid}, True
    while grew:
        below = {child for child, parent in links.items() if parent in tree} - tree
        tree |= below
        grew = bool(below)
    return tree


def cpu_seconds(pid: int) -> float:
    """User + system CPU of one process so far (clock ticks of /proc/PID/stat); 0 once it has ended."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and of every live process under it: agent-api's work happens in its
    supervisor's child, so the supervisor's own figure alone was ~0."""
    return sum(cpu_seconds(p) for p in tree_pids(pid))


def _proc_mb(pid: int, file: str, field: str) -> float:
    """A kB field of /proc/PID/<file> (`VmRSS:` of status, `Pss:` of smaps_rollup), in MB; 0 once it has ended."""
    try:
        text = Path(f"/proc/{pid}/{file}").read_text()
    except OSError:
        return 0.0
    return next((int(line.split()[1]) for line in text.splitlines() if line.startswith(field)), 0) / 1024


def rss_mb(pid: int) -> float:
    """Resident memory of one process (VmRSS), in MB; 0 once it has ended."""
    return _proc_mb(pid, "status", "VmRSS:")


def tree_rss_mb(pid: int) -> float:
    """Resident memory of a process and of every live process under it, in MB (pages they share, such as a
    shared library's, counted in each, as `ps` counts them)."""
    return sum(rss_mb(p) for p in tree_pids(pid))


def pss_mb(pid: int) -> float:
    """Proportional set size of one process (Pss, /proc/PID/smaps_rollup), in MB: its private pages, plus each page
    it shares with N processes counted as 1/N (a supervisor's interpreter, a library every Python maps); 0 once it has
    ended. Summed over processes, what they cost the machine together, where RSS counts a shared page in each."""
    return _proc_mb(pid, "smaps_rollup", "Pss:")


def tree_pss_mb(pid: int) -> float:
    """Proportional set size of a process and of every live process under it, in MB (see pss_mb)."""
    return sum(pss_mb(p) for p in tree_pids(pid))


def venv_version(venv: str | Path, dist: str) -> str:
    """The version of `dist` installed in another venv (a peer's), read from its metadata, never typed by hand."""
    for site in Path(venv).glob("lib/python*/site-packages"):
        for found in distributions(path=[str(site)]):
            if found.metadata["Name"].lower().replace("_", "-") == dist.lower():
                return found.version
    raise PackageNotFoundError(dist)
