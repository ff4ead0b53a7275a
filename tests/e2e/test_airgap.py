"""Air-gapped install: bundle the stack, wipe its images, install from files alone, get a chat answer.

The local stand-ins replace the public images (scripts/airgap-bundle --images-from e2e) and a tiny
fake model in Ollama's real layout replaces the weights. Every docker call of the install goes through
a shim that records it and refuses pull, build and push, so the install provably needs no registry.
This module runs before the shared stack starts (file order): it removes and reloads the images that
stack uses, and `docker rmi` refuses, rather than breaks, an image a running container holds.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tarfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.e2e.stack import REPO, Stack, printed_key, run

pytestmark = pytest.mark.e2e

MODEL = "qwen3:4b"
SHIM = """#!/bin/sh
echo "$*" >> "$DOCKER_CALL_LOG"
case " $* " in *" pull "*|*" build "*|*" push "*) echo "docker shim: '$*' refused: air-gapped" >&2; exit 97 ;; esac
exec {real} "$@"
"""


def fake_model(root: Path) -> dict[str, str]:
    """A model in Ollama's on-disk layout (manifest + sha256-named blobs); returns {relative path: sha256}."""

    def blob(data: bytes, media_type: str) -> dict[str, object]:
        digest = "sha256:" + hashlib.sha256(data).hexdigest()
        path = root / "blobs" / digest.replace(":", "-")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return {"mediaType": media_type, "digest": digest, "size": len(data)}

    config = blob(b'{"model_format":"gguf","model_family":"qwen3"}', "application/vnd.docker.container.image.v1+json")
    layers = [
        blob(b"GGUF" + os.urandom(256 * 1024), "application/vnd.ollama.image.model"),
        blob(b"{{ .Prompt }}", "application/vnd.ollama.image.template"),
        blob(b'{"temperature":0}', "application/vnd.ollama.image.params"),
    ]
    manifest = root / "manifests/registry.ollama.ai/library/qwen3/4b"
    manifest.parent.mkdir(parents=True)
    media = "application/vnd.docker.distribution.manifest.v2+json"
    manifest.write_text(json.dumps({"schemaVersion": 2, "mediaType": media, "config": config, "layers": layers}))
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*") if p.is_file()
    }


@pytest.fixture(scope="module")
def airgap(built: Stack, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """One bundle (tar), the fake model's files, and a docker shim that logs calls and refuses pulls/builds."""
    tmp = tmp_path_factory.mktemp("airgap")
    models = fake_model(tmp / "models")
    out = tmp / "local-agent-e2e.tar"
    key = tmp / "operator"  # the operator's signing key, made as docs/airgap.md says
    run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "operator", "-f", str(key)])
    signers = tmp / "allowed_signers"
    signers.write_text(f'operator namespaces="local-agent-bundle" {key.with_suffix(".pub").read_text()}')
    cmd = [str(REPO / "scripts/airgap-bundle"), "--images-from", "e2e", "--models-dir", str(tmp / "models")]
    run([*cmd, "--models", MODEL, "--no-build", "--sign-key", str(key), "--out", str(out)], env=built.env, timeout=600)
    shim = tmp / "bin/docker"
    shim.parent.mkdir()
    shim.write_text(SHIM.format(real=shutil.which("docker")))
    shim.chmod(0o755)
    return {"bundle": out, "models": models, "bin": shim.parent, "tmp": tmp, "signers": signers}


