"""The `agent-eval` command: `run` a question set, `compare` two runs, re-render a `report`, `check` a set.

Exit status: 0 done; 1 `--fail-under` not met; 2 a usage, question-set, file or connection problem.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

from agent import cli
from agent.eval import decisions
from agent.eval.compare import compare
from agent.eval.errors import AllRequestsFailed, EvalError
from agent.eval.patience import DEFAULT_MAX_WAIT, WaitBudget
from agent.eval.questions import QuestionSet, load_questions
from agent.eval.records import Record, Run, load_run
from agent.eval.report import render_comparison, render_run, render_summary, what_answered
from agent.eval.runner import AgentClient, resolve_models, run_model

DEFAULT_BASE_URL = "http://127.0.0.1:8000/v1"
DEFAULT_QUESTIONS = Path("evals/questions.yaml")
MARKS = {"correct": "ok", "request_failed": "ERROR"}


def _parser() -> argparse.ArgumentParser:
    p = cli.parser("agent-eval", "Tool-selection benchmark for local-agent.")
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="ask a question set and score the tools the model called")
    run.add_argument(
        "--base-url",
        default=os.environ.get("AGENT_EVAL_BASE_URL", DEFAULT_BASE_URL),
        help=f"OpenAI-compatible base URL (default {DEFAULT_BASE_URL})",
    )
    run.add_argument(
        "--api-key",
        default=os.environ.get("AGENT_EVAL_API_KEY"),
        help="bearer key for the agent (env AGENT_EVAL_API_KEY)",
    )
    run.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS, help="question set YAML")
    run.add_argument("--model", action="append", default=[], help="model to ask (default: the agent's)")
    run.add_argument("--models", default="", help="comma-separated models to compare in one run")
    run.add_argument("--repeat", type=int, default=1, help="ask every question N times (run-to-run variance)")
    run.add_argument("--tag", action="append", default=[], help="only questions with this tag (repeatable)")
    run.add_argument("--only", action="append", default=[], help="only this question id (repeatable)")
    run.add_argument("--out", type=Path, default=None, help="directory for the results (default evals/results/TS)")
    run.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for one answer")
    run.add_argument("--mcp-url", default=None, help="MCP server URL, to fingerprint each tool description")
    run.add_argument("--mcp-token", default=os.environ.get("MCP_TOKEN"), help="MCP bearer token (env MCP_TOKEN)")
    run.add_argument("--fail-under", type=float, default=None, help="exit 1 if tool-selection accuracy < RATE")
    run.add_argument("--quiet", action="store_true", help="no progress lines")
    _patience_flags(run)
    run.add_argument(
        "--tool-calling",
        choices=decisions.MODES,
        default=None,
        help="the agent's TOOL_CALLING this run is for: refused if the agent runs the other way",
    )
    cmp = sub.add_parser("compare", help="what changed between two runs, question by question")
    cmp.add_argument("before", type=Path)
    cmp.add_argument("after", type=Path)
    cmp.add_argument("--out", type=Path, default=None, help="also write the Markdown here")
    cmp.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    rep = sub.add_parser("report", help="render a run JSON as Markdown again")
    rep.add_argument("run", type=Path)
    chk = sub.add_parser("check", help="validate a question set and print what it covers")
    chk.add_argument("--questions", type=Path, default=DEFAULT_QUESTIONS)
    return p


def _patience_flags(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--max-wait",
        type=float,
        default=DEFAULT_MAX_WAIT,
        help="seconds the whole run may wait on the agent's Retry-After (429/503) before a refused question is "
        "left unanswered (never scored) (default %(default)g)",
    )


def slug(model: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", model).strip("_") or "model"


def _progress(done: int, total: int, r: Record) -> None:
    called = ", ".join(r.called()) or "(none)"
    mark = MARKS.get(r.verdict, r.verdict.upper())
    waited = f" (waited {r.waited_s:.0f}s for Retry-After)" if r.waits else ""
    print(
        f"[{done:>{len(str(total))}}/{total}] r{r.repeat} {r.id:<28} {called:<32} {mark:<15} {r.latency_s:6.1f}s"
        + waited,
        file=sys.stderr,
        flush=True,
    )


def _models(args: argparse.Namespace) -> list[str]:
    listed = [m.strip() for m in args.models.split(",") if m.strip()]
    return list(dict.fromkeys([*args.model, *listed]))


def _headline(run: Run, path: Path) -> str:
    s = run.scores
    acc, tool, none = s["accuracy"], s["tool_needed"], s["no_tool"]
    waits = run.meta.get("refusal_waits") or {}
    return (
        f"{what_answered(run.meta)}: tool selection {acc['correct']}/{acc['total']}, needs-tool "
        f"{tool['correct']}/{tool['total']}, no-tool {none['correct']}/{none['total']}, latency p50 "
        f"{s['latency_s']['p50']} s; not answered {s.get('unanswered', 0)}, waited {waits.get('waits', 0)}x "
        f"{waits.get('seconds', 0)} s for Retry-After -> {path}"
    )


def _all_failed(run: Run, path: Path) -> None:
    """A run where no request got an answer measured nothing: say so and exit 2, never a quiet 0."""
    errors = [r.error for r in run.records if r.error]
    if run.records and len(errors) == len(run.records):
        raise AllRequestsFailed(run.meta["model"], len(errors), str(errors[0]), str(path))


def cmd_run(args: argparse.Namespace) -> int:
    if args.repeat < 1:
        raise EvalError("--repeat must be at least 1")
    questions: QuestionSet = load_questions(args.questions).select(args.only, args.tag)
    if not questions.questions:
        raise EvalError("no question matches --only/--tag")
    fingerprints: dict[str, Any] | None = None
    if args.mcp_url:
        from agent.eval.fingerprint import from_mcp  # the MCP client is only loaded when asked for

        fingerprints = from_mcp(args.mcp_url, args.mcp_token)
    out: Path = args.out or Path("evals/results") / dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    client = AgentClient(args.base_url, args.api_key, args.timeout, budget=WaitBudget(args.max_wait))
    runs: list[Run] = []
    try:
        decisions.check_mode(args.tool_calling, client.info())
        for model in resolve_models(client, _models(args)):
            if not args.quiet:
                print(
                    f"agent-eval: {len(questions.questions)} questions x {args.repeat} on {model} at {args.base_url}",
                    file=sys.stderr,
                )
            run = run_model(client, model, questions, args.repeat, None if args.quiet else _progress, fingerprints)
            run.save(out / f"{slug(model)}.json")
            (out / f"{slug(model)}.md").write_text(render_run(run) + "\n", encoding="utf-8")
            print(_headline(run, out / f"{slug(model)}.json"))
            _all_failed(run, out / f"{slug(model)}.json")
            runs.append(run)
    finally:
        client.close()
    if len(runs) > 1:
        (out / "summary.md").write_text(render_summary(runs), encoding="utf-8")
        print(f"models side by side -> {out / 'summary.md'}")
    worst = min(r.scores["accuracy"]["rate"] or 0.0 for r in runs)
    return 1 if args.fail_under is not None and worst < args.fail_under else 0


def cmd_compare(args: argparse.Namespace) -> int:
    comparison = compare(load_run(args.before), load_run(args.after))
    if args.json:
        print(json.dumps(comparison.to_dict(), ensure_ascii=False, indent=1))
    text = render_comparison(comparison, str(args.before), str(args.after))
    if not args.json:
        print(text)
    if args.out:
        args.out.write_text(text, encoding="utf-8")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    qs = load_questions(args.questions)
    needs = sum(q.needs_tool for q in qs.questions)
    tools = sorted({t for q in qs.questions for t in q.expect})
    print(
        f"{qs.source}: {len(qs.questions)} questions ({needs} need a tool, {len(qs.questions) - needs} need none), "
        f"languages {sorted({q.lang for q in qs.questions})}, tools expected: {', '.join(tools)}"
    )
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    print(render_run(load_run(args.run)))
    return 0


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    commands = {"run": cmd_run, "compare": cmd_compare, "check": cmd_check, "report": cmd_report}

    def body() -> int:
        try:
            return int(commands[args.command](args))
        except EvalError as exc:
            raise cli.UsageError(str(exc)) from exc

    return cli.run("agent-eval", body)


if __name__ == "__main__":
    sys.exit(main())
