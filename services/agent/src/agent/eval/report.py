"""Markdown a person reads: one run's report, several models side by side, and a comparison of two runs.

A run on a scripted stand-in is never titled with the model name it served (its scores test the harness); a real
run names the model and the engine. Requests left unanswered (refused, failed) and the waits on Retry-After
(agent.eval.patience) are said before any score.
"""

from __future__ import annotations

from typing import Any

from agent.eval import NO_TOOL, decisions, grounding, retrieval
from agent.eval.compare import Comparison
from agent.eval.records import Record, Run


def what_answered(meta: dict[str, Any]) -> str:
    """Who answered, for titles: a run on a scripted stand-in is never titled with the model name it served."""
    if meta.get("scripted"):
        return f"scripted model, not a real LLM (served as {meta.get('model')})"
    engine = meta.get("engine")
    return f"{meta.get('model')} on {engine}" if engine else str(meta.get("model"))


def answered_lines(meta: dict[str, Any], scores: dict[str, Any]) -> list[str]:
    """The warning for a scripted run; the requests left unscored and the waits for Retry-After."""
    out = []
    if meta.get("scripted"):
        out += ["**The answers came from a scripted stand-in, not a model: these scores test the harness and the "
                "stack, never a model's accuracy.**", ""]  # fmt: skip
    waits = meta.get("refusal_waits") or {}
    out.append(
        f"Not answered (refused or failed, scored nowhere): {scores.get('unanswered', 0)} of "
        f"{scores.get('records', 0)}. Waited for Retry-After: {waits.get('waits', 0)} times, "
        f"{waits.get('seconds', 0)} s (limit {_num(waits.get('limit_seconds'), ' s')})."
    )
    return out


SCORE_LABELS = {
    "accuracy": "Tool selection (headline)",
    "tool_needed": "… questions that need a tool",
    "no_tool": "… questions that need no tool",
    "arguments": "Arguments (where the set states them)",
    "strict_accuracy": "Strict (selection and arguments)",
    "grounding": "Grounding: every figure found in the tool results",
}
READING = """\
## How to read this

- **Tool selection** counts a question as right when the model called exactly the expected tools
  (tools listed under `allow` are tolerated). A tool call on a question that needs none is an error
  (`spurious_call`), and so is answering without the tool (`missed_call`).
- **Arguments** are checked only where the question states them and the expected tool was called;
  **Strict** needs both. Verdicts: `correct`, `wrong_tool` (another tool instead), `missed_call`,
  `spurious_call`, `extra_call` (right tool plus an unexpected one), `wrong_arguments`, `retrieval_missed`
  (the agent's tool retrieval did not offer the needed tool: fix the docstring's WHEN TO USE words or
  `TOOL_TOP_K`, not the model), `request_failed` (HTTP or transport error: fix the stack, not the docstring).
- **Retrieval**: recall is the share of questions needing a tool whose tools were all offered; the model's
  choice is scored apart, on the questions where they were.
- **Confusion matrix**: rows are the expected tool, columns the tool called; off-diagonal cells are the
  borders the docstrings must separate (a `WHEN NOT TO USE` naming the neighbour is the usual fix).
- Compare two runs with `agent-eval compare BEFORE.json AFTER.json`; only compare runs whose question-set
  fingerprint matches, and read a difference of one or two questions against the run-to-run variance
  (`--repeat`) before believing it.
"""


def _pct(part: dict[str, Any] | None) -> str:
    if not part or part.get("rate") is None:
        return "n/a"
    return f"{part['correct']}/{part['total']} ({part['rate'] * 100:.1f}%)"


def _num(value: Any, unit: str = "") -> str:
    return "n/a" if value is None else f"{value}{unit}"


def _short(value: Any) -> str:
    return "n/a" if not value else str(value)[:12]


def _cell(text: str, limit: int = 70) -> str:
    text = " ".join(text.split()).replace("|", "\\|")
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _calls(r: Record) -> str:
    if r.error is not None:
        return f"error: {_cell(r.error, 60)}"
    return ", ".join(f"{c.name}({', '.join(f'{k}={v!r}' for k, v in c.arguments.items())})" for c in r.calls) or NO_TOOL


