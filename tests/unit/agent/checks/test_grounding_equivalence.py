"""The grounding check whose cost follows the answer gives the verdicts of the check that scanned the whole history.

Conversations, tool results and answers are generated from one pool of values written in many ways (EN/TR
separators, scales, currencies, percents, dates, years, labels), so figures are found in the tools, in the
client's texts, by derivation or nowhere; every verdict must equal the old eager path's, field for field.
"""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.checks.grounding import check
from tests.support import grounding_eager

Case = tuple[str, list[tuple[str, str]], list[str], str]  # answer, tool results, history, question


def _tr(value: float) -> str:
    return f"{value:,.2f}".replace(",", "_").replace(".", ",").replace("_", ".")


FORMATS = [
    "{:g}", "{:,.0f}", "{:,.2f}", "${:,.2f}", "{:,.2f} USD", "USD {:.2f}", "{:.1f}k", "{:g}%", "%{:g}",
    "yüzde {:g}", "{:g} TL", "about {:,.0f}", "{:.0f} deposits", "{:g} million",
]  # fmt: skip
WORDS = ["Today", "toplam", "were", "pending", "2025", "Top 20", "C-1042", "09:14", "1.", "qwen3:4b", "and", "\n"]
DATES = ["2026-12-03", "3 December 2026", "3 Aralık 2026", "12/03/2026", "Aralık 2026", "December 4", "2026-12-04"]


def figure(values: list[float]) -> st.SearchStrategy[str]:
    def write(value: float, form: str) -> str:
        return _tr(value) if form == "tr" else form.format(value)

    written = st.builds(write, st.sampled_from(values), st.sampled_from([*FORMATS, "tr"]))
    return st.one_of(written, st.sampled_from(WORDS), st.sampled_from(DATES))


def text(values: list[float]) -> st.SearchStrategy[str]:
    return st.lists(figure(values), max_size=12).map(" ".join)


@st.composite
def cases(draw: st.DrawFn) -> Case:
    values = draw(st.lists(st.one_of(st.integers(0, 99_999).map(float), st.floats(0, 99_999).map(
        lambda f: round(f, 2))), min_size=1, max_size=8))  # fmt: skip
    shown = draw(st.lists(st.sampled_from(values), max_size=5))
    rows = [{"id": f"TX-{i}", "amount_usd": v, "date": "2026-12-03"} for i, v in enumerate(shown)]

    def summary(total: float) -> tuple[str, str]:
        return "depozit_ozeti", json.dumps({"count": len(rows), "total_usd": total})

    results = draw(
        st.lists(
            st.one_of(
                st.just(("islem_listesi", json.dumps(rows))),
                st.builds(lambda t: ("sistem_bilgisi", t), text(values)),
                st.builds(summary, st.sampled_from(values)),
            ),
            max_size=3,
        )
    )
    history = draw(st.lists(text(values), max_size=10))
    return draw(text(values)), results, history, draw(st.sampled_from(["How much was deposited?", "hello", ""]))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.booleans())
def test_new_and_old_verdicts_agree(case: Case, called: bool) -> None:
    answer, results, history, question = case
    new = check(answer, results, [question, *history], tools_called=called, question=question)
    old = grounding_eager.check(answer, results, [question, *history], tools_called=called, question=question)
    assert new.as_dict() == old.as_dict()


@settings(max_examples=40, deadline=None)
@given(cases())
def test_a_repeated_conversation_is_judged_alike_from_the_cache(case: Case) -> None:
    answer, results, history, question = case
    first = check(answer, results, history, tools_called=True, question=question)
    again = check(answer, results, [t.encode().decode() for t in history], tools_called=True, question=question)
    assert (
        first.as_dict()
        == again.as_dict()
        == grounding_eager.check(answer, results, history, tools_called=True, question=question).as_dict()
    )
