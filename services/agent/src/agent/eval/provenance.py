"""Who answered a run and what it lost: the report's title and the lines under it.

A run on a scripted stand-in is never titled with the model name it served (its scores test the harness); a
real run names the model and the engine. Requests left unanswered (refused, failed) and the waits on
Retry-After (agent.eval.patience) are said before any score.
"""

from __future__ import annotations

from typing import Any


def _num(value: Any, unit: str = "") -> str:
    return "n/a" if value is None else f"{value}{unit}"


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