def _meta_table(meta: dict[str, Any]) -> list[str]:
    rows = [
        ("Model", meta.get("model")),
        ("Engine", meta.get("engine")),
        ("Scripted stand-in", "yes: not a model" if meta.get("scripted") else "no"),
        ("Ollama version", meta.get("ollama_version")),
        ("Agent version (/api/version)", meta.get("api_version")),
        ("System prompt sha256", _short(meta.get("system_prompt_sha256"))),
        ("Tool descriptions sha256", _short(meta.get("tools_sha256"))),
        (
            "Question set",
            f"{_num(meta.get('questions_file'))} ({_num(meta.get('question_count'))} questions, "
            f"sha256 {_short(meta.get('questions_sha256'))})",
        ),
        ("Repeats", meta.get("repeat")),
        ("Endpoint", meta.get("base_url")),
        ("Started / finished", f"{_num(meta.get('started_at'))} / {_num(meta.get('finished_at'))}"),
    ]
    out = ["| what | value |", "| --- | --- |"] + [f"| {k} | {_num(v)} |" for k, v in rows]
    if not meta.get("agent_info_available"):
        out.append(
            "\nThe agent has no `/v1/agent/info`: prompt and tool fingerprints are only known with "
            "`--mcp-url` (tools), never for the prompt."
        )
    return out


def _mistakes(records: list[Record]) -> list[str]:
    wrong = [r for r in records if r.verdict != "correct"]
    if not wrong:
        return ["None: every question was answered as expected."]
    out = ["| id | rep | question | expected | called | verdict |", "| --- | --- | --- | --- | --- | --- |"]
    for r in wrong:
        expected = ", ".join(r.expect) or NO_TOOL
        if r.verdict == "wrong_arguments":
            expected += "; " + "; ".join(r.arg_problems)
        out.append(
            f"| {r.id} | {r.repeat} | {_cell(r.text, 60)} | {_cell(expected, 80)} | {_cell(_calls(r), 80)} "
            f"| {r.verdict} |"
        )
    return out


def _per_tool(per_tool: dict[str, dict[str, Any]]) -> list[str]:
    out = ["| tool | support | TP | FP | FN | precision | recall |", "| --- | --- | --- | --- | --- | --- | --- |"]
    for tool, s in per_tool.items():
        out.append(
            f"| {tool} | {s['support']} | {s['tp']} | {s['fp']} | {s['fn']} | {_num(s['precision'])} "
            f"| {_num(s['recall'])} |"
        )
    return out


def _confusion(matrix: dict[str, dict[str, int]]) -> list[str]:
    cols = sorted({c for row in matrix.values() for c in row} | set(matrix))
    out = ["| expected \\ called | " + " | ".join(cols) + " |", "| --- |" + " --- |" * len(cols)]
    for row in sorted(matrix):
        cells = []
        for col in cols:
            n = matrix[row].get(col, 0)
            cells.append("" if n == 0 else (f"{n}" if col == row else f"**{n}**"))
        out.append(f"| {row} | " + " | ".join(cells) + " |")
    return out


def _top_confusions(matrix: dict[str, dict[str, int]]) -> list[str]:
    """Off-diagonal cells, largest first: the borders the docstrings do not yet separate."""
    cells = sorted(
        ((n, row, col) for row, cols in matrix.items() for col, n in cols.items() if row != col),
        key=lambda cell: (-cell[0], cell[1], cell[2]),
    )
    if not cells:
        return ["No confusions: every expected tool (or no tool) was the one called."]
    return ["Most frequent confusions (expected → called):", ""] + [f"- {row} → {col}: {n}" for n, row, col in cells]


def _groups(title: str, groups: dict[str, dict[str, Any]]) -> list[str]:
    if not groups:
        return []
    out = [f"### {title}", "", "| group | tool selection |", "| --- | --- |"]
    return out + [f"| {k} | {_pct(v)} |" for k, v in groups.items()] + [""]


def _variance(v: dict[str, Any]) -> list[str]:
    if v.get("repeats", 1) <= 1:
        return ["One repeat: run with `--repeat 3` to see how much of a difference is noise."]
    per = ", ".join(_pct(p) for p in v["per_repeat"])
    unstable = ", ".join(v["unstable"]) or "none"
    return [
        f"Per repeat: {per}.",
        f"Range {_num(v['rate_min'])}–{_num(v['rate_max'])}, mean {_num(v['rate_mean'])}, "
        f"stdev {_num(v['rate_stdev'])}.",
        f"Questions whose outcome changed between repeats: {unstable}.",
    ]


