"""The grounding check as it was before issue 29, every client text scanned into one pool on every request: the
reference the check whose cost follows the answer is compared with (tests/unit/agent/checks/
test_grounding_equivalence.py) and measured against (scripts/bench-grounding). Not shipped."""

from __future__ import annotations

from collections.abc import Sequence

from agent.checks import grounding
from agent.checks.figures import scan


class _EagerContext(grounding._Pool):
    def add_text(self, text: str, origin: str) -> None:
        for figure in scan(text):
            if figure.date is not None:
                self.dates.setdefault(figure.date, origin)
            values = [value for value, _ in figure.readings]
            self.add(values, [figure.text] * len(values), origin)


class _EagerSources(grounding._Sources):
    def __init__(self, tool_results: Sequence[tuple[str, str]], context: Sequence[str]) -> None:
        super().__init__(tool_results, ())
        pool = _EagerContext()
        for text in context:
            pool.add_text(text, "question")
        self.context = pool.freeze()  # type: ignore[assignment]


def check(
    answer: str,
    tool_results: Sequence[tuple[str, str]],
    context: Sequence[str] = (),
    *,
    tools_called: bool,
    question: str = "",
) -> grounding.Grounding:
    sources = _EagerSources(tool_results, context)
    checks: list[grounding.Check] = []
    exempt = []
    for figure in scan(answer):
        if figure.exempt is None:
            checks.append(grounding._check(figure, sources))
        else:
            exempt.append(figure)
    asked = bool(grounding.ASKS_FOR_FIGURE.search(question))
    return grounding.Grounding(checks, exempt, tools_called, len(sources.tools.values), asked)
