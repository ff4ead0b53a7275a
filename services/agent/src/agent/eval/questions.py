"""The question set: load and validate the YAML file (format in evals/README.md), fingerprint it.

Every unknown key, duplicate id or malformed matcher is an error naming the question, so an operator's
typo fails the run at once instead of quietly scoring the wrong thing.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from agent.eval.errors import QuestionSetError
from agent.eval.matchers import spec_problem

QUESTION_KEYS = {"id", "text", "lang", "expect", "allow", "args", "tags", "note"}
TOP_KEYS = {"version", "questions"}


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    expect: list[str]  # tools that must be called; empty: the right answer calls no tool
    lang: str = "en"
    allow: list[str] = field(default_factory=list)  # tools that may also be called without it being an error
    args: dict[str, dict[str, Any]] = field(default_factory=dict)  # tool -> argument -> matcher spec
    tags: list[str] = field(default_factory=list)
    note: str = ""

    @property
    def needs_tool(self) -> bool:
        return bool(self.expect)


@dataclass(frozen=True)
class QuestionSet:
    source: str
    sha256: str
    questions: list[Question]

    def select(self, ids: list[str] | None = None, tags: list[str] | None = None) -> QuestionSet:
        """The questions with one of `ids` or one of `tags` (both empty: all of them)."""
        if not ids and not tags:
            return self
        wanted_ids, wanted_tags = set(ids or []), set(tags or [])
        chosen = [q for q in self.questions if q.id in wanted_ids or wanted_tags.intersection(q.tags)]
        return QuestionSet(self.source, self.sha256, chosen)


def _str_list(raw: Any, source: str, where: str, key: str) -> list[str]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(x, str) and x.strip() for x in raw):
        raise QuestionSetError(source, where, f"{key} must be a list of names")
    return [x.strip() for x in raw]


def _args(raw: Any, expect: list[str], source: str, where: str) -> dict[str, dict[str, Any]]:
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise QuestionSetError(source, where, "args must map a tool name to {argument: expected value}")
    for tool, specs in raw.items():
        if tool not in expect:
            raise QuestionSetError(source, where, f"args names {tool!r}, which is not in expect {expect}")
        if not isinstance(specs, dict) or not specs:
            raise QuestionSetError(source, where, f"args.{tool} must map argument names to expected values")
        for name, spec in specs.items():
            if (problem := spec_problem(spec)) is not None:
                raise QuestionSetError(source, where, f"args.{tool}.{name}: {problem}")
    return {str(tool): dict(specs) for tool, specs in raw.items()}


def parse_question(raw: Any, source: str, index: int) -> Question:
    where = f"question #{index + 1}"
    if not isinstance(raw, dict):
        raise QuestionSetError(source, where, "each question must be a mapping with id, text and expect")
    where = f"question {raw.get('id', f'#{index + 1}')!r}"
    if unknown := sorted(set(raw) - QUESTION_KEYS):
        raise QuestionSetError(source, where, f"unknown keys {unknown}; allowed: {sorted(QUESTION_KEYS)}")
    for key in ("id", "text"):
        if not isinstance(raw.get(key), str) or not raw[key].strip():
            raise QuestionSetError(source, where, f"{key} must be a non-empty string")
    if "expect" not in raw:
        raise QuestionSetError(source, where, "expect is required: a list of tool names, [] for no tool")
    expect = _str_list(raw["expect"], source, where, "expect")
    return Question(
        id=raw["id"].strip(),
        text=raw["text"].strip(),
        expect=expect,
        lang=str(raw.get("lang") or "en"),
        allow=_str_list(raw.get("allow"), source, where, "allow"),
        args=_args(raw.get("args"), expect, source, where),
        tags=_str_list(raw.get("tags"), source, where, "tags"),
        note=str(raw.get("note") or ""),
    )


def parse_questions(text: str, source: str = "<questions>") -> QuestionSet:
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise QuestionSetError(source, "YAML", str(exc)) from exc
    if not isinstance(data, dict) or not isinstance(data.get("questions"), list):
        raise QuestionSetError(source, "top level", "expected a mapping with a `questions:` list")
    if unknown := sorted(set(data) - TOP_KEYS):
        raise QuestionSetError(source, "top level", f"unknown keys {unknown}; allowed: {sorted(TOP_KEYS)}")
    questions = [parse_question(raw, source, i) for i, raw in enumerate(data["questions"])]
    if not questions:
        raise QuestionSetError(source, "questions", "the set is empty")
    seen: set[str] = set()
    for q in questions:
        if q.id in seen:
            raise QuestionSetError(source, f"question {q.id!r}", "duplicate id")
        seen.add(q.id)
    return QuestionSet(source, hashlib.sha256(text.encode()).hexdigest(), questions)


def load_questions(path: Path) -> QuestionSet:
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise QuestionSetError(str(path), "file", f"cannot read it: {exc.strerror or exc}") from exc
    return parse_questions(text, str(path))
