"""The agent-eval command line: subcommands, exit statuses and operator-facing messages."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.eval.cli import main, slug
from tests.support.procs import free_port
from tests.unit.agent.eval.evalkit import AFTER, BEFORE, run_of

SHIPPED = Path(__file__).resolve().parents[4] / "evals" / "questions.yaml"


def test_check_summarizes_the_shipped_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--questions", str(SHIPPED)]) == 0
    out = capsys.readouterr().out
    assert "questions (" in out and "languages ['en', 'tr']" in out


def test_compare_and_report_from_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_of(BEFORE).save(tmp_path / "a.json")
    run_of(AFTER).save(tmp_path / "b.json")
    assert main(["compare", str(tmp_path / "a.json"), str(tmp_path / "b.json"), "--out", str(tmp_path / "c.md")]) == 0
    assert "## Questions that changed (5)" in capsys.readouterr().out
    assert (tmp_path / "c.md").read_text().startswith("# agent-eval compare")
    assert main(["report", str(tmp_path / "a.json")]) == 0
    assert capsys.readouterr().out.startswith("# agent-eval — qwen3:4b")


def test_problems_exit_2_with_a_clear_message(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--questions", str(tmp_path / "missing.yaml")]) == 2
    assert "cannot read it" in capsys.readouterr().err
    url = f"http://127.0.0.1:{free_port()}/v1"  # nothing listens there
    assert main(["run", "--questions", str(SHIPPED), "--base-url", url, "--out", str(tmp_path), "--quiet"]) == 2
    assert f"cannot reach the agent at {url}/agent/info" in capsys.readouterr().err
    assert main(["run", "--questions", str(SHIPPED), "--tag", "no-such-tag"]) == 2
    assert main(["run", "--questions", str(SHIPPED), "--repeat", "0"]) == 2
    assert main(["compare", str(tmp_path / "x.json"), str(tmp_path / "y.json")]) == 2


def test_model_names_become_file_names() -> None:
    assert (slug("qwen3:4b"), slug("hf.co/org/model:Q4_K_M"), slug("::")) == (
        "qwen3_4b",
        "hf.co_org_model_Q4_K_M",
        "model",
    )
