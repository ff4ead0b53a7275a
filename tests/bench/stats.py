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


def tree_cpu_seconds(pid: int) -> float:
    """User + system CPU of a process and of every live process under it (/proc, clock ticks): agent-api's work
    happens in its supervisor's child, so the supervisor's own figure alone was ~0."""
    parents: dict[int, int] = {}
    ticks: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while we looked
            continue
        child = int(stat.parent.name)
        parents[child], ticks[child] = int(fields[1]), int(fields[11]) + int(fields[12])
    tree, grew = {pid}, True
    while grew:
        below = {child for child, parent in parents.items() if parent in tree} - tree
        tree |= below
        grew = bool(below)
    return sum(ticks.get(p, 0) for p in tree) / os.sysconf("SC_CLK_TCK")


def venv_version(venv: str | Path, dist: str) -> str:
    """The version of `dist` installed in another venv (a peer's), read from its metadata, never typed by hand."""
    for site in Path(venv).glob("lib/python*/site-packages"):
        for found in distributions(path=[str(site)]):
            if found.metadata["Name"].lower().replace("_", "-") == dist.lower():
                return found.version
    raise PackageNotFoundError(dist)
