"""bench-memory --modules: agent-api's app process's resident memory by top-level package, as it builds its app.

Run by the venv's own Python (`python -m tests.bench.import_rss`, environment from the caller). Every module's
import is measured in VmRSS before and after its body runs, less what the imports it made added, and summed per
top-level package: an estimate (the allocator grows in steps, and a package that loads a library first pays for
what the next one shares), but it finds who loads what. Then, in a second process, every library module the app
loaded imported with nothing of ours: what is left is the agent's own code and objects.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import importlib.machinery
import subprocess
import sys
from collections import defaultdict
from types import ModuleType
from typing import Any

OURS = ("agent", "agent_contract")


def rss_mb() -> float:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmRSS:")) / 1024


class Measured(importlib.abc.MetaPathFinder):
    """Wraps every module's loader so that running its body records the RSS it added, nested imports apart."""

    def __init__(self) -> None:
        self.own: defaultdict[str, float] = defaultdict(float)
        self.nested: list[float] = []

    def find_spec(
        self, name: str, path: Any, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is None:
                continue
            if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                self.wrap(spec.loader, name.split(".")[0])
            return spec
        return None

    def wrap(self, loader: Any, top: str) -> None:
        run = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            self.nested.append(0.0)
            before = rss_mb()
            try:
                run(module)
            finally:
                added, inner = rss_mb() - before, self.nested.pop()
                self.own[top] += added - inner
                if self.nested:
                    self.nested[-1] += added

        with contextlib.suppress(AttributeError):  # a loader that will not take it: counted towards its importer
            loader.exec_module = exec_module


def build_app() -> None:
    """What `agent-api`'s app process does before it serves (agent.__main__.serve)."""
    from agent.api.app import create_app, make_backend
    from agent.settings import get_settings
    from agent_contract.logs import configure

    settings = get_settings()
    configure(settings.log_level)
    create_app(settings, backend=make_backend(settings))
    import uvicorn  # noqa: F401  (imported by server.serve)


def libraries_alone(modules: list[str]) -> float:
    code = "import importlib, sys\nfor m in sys.argv[1:]:\n"
    code += (
        "    try: importlib.import_module(m)\n    except Exception: pass\n"  # a module that needs its importer first
    )
    code += "print(next(int(l.split()[1]) for l in open('/proc/self/status') if l.startswith('VmRSS:')) / 1024)"
    done = subprocess.run([sys.executable, "-c", code, *modules], capture_output=True, text=True, check=True)
    return float(done.stdout.strip())


def main() -> None:
    start = rss_mb()
    measured = Measured()
    sys.meta_path.insert(0, measured)
    build_app()
    sys.meta_path.remove(measured)
    total = rss_mb()
    libraries = [m for m in sys.modules if m.split(".")[0] not in (*OURS, "__main__", "__mp_main__", "tests")]
    alone = libraries_alone(libraries)
    print(f"agent-api's app process as built, direct mode: {total:.1f} MB (before building it: {start:.1f} MB)")
    print(f"  every library module it loads, imported with nothing of ours: {alone:.1f} MB")
    print("  RSS added while each top-level package's modules ran (estimates):")
    for top, mb in sorted(measured.own.items(), key=lambda item: -item[1])[:16]:
        print(f"    {top:28} {mb:5.1f} MB")


if __name__ == "__main__":
    main()
