"""What one run stores: a record per (question, repeat) and the run around them, to and from JSON.

The JSON is self-contained (each record carries its question's expectations) so `compare` and `report`
work on old runs even after the question set has changed.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from agent.eval import FORMAT
from agent.eval.errors import RunFileError
from agent.eval.questions import Question

Verdict = Literal[
    "correct",
    "wrong_tool",
    "missed_call",
    "spurious_call",
    "extra_call",
    "wrong_arguments",
    "retrieval_missed",
    "request_failed",
]
VERDICTS: tuple[Verdict, ...] = get_args(Verdict)  # in report order


@dataclass
class Call:
    """One tool call the model made, as the agent's machine-readable trace reports it."""

    name: str
    arguments: dict[str, Any]
    outcome: str = "ok"
    round: int = 1


@dataclass
class Record:
    id: str
    repeat: int
    text: str
    lang: str
    tags: list[str]
    expect: list[str]
    allow: list[str]
    args: dict[str, dict[str, Any]]
    calls: list[Call] = field(default_factory=list)
    answer: str = ""
    rounds: int = 0
    latency_s: float = 0.0
    error: str | None = None
    verdict: Verdict = "request_failed"
    selection_ok: bool = False
    args_ok: bool | None = None  # None: the question states no expected arguments (or the tool was not called)
    arg_problems: list[str] = field(default_factory=list)
    grounding: dict[str, Any] | None = None  # the agent's verdict on the answer's figures (local_agent.grounding)
    offered: list[str] | None = None  # the tools offered when retrieval narrowed the list (local_agent.retrieval)
    waits: int = 0  # refusals (429/503) waited out before the answer (agent.eval.patience)
    waited_s: float = 0.0  # seconds spent waiting on their Retry-After, not counted in latency_s

    @classmethod
    def for_question(cls, q: Question, repeat: int) -> Record:
        return cls(
            id=q.id,
            repeat=repeat,
            text=q.text,
            lang=q.lang,
            tags=list(q.tags),
            expect=list(q.expect),
            allow=list(q.allow),
            args={k: dict(v) for k, v in q.args.items()},
        )

    @property
    def needs_tool(self) -> bool:
        return bool(self.expect)

    def called(self) -> list[str]:
        """Distinct tool names the model called, in call order (invented and refused names included)."""
        return list(dict.fromkeys(c.name for c in self.calls))

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Record:
        data = dict(raw)
        data["calls"] = [Call(**c) for c in data.get("calls", [])]
        return cls(**data)


@dataclass
class Run:
    meta: dict[str, Any]
    records: list[Record]
    scores: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "meta": self.meta,
            "scores": self.scores,
            "records": [asdict(r) for r in self.records],
        }

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(self.to_dict(), ensure_ascii=False, indent=1) + "\n", encoding="utf-8")


def load_run(path: Path) -> Run:
    """A run JSON written by `agent-eval run`; a directory holding exactly one run JSON works too."""
    if path.is_dir():
        found = sorted(p for p in path.glob("*.json"))
        if len(found) != 1:
            names = ", ".join(p.name for p in found) or "none"
            raise RunFileError(str(path), f"a directory must hold exactly one run JSON (found: {names}); name the file")
        path = found[0]
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunFileError(str(path), f"not a readable JSON file: {exc}") from exc
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise RunFileError(str(path), f"not an agent-eval run (format should be {FORMAT!r})")
    try:
        records = [Record.from_dict(r) for r in data["records"]]
    except (KeyError, TypeError) as exc:
        raise RunFileError(str(path), f"malformed record: {exc}") from exc
    return Run(dict(data.get("meta") or {}), records, dict(data.get("scores") or {}))