def install(
    airgap: dict[str, object], bundle: Path, site: Path, project: str
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    log = Path(str(airgap["tmp"])) / f"calls-{uuid.uuid4().hex[:6]}.log"
    env = {"PATH": f"{airgap['bin']}:{os.environ['PATH']}", "DOCKER_CALL_LOG": str(log), "AIRGAP_WAIT": "240"}
    cmd = [str(REPO / "scripts/airgap-install"), str(bundle), "--dir", str(site), "--project", project]
    cmd += ["--allowed-signers", str(airgap["signers"])]
    proc = run(cmd, env=env, check=False, timeout=600)
    return proc, log.read_text().splitlines() if log.exists() else []


def manifest_images(bundle: Path) -> dict[str, str]:
    with tarfile.open(bundle) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/MANIFEST"))
        text = tar.extractfile(member).read().decode()  # type: ignore[union-attr]
    return {line.split()[1]: line.split()[2] for line in text.splitlines() if line.startswith("image ")}


def corrupted_copy(bundle: Path, dest: Path, member_suffix: str) -> Path:
    """A copy of the bundle with one byte flipped inside one member's data (the tar itself stays valid)."""
    shutil.copyfile(bundle, dest)
    with tarfile.open(dest) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith(member_suffix))
    with dest.open("r+b") as f:
        f.seek(member.offset_data + member.size // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    return dest


@pytest.mark.parametrize("damage", ["images/images.tar.zst", "docker-compose.yml", "truncated"])
def test_a_damaged_bundle_is_refused_by_name_before_any_image_is_loaded(
    airgap: dict[str, object], tmp_path: Path, damage: str
) -> None:
    bundle = Path(str(airgap["bundle"]))
    if damage == "truncated":
        bad = tmp_path / "bad.tar"
        with bundle.open("rb") as src, bad.open("wb") as dst:
            dst.write(src.read(bundle.stat().st_size * 2 // 3))
        named = "images/images.tar.zst"
    else:
        bad, named = corrupted_copy(bundle, tmp_path / "bad.tar", damage), damage
    proc, calls = install(airgap, bad, tmp_path / "site", f"la-airgap-bad-{uuid.uuid4().hex[:6]}")
    assert proc.returncode == 2, proc.stderr
    assert "REFUSED" in proc.stderr and named in proc.stderr, proc.stderr
    assert all(c == "compose version" for c in calls), calls  # no load, no volume, no container: nothing
    assert not (tmp_path / "site").exists()


@pytest.fixture(scope="module")
def installed(airgap: dict[str, object]) -> Iterator[tuple[Path, str, list[str]]]:
    """Wipe the bundle's images, then install into a fresh site folder as a fresh project; always removed."""
    bundle = Path(str(airgap["bundle"]))
    images = manifest_images(bundle)
    run(["docker", "rmi", *images])  # only the images this bundle carries; refused if a container uses one
    for ref in images:
        assert run(["docker", "image", "inspect", ref], check=False).returncode != 0, ref
    site, project = Path(str(airgap["tmp"])) / "site", f"la-airgap-{uuid.uuid4().hex[:8]}"
    try:
        proc, calls = install(airgap, bundle, site, project)
        assert proc.returncode == 0, proc.stderr[-4000:]
        yield site, project, calls
    finally:
        if site.exists():
            subprocess.run(["docker", "compose", "down", "-v", "-t", "5"], cwd=site, capture_output=True, timeout=300)
        for ref, image_id in images.items():  # the rest of the e2e layer runs on these images
            assert run(["docker", "image", "inspect", "-f", "{{.Id}}", ref]).stdout.strip() == image_id


def site_compose(site: Path, *args: str) -> str:
    """`docker compose ARGS` in the site folder, as an operator there (its .env names the project and files)."""
    proc = subprocess.run(["docker", "compose", *args], cwd=site, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_install_from_the_bundle_alone_answers_a_chat(installed: tuple[Path, str, list[str]]) -> None:
    site, _project, calls = installed
    ups = [c for c in calls if c.startswith("compose") and " up " in f"{c} "]
    assert ups and all("--pull never" in c and "--no-build" in c for c in ups), ups
    assert any(c.split()[0] == "load" for c in calls), calls
    key = printed_key(site_compose(site, "logs", "--no-color", "--no-log-prefix", "keys-init"))
    api = "http://" + site_compose(site, "port", "agent-api", "8000").strip()
    body = {"model": MODEL, "stream": False, "messages": [{"role": "user", "content": "hello"}]}
    reply = httpx.post(f"{api}/v1/chat/completions", json=body, headers={"Authorization": f"Bearer {key}"}, timeout=60)
    assert reply.status_code == 200, reply.text
    assert reply.json()["choices"][0]["message"]["content"].strip()


def test_the_models_arrive_intact_and_ollama_pull_finds_them(
    built: Stack, airgap: dict[str, object], installed: tuple[Path, str, list[str]]
) -> None:
    site, project, _calls = installed
    volume = f"{project}_ollama-models"
    listing = run(
        [
            "docker",
            "run",
            "--rm",
            "--network",
            "none",
            "--user",
            "0:0",
            "-v",
            f"{volume}:/m:ro",
            "--entrypoint",
            "sh",
            built.env["AGENT_IMAGE"],
            "-c",
            "cd /m/models && find . -type f | sort | xargs sha256sum",
        ]
    ).stdout
    arrived = {path.removeprefix("./"): digest for digest, path in (line.split() for line in listing.splitlines())}
    assert arrived == airgap["models"]
    assert f"ollama-pull: {MODEL} present" in site_compose(site, "logs", "--no-color", "ollama-pull")
    env = (site / ".env").read_text()
    assert "OLLAMA_PULL_OFFLINE=true" in env and f"COMPOSE_PROJECT_NAME={project}" in env


def test_installing_the_same_bundle_again_changes_nothing(
    airgap: dict[str, object], installed: tuple[Path, str, list[str]]
) -> None:
    site, project, _calls = installed
    before = site_compose(site, "ps", "-a", "-q"), snapshot(site)
    proc, calls = install(airgap, Path(str(airgap["bundle"])), site, project)
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert "every image is already loaded" in proc.stderr and "0 files changed" in proc.stderr
    assert not any(c.split()[0] == "load" for c in calls)
    assert (site_compose(site, "ps", "-a", "-q"), snapshot(site)) == before


def snapshot(site: Path) -> dict[str, str]:
    return {
        str(p.relative_to(site)): hashlib.sha256(p.read_bytes()).hexdigest() for p in site.rglob("*") if p.is_file()
    }