def render_run(run: Run) -> str:
    s, meta = run.scores, run.meta
    lines = [
        f"# agent-eval — {what_answered(meta)} — {meta.get('date')}",
        "",
        *answered_lines(meta, s),
        "",
        "## What was measured",
        "",
        *_meta_table(meta),
        "",
        "## Scores",
        "",
        "| score | result |",
        "| --- | --- |",
    ]
    lines += [f"| {label} | {_pct(s.get(key))} |" for key, label in SCORE_LABELS.items()]
    verdicts = ", ".join(f"{k} {v}" for k, v in (s.get("verdicts") or {}).items() if v)
    lines += [
        "",
        f"Verdicts: {verdicts}.",
        "",
        "## Decisions (validity and the four questions)",
        "",
        *decisions.render(meta, s),
        "",
        "## Mistakes",
        "",
        *_mistakes(run.records),
        "",
        "## Retrieval (was the needed tool offered at all?)",
        "",
        *retrieval.render(s.get("retrieval") or {}, run.records),
        "",
        "## Grounding (is the answer what the tools returned?)",
        "",
        *grounding.render(s.get("grounding") or {}, run.records),
        "",
        "## Per tool (precision and recall)",
        "",
        *_per_tool(s.get("per_tool") or {}),
        "",
        "## Confusion matrix",
        "",
        *_top_confusions(s.get("confusion") or {}),
        "",
        "Rows: expected; columns: called; **bold**: a mistake.",
        "",
        *_confusion(s.get("confusion") or {}),
        "",
        "## By tag and language",
        "",
        *_groups("Tags", s.get("by_tag") or {}),
        *_groups("Languages", s.get("by_lang") or {}),
        "## Latency and rounds",
        "",
        _latency(s),
        "",
        "## Run-to-run variance",
        "",
        *_variance(s.get("variance") or {}),
        "",
        READING,
    ]
    return "\n".join(lines)


def _latency(s: dict[str, Any]) -> str:
    lat, rounds = s.get("latency_s") or {}, s.get("rounds") or {}
    hist = ", ".join(f"{k}: {v}" for k, v in (rounds.get("histogram") or {}).items())
    return (
        f"Latency per question: p50 {_num(lat.get('p50'), ' s')}, p95 {_num(lat.get('p95'), ' s')}, "
        f"max {_num(lat.get('max'), ' s')}. Rounds: mean {_num(rounds.get('mean'))}, max {_num(rounds.get('max'))}"
        f" (rounds: questions — {hist or 'none'})."
    )


def render_summary(runs: list[Run]) -> str:
    """Several models on the same question set, one column each."""
    head = "| score | " + " | ".join(str(r.meta.get("model")) for r in runs) + " |"
    lines = ["# agent-eval — models side by side", "", head, "| --- |" + " --- |" * len(runs)]
    for key, label in SCORE_LABELS.items():
        lines.append(f"| {label} | " + " | ".join(_pct(r.scores.get(key)) for r in runs) + " |")
    for key in ("p50", "p95"):
        lines.append(
            f"| latency {key} | "
            + " | ".join(_num((r.scores.get("latency_s") or {}).get(key), " s") for r in runs)
            + " |"
        )
    lines.append("| mean rounds | " + " | ".join(_num((r.scores.get("rounds") or {}).get("mean")) for r in runs) + " |")
    return "\n".join(lines) + "\n"


def _value(v: Any) -> str:
    return _pct(v) if isinstance(v, dict) else _num(v)


def render_comparison(c: Comparison, before: str, after: str) -> str:
    lines = [
        "# agent-eval compare",
        "",
        f"Before: `{before}`  ",
        f"After: `{after}`",
        "",
        "## What was measured",
        "",
        "| what | before | after | |",
        "| --- | --- | --- | --- |",
    ]
    show = {k: (_short if k.endswith("sha256") else _num) for k, _, _ in c.meta}
    lines += [f"| {k} | {show[k](a)} | {show[k](b)} | {'' if a == b else '**changed**'} |" for k, a, b in c.meta]
    if c.tools_changed:
        lines += ["", f"Tool descriptions that changed: {', '.join(c.tools_changed)}."]
    lines += ["", "## Scores", "", "| score | before | after |", "| --- | --- | --- |"]
    lines += [f"| {k} | {_value(a)} | {_value(b)} |" for k, a, b in c.scores]
    lines += ["", f"## Questions that changed ({len(c.questions)})", ""]
    if not c.questions:
        return "\n".join([*lines, "None: every question behaved as before."]) + "\n"
    lines += ["| id | change | question | before | after |", "| --- | --- | --- | --- | --- |"]
    for q in c.questions:
        was = "; ".join(f"{r.verdict}: {_calls(r)}" for r in q.before) or "—"
        now = "; ".join(f"{r.verdict}: {_calls(r)}" for r in q.after) or "—"
        lines.append(f"| {q.id} | {q.change} | {_cell(q.text, 50)} | {_cell(was, 90)} | {_cell(now, 90)} |")
    return "\n".join(lines) + "\n"
