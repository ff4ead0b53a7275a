"""The no-GPU, no-registry route as a newcomer follows it: a fresh `git clone`, then only `scripts/try`.

The test types nothing the docs do not give: clone, `scripts/try` (with AGENT_PUBLISHED_PORT, the documented
way to move the port, so it cannot collide with another stack, and this checkout's own image tags through the
documented image variables, so the clone's build replaces neither the session stack's images nor another
checkout's), the curl the script prints, `scripts/try down`. The answer must carry a real tool call and say
plainly that a scripted model wrote it.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.e2e.names import checkout_tag, image_env
from tests.e2e.stack import REPO, drop_dangling
from tests.support.procs import free_port

pytestmark = pytest.mark.e2e


def sh(cmd: list[str], cwd: Path, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout, check=False)


@pytest.mark.timeout(1800)
def test_fresh_clone_one_command_tool_answer_through_the_published_port(docker_ready: None, tmp_path: Path) -> None:
    clone = tmp_path / "local-agent"
    assert sh(["git", "clone", "--quiet", str(REPO), str(clone)], tmp_path, dict(os.environ), 120).returncode == 0
    port = free_port()
    project, tag = f"la-try-{checkout_tag()}", f"{checkout_tag()}-try"  # this checkout's, kept apart from its stack
    env = {**os.environ, "AGENT_PUBLISHED_PORT": str(port), "TRY_PROJECT": project} | image_env(tag)
    try:
        up = sh([str(clone / "scripts/try")], clone, env, 1500)
        assert up.returncode == 0, up.stderr[-4000:]
        key = re.search(r"^API key: (la-\S+)$", up.stdout, re.M)
        assert key is not None, up.stdout
        assert f"curl -s http://127.0.0.1:{port}/v1/chat/completions" in up.stdout
        body = {"model": "qwen3:4b", "messages": [{"role": "user", "content": "What time is it?"}]}
        resp = httpx.post(
            f"http://127.0.0.1:{port}/v1/chat/completions",
            json=body,
            headers={"Authorization": f"Bearer {key.group(1)}"},
            timeout=60,
        )
        assert resp.status_code == 200, resp.text
        answer = resp.json()
        assert answer["local_agent"]["tools_used"] == ["sistem_bilgisi"]
        assert answer["local_agent"]["tool_calls"][0]["outcome"] == "ok"
        assert answer["choices"][0]["message"]["content"].startswith("[scripted model, not a real LLM")
    finally:
        sh([str(clone / "scripts/try"), "down"], clone, env, 300)
        drop_dangling(project)  # what the clone's build left untagged; its tagged images stay for the next run
