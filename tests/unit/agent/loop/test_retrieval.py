"""Tool retrieval: Turkish folding and stems, the ranking, what is always kept, and what the loop offers."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from agent.context import RequestContext
from agent.loop.engine import ToolLoop
from agent.loop.events import Caller, FinalEvent
from agent.loop.retrieval import LexicalIndex, Ranker, Retriever, called_earlier, fold, named_in, stems
from agent.settings import Settings
from agent.toolspec import ToolSpec
from tests.unit.agent.conftest import MemoryToolBox, ScriptedBackend


def spec(name: str, summary: str, use: str, not_use: str = "") -> ToolSpec:
    text = f"{summary}\n\nWHEN TO USE: {use}\nALWAYS call this tool.\n\nWHEN NOT TO USE: {not_use}"
    return ToolSpec(name, text, {"type": "object", "properties": {}})


TOOLS = [
    spec("sistem_bilgisi", "Server time and date.", '"what time is it", "saat kaç", "bugünün tarihi"'),
    spec(
        "depozit_ozeti",
        "Deposits (money paid IN).",
        '"deposits today", "yatırım", "bugün ne kadar yatırıldı"',
        "withdrawals, çekim -> cekim_ozeti",
    ),
    spec("cekim_ozeti", "Withdrawals (money paid OUT).", '"withdrawals", "çekim", "onay bekleyen çekimler"'),
    spec("pozisyon_dagilimi", "Open positions long vs short.", '"long short", "açık pozisyon"'),
    spec("islem_hacmi", "Traded volume in lots.", '"trading volume", "işlem hacmi"'),
    spec("kyc_ozeti", "KYC applications by status.", '"KYC pending", "kimlik doğrulama başvuruları"'),
]
NAMES = [t.name for t in TOOLS]


def ask(text: str, *, k: int = 2, allowed: Sequence[str] = NAMES, history: list[dict[str, object]] | None = None):  # type: ignore[no-untyped-def]
    return Retriever("lexical", k).select(TOOLS, list(allowed), [*(history or []), {"role": "user", "content": text}])


def test_turkish_case_folding_makes_every_i_the_same_letter() -> None:
    assert {fold("İSTANBUL"), fold("ISTANBUL"), fold("ıstanbul"), fold("Istanbul")} == {"istanbul"}
    assert fold("ÇEKİM ÖZETİ") == "cekim ozeti"


def test_suffixed_turkish_and_english_plurals_share_a_stem() -> None:
    assert stems("yatırıldı yatırım yatırımlar") == ["yatir"] * 3
    assert stems("deposits deposited") == ["depos", "depos"]
    assert stems("Notes note") == ["note", "note"]


@pytest.mark.parametrize(
    ("question", "tool"),
    [
        ("How much was deposited today?", "depozit_ozeti"),
        ("BUGÜN NE KADAR YATIRILDI?", "depozit_ozeti"),
        ("Onay bekleyen çekimler kaç tane?", "cekim_ozeti"),
        ("İşlem hacmi nedir?", "islem_hacmi"),
        ("Saat kaç?", "sistem_bilgisi"),
    ],
)
def test_the_matching_tool_ranks_first(question: str, tool: str) -> None:
    selection = ask(question)
    assert selection.offered[0].name == tool and selection.offered[0].rank == 1


def test_when_not_to_use_words_do_not_pull_a_tool_up() -> None:
    # "çekim" is in depozit_ozeti's WHEN NOT TO USE only: it must score nothing there.
    scores = LexicalIndex.build(TOOLS).scores("çekim", NAMES)
    assert scores["depozit_ozeti"] == 0 and scores["cekim_ozeti"] > 0


def test_offers_top_k_in_rank_order_with_scores() -> None:
    selection = ask("withdrawals awaiting approval", k=3)
    assert len(selection.offered) == 3 and selection.names[0] == "cekim_ozeti"
    assert [o.rank for o in selection.offered] == [1, 2, 3]
    trace = selection.trace()
    assert trace["mode"] == "lexical" and trace["top_k"] == 3 and trace["allowed"] == 6
    first = trace["offered"][0]
    assert first == {"name": "cekim_ozeti", "why": "rank", "rank": 1, "score": first["score"]} and first["score"] > 0


class Fixed:
    """A ranker that prefers the listing order: whatever the question says."""

    def scores(self, question: str, names: Sequence[str]) -> dict[str, float]:
        return {n: float(len(names) - i) for i, n in enumerate(names)}


def test_a_tool_named_in_the_question_is_kept_beyond_k() -> None:
    retriever = Retriever("lexical", 1, lambda tools: Fixed())
    selection = retriever.select(TOOLS, NAMES, [{"role": "user", "content": "use kyc_ozeti please"}])
    assert selection.names == ["sistem_bilgisi", "kyc_ozeti"]
    assert selection.offered[1].to_dict() == {"name": "kyc_ozeti", "why": "named"}
    assert named_in("call Depozit Ozeti please", NAMES) == {"depozit_ozeti"}


def test_a_tool_called_earlier_in_the_conversation_is_kept() -> None:
    history: list[dict[str, object]] = [
        {"role": "user", "content": "open positions on gold?"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "pozisyon_dagilimi"}}]},
        {"role": "tool", "tool_name": "pozisyon_dagilimi", "content": "..."},
        {"role": "assistant", "content": "12 long"},
    ]
    assert called_earlier(history) == {"pozisyon_dagilimi"}
    selection = Retriever("lexical", 1, lambda tools: Fixed()).select(
        TOOLS, NAMES, [*history, {"role": "user", "content": "and yesterday?"}]
    )
    assert selection.names == ["sistem_bilgisi", "pozisyon_dagilimi"]
    assert "pozisyon_dagilimi" in selection.names
    assert next(o for o in selection.offered if o.name == "pozisyon_dagilimi").why == "called earlier"


def test_retrieval_never_offers_a_tool_outside_the_allowed_list() -> None:
    allowed = ["sistem_bilgisi", "islem_hacmi", "kyc_ozeti"]
    history: list[dict[str, object]] = [{"role": "tool", "tool_name": "cekim_ozeti", "content": "x"}]
    selection = ask("depozit_ozeti: how much was deposited?", k=2, allowed=allowed, history=history)
    assert set(selection.names) <= set(allowed) and len(selection.names) == 2


def test_off_or_few_tools_offers_every_allowed_tool() -> None:
    off = Retriever("off", 2).select(TOOLS, NAMES, [{"role": "user", "content": "deposits"}])
    assert off.names == NAMES and {o.why for o in off.offered} == {"all"}
    few = Retriever("lexical", 10).select(TOOLS, NAMES[:3], [{"role": "user", "content": "deposits"}])
    assert few.names == NAMES[:3]


def test_the_index_is_built_once_per_tool_list_fingerprint() -> None:
    built: list[int] = []

    def make(tools: Sequence[ToolSpec]) -> Ranker:
        built.append(len(tools))
        return LexicalIndex.build(tools)

    retriever = Retriever("lexical", 2, make)
    for _ in range(3):
        retriever.select(TOOLS, NAMES, [{"role": "user", "content": "deposits"}])
    retriever.select(list(TOOLS), NAMES, [{"role": "user", "content": "deposits"}])  # same tools, new list
    assert built == [6]
    retriever.select(TOOLS[:5], NAMES[:5], [{"role": "user", "content": "deposits"}])
    assert built == [6, 5]


class SixTools(MemoryToolBox):
    def __init__(self) -> None:
        super().__init__()
        self.specs = TOOLS


async def test_every_round_of_a_request_offers_the_first_rounds_set(settings: Settings) -> None:
    settings = settings.model_copy(update={"tool_retrieval": "lexical", "tool_top_k": 2})
    backend = ScriptedBackend([[("islem_hacmi", {})], [("kyc_ozeti", {})], "done"])
    loop = ToolLoop(settings, backend, SixTools())  # type: ignore[arg-type]
    question = [{"role": "user", "content": "how much was deposited today?"}]
    events = [e async for e in loop.run(question, "qwen3:4b", Caller(), RequestContext("rid"))]
    offered = [[t["function"]["name"] for t in r.tools or []] for r in backend.requests]
    assert offered[0] == offered[1] == offered[2] and len(offered[0]) == 2 and offered[0][0] == "depozit_ozeti"
    final = events[-1]
    assert isinstance(final, FinalEvent) and final.retrieval is not None
    assert [o["name"] for o in final.retrieval["offered"]] == offered[0]


async def test_the_loop_ranks_only_the_callers_tools(settings: Settings) -> None:
    settings = settings.model_copy(update={"tool_retrieval": "lexical", "tool_top_k": 2})
    backend = ScriptedBackend(["fine"])
    caller = Caller("u", "ops", lambda name: name != "depozit_ozeti")
    loop = ToolLoop(settings, backend, SixTools())  # type: ignore[arg-type]
    [
        e
        async for e in loop.run(
            [{"role": "user", "content": "depozit_ozeti deposits"}], "m", caller, RequestContext("rid")
        )
    ]
    offered = [t["function"]["name"] for t in backend.requests[0].tools or []]
    assert "depozit_ozeti" not in offered and len(offered) == 2


def test_a_question_matching_no_tool_gets_every_allowed_tool() -> None:
    selection = ask("zzz qqq", k=2)
    assert selection.names == NAMES and {o.why for o in selection.offered} == {"no match"}


async def test_off_by_default_every_allowed_tool_is_offered(settings: Settings) -> None:
    backend = ScriptedBackend(["fine"])
    loop = ToolLoop(settings.model_copy(update={"tool_top_k": 2}), backend, SixTools())  # type: ignore[arg-type]
    events = [
        e async for e in loop.run([{"role": "user", "content": "deposits"}], "m", Caller(), RequestContext("rid"))
    ]
    assert [t["function"]["name"] for t in backend.requests[0].tools or []] == NAMES
    final = events[-1]
    assert isinstance(final, FinalEvent) and final.retrieval is not None and final.retrieval["mode"] == "off"
