"""Issue 36: the air-gapped bundle was unsigned: a tampered compose file with a recomputed MANIFEST passed
`verify`, and a listed setuid-root file passed too (`cp -p` as root would have installed it setuid). Now
scripts/airgap-install checks the MANIFEST's signature (ssh-keygen -Y, namespace local-agent-bundle) against the
operator's allowed signers before it unpacks anything else, and refuses setuid, setgid and special members: one
REFUSED line each, exit 2. These bundles are small and synthetic, laid out and signed as scripts/airgap-bundle
does (its whole path, Docker images included, runs in tests/e2e/test_airgap.py)."""

from __future__ import annotations

import hashlib
import subprocess
import tarfile
from pathlib import Path

import pytest

from tests.support.procs import REPO

NAMESPACE = "local-agent-bundle"


def keypair(where: Path, name: str) -> Path:
    key = where / name
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", str(key)], check=True)
    return key


def allowed(where: Path, key: Path) -> Path:
    signers = where / "allowed_signers"
    signers.write_text(f'operator namespaces="{NAMESPACE}" {key.with_suffix(".pub").read_text()}')
    return signers


def write_manifest(root: Path) -> None:
    files = sorted(p for p in root.rglob("*") if p.is_file() and p.name not in ("MANIFEST", "MANIFEST.sig"))
    lines = [
        "bundle test-bundle",
        *(f"file {hashlib.sha256(p.read_bytes()).hexdigest()} {p.relative_to(root)}" for p in files),
    ]
    (root / "MANIFEST").write_text("\n".join(lines) + "\n")


def sign(root: Path, key: Path) -> None:
    (root / "MANIFEST.sig").unlink(missing_ok=True)
    subprocess.run(
        ["ssh-keygen", "-q", "-Y", "sign", "-f", str(key), "-n", NAMESPACE, str(root / "MANIFEST")], check=True
    )


def bundle(tmp: Path, key: Path | None) -> Path:
    root = tmp / "local-agent-test"
    (root / "infra").mkdir(parents=True)
    (root / "docker-compose.yml").write_text("services: {}\n")
    (root / "infra" / "note.txt").write_text("hello\n")
    write_manifest(root)
    if key is not None:
        sign(root, key)
    return root


def as_tar(root: Path) -> Path:
    out = root.parent / f"{root.name}.tar"
    with tarfile.open(out, "w") as tar:
        tar.add(root, arcname=root.name)
    return out


def verify(bundle_path: Path, signers: Path) -> subprocess.CompletedProcess[str]:
    cmd = [str(REPO / "scripts/airgap-install"), str(bundle_path), "--allowed-signers", str(signers), "--verify-only"]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=120)


def refused_with(proc: subprocess.CompletedProcess[str], words: str) -> None:
    refusals = [line for line in proc.stderr.splitlines() if "REFUSED" in line]
    assert proc.returncode == 2 and len(refusals) == 1 and words in refusals[0], proc.stderr


@pytest.mark.parametrize("packed", [False, True], ids=["folder", "tar"])
def test_a_bundle_signed_by_the_operator_verifies(tmp_path: Path, packed: bool) -> None:
    key = keypair(tmp_path, "operator")
    root = bundle(tmp_path, key)
    proc = verify(as_tar(root) if packed else root, allowed(tmp_path, key))
    assert proc.returncode == 0 and "signed by operator" in proc.stderr, proc.stderr


@pytest.mark.parametrize("packed", [False, True], ids=["folder", "tar"])
def test_a_tampered_file_with_a_recomputed_manifest_is_refused(tmp_path: Path, packed: bool) -> None:
    key = keypair(tmp_path, "operator")
    root = bundle(tmp_path, key)
    (root / "docker-compose.yml").write_text("services: {evil: {image: attacker/x, privileged: true}}\n")
    write_manifest(root)  # every checksum right again: only the signature can tell
    refused_with(verify(as_tar(root) if packed else root, allowed(tmp_path, key)), "does not match its signature")


def test_an_unsigned_bundle_or_another_keys_is_refused(tmp_path: Path) -> None:
    operator = keypair(tmp_path, "operator")
    refused_with(verify(as_tar(bundle(tmp_path / "a", None)), allowed(tmp_path, operator)), "unsigned bundle")
    stranger = keypair(tmp_path, "stranger")
    refused_with(verify(as_tar(bundle(tmp_path / "b", stranger)), allowed(tmp_path, operator)), "by no key")


@pytest.mark.parametrize("packed", [False, True], ids=["folder", "tar"])
def test_a_setuid_member_is_refused_even_when_listed_and_signed(tmp_path: Path, packed: bool) -> None:
    key = keypair(tmp_path, "operator")
    root = bundle(tmp_path, None)
    tool = root / "infra" / "helper"
    tool.write_text("#!/bin/sh\nid\n")
    tool.chmod(0o4755)
    write_manifest(root)
    sign(root, key)
    refused_with(verify(as_tar(root) if packed else root, allowed(tmp_path, key)), "setuid")


def test_a_truncated_signed_bundle_is_refused_by_name(tmp_path: Path) -> None:
    """The signature holds (MANIFEST and its signature come first in the tar), the damage is still named."""
    key = keypair(tmp_path, "operator")
    root = bundle(tmp_path, None)
    (root / "zz-large.bin").write_bytes(bytes(range(256)) * 4096)  # last in the tar: where the cut falls
    write_manifest(root)
    sign(root, key)
    packed = tmp_path / "packed.tar"
    with tarfile.open(packed, "w") as tar:  # as scripts/airgap-bundle orders it: MANIFEST and its signature first
        tar.add(root / "MANIFEST", arcname=f"{root.name}/MANIFEST")
        tar.add(root / "MANIFEST.sig", arcname=f"{root.name}/MANIFEST.sig")
        for path in sorted(root.rglob("*")):
            if path.name not in ("MANIFEST", "MANIFEST.sig"):
                tar.add(path, arcname=f"{root.name}/{path.relative_to(root)}", recursive=False)
    cut = tmp_path / "cut.tar"
    cut.write_bytes(packed.read_bytes()[: packed.stat().st_size * 2 // 3])
    refused_with(verify(cut, allowed(tmp_path, key)), "zz-large.bin")
