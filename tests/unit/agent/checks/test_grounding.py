"""The grounding check over a table of answer / tool-result pairs in English and Turkish."""

from __future__ import annotations

import json

import pytest

from agent.checks import figures
from agent.checks.figures import scan
from agent.checks.grounding import check

DEPOSITS = json.dumps(
    {
        "start": "2026-12-03",
        "end": "2026-12-03",
        "currency": "USD",
        "count": 42,
        "total_usd": 12345.67,
        "average_usd": 293.94,
        "by_method": {"card": {"count": 30, "total_usd": 10000.0}, "crypto": {"count": 12, "total_usd": 2345.67}},
    }
)
KYC = json.dumps(
    [
        {"id": "K-1001", "customer": "C-2001", "status": "pending"},
        {"id": "K-1002", "customer": "C-2002", "status": "pending"},
        {"id": "K-1003", "customer": "C-2003", "status": "approved"},
        {"id": "K-1004", "customer": "C-2004", "status": "rejected"},
        {"id": "K-1005", "customer": "C-2005", "status": "pending"},
    ]
)
TOOLS = [("depozit_ozeti", DEPOSITS), ("kyc_listesi", KYC)]
QUESTION = "How many dollars were deposited today, and were more than 40,000 USD withdrawn in the last 14 days?"

# (case, answer, figures expected ungrounded)
TABLE = [
    ("grounded EN", "Today 42 deposits came in, totalling $12,345.67 (average 293.94 USD).", []),
    ("grounded TR", "Bugün 42 yatırım yapıldı, toplam 12.345,67 USD; ortalama 293,94 dolar.", []),
    ("reformatted EN", "Total deposits: USD 12345.67 across 42 payments on 2026-12-03.", []),
    ("reformatted TR", "3 Aralık 2026 itibarıyla toplam 12\u00a0345,67 $ yatırıldı.", []),
    ("rounded EN", "About $12.3k was deposited, roughly 294 dollars per deposit.", []),
    ("rounded TR", "Yaklaşık 12,3 bin USD yatırıldı; ortalama 294 $.", []),
    ("scaled", "Deposits reached 0.01 million dollars by card: exactly $10,000.", []),
    ("derived share EN", "Card payments were 81% of the total.", []),
    ("derived share TR", "Kartla ödemeler toplamın %81'i.", []),
    ("derived difference", "Card brought in $7,654.33 more than crypto.", []),
    ("derived sum", "Card and crypto counts together: 42 deposits; 2,345.67 + 10,000.00 = 12,345.67.", []),
    ("derived count", "Three of the 5 KYC applications are pending: 3 pending, 1 approved.", []),
    ("percent as ratio", "A 0.1234 ratio is 12.34%.", ["0.1234", "12.34%"]),
    ("invented EN", "There are currently 125 KYC applications pending.", ["125"]),
    ("invented TR", "Şu anda 125 KYC başvurusu bekliyor, toplam 9.876,54 TL.", ["125", "9.876,54 TL"]),
    ("copied from question", "I cannot see withdrawals; 40,000 USD over 14 days needs the withdrawal tool.", []),
    ("partially grounded", "42 deposits, total $12,345.67, of which $5,432.10 by e-wallet.", ["$5,432.10"]),
    ("wrong date", "On 4 December 2026 there were 42 deposits.", ["4 December 2026"]),
    ("noise", "Top 20 customers, 1st place... 2 of 5 checks passed in 2025 with qwen3:4b, see C-2001.", []),
    ("list numbering", "1. Card: 30\n2. Crypto: 12\n11. Other: 0", []),
    # "çekim" (withdrawal) ends in "ekim" (October): Qwen2.5-Coder-1.5B's answer was flagged "ekim 24" (issue 37)
    ("month name inside a word TR", "Bugünkü toplam çekim 12.345,67 USD'dir.", []),
    ("month name inside a word EN", "Summary 42: the dismay 12 of Omar 30 was about card deposits.", []),
]


@pytest.mark.parametrize(("case", "answer", "ungrounded"), TABLE, ids=[row[0] for row in TABLE])
def test_table(case: str, answer: str, ungrounded: list[str]) -> None:
    verdict = check(answer, TOOLS, [QUESTION], tools_called=True)
    assert [c.figure.text for c in verdict.ungrounded] == ungrounded, verdict.as_dict()
    assert verdict.status in (("ungrounded",) if ungrounded else ("grounded", "no_figures"))


def test_counts_of_rows_are_derived_from_json_lists() -> None:
    rows = json.dumps([{"status": "pending" if i % 3 else "approved", "amount": 100 + i} for i in range(30)])
    verdict = check("Of 30 applications, 20 are pending and 10 approved; 3,435 in total.", [("kyc", rows)], [],
                    tools_called=True)  # fmt: skip
    assert [c.source for c in verdict.checks] == ["tool"] * 3 and not verdict.ungrounded


def test_copied_from_the_question_is_labelled_so() -> None:
    verdict = check("40,000 USD in 14 days is above the limit.", TOOLS, [QUESTION], tools_called=True)
    assert [(c.figure.text, c.source) for c in verdict.checks] == [("40,000 USD", "question"), ("14", "question")]


def test_derivations_say_how() -> None:
    verdict = check("Card was 81% of deposits; card beat crypto by $7,654.33.", TOOLS, [], tools_called=True)
    assert [c.where for c in verdict.checks] == ["share: 10000 / 12345.7", "difference of 10000 and 2345.67"]


def test_figures_without_a_tool_call_are_their_own_signal() -> None:
    verdict = check("There are currently 125 KYC applications pending.", [], [QUESTION], tools_called=False,
                    question="How many KYC applications are pending?")  # fmt: skip
    assert verdict.status == "no_tool_call"
    assert [c.figure.text for c in verdict.ungrounded] == ["125"]


def test_figures_without_a_tool_to_a_general_question_are_recorded_not_flagged() -> None:
    verdict = check("A leap year has 366 days.", [], ["How long is a leap year?"], tools_called=False,
                    question="How long is a leap year?")  # fmt: skip
    assert verdict.status == "general" and [c.figure.text for c in verdict.ungrounded] == ["366"]
    sums = check("15 and 27 make 42.", [], ["What is 15 + 27?"], tools_called=False, question="What is 15 + 27?")
    assert sums.status == "grounded" and sums.checks[-1].source == "derived"


def test_no_tool_call_with_only_question_figures_is_not_flagged() -> None:
    verdict = check("40,000 USD is the limit you asked about.", [], [QUESTION], tools_called=False)
    assert verdict.status == "grounded" and not verdict.ungrounded


def test_an_answer_without_figures() -> None:
    assert check("Hello! How can I help?", TOOLS, [], tools_called=False).status == "no_figures"


def test_ungrounded_figure_names_the_nearest_tool_figure() -> None:
    verdict = check("Total: $12,354.67.", TOOLS, [], tools_called=True)
    assert verdict.ungrounded[0].nearest == "12345.67 (depozit_ozeti)"


def test_rounded_figures_are_not_summed() -> None:
    # 1.2k is within 50 of many sums of two tool values; a coarse figure must match a tool figure directly.
    verdict = check("About 1.7k by crypto.", TOOLS, [], tools_called=True)
    assert [c.figure.text for c in verdict.ungrounded] == ["1.7k"]


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("1,234.56", [1234.56]),
        ("1.234,56", [1234.56]),
        ("1,234", [1234.0, 1.234]),
        ("1.234", [1234.0, 1.234]),
        ("12,5", [12.5]),
        ("0.125", [0.125]),
        ("1.234.567", [1234567.0]),
        ("$2.5M", [2500000.0]),
        ("3 milyon TL", [3000000.0]),
        ("%12,5", [12.5]),
    ],
)
def test_readings(text: str, values: list[float]) -> None:
    (figure,) = scan(text)
    assert [round(v, 6) for v, _ in figure.readings] == values


@pytest.mark.parametrize(
    ("text", "why"),
    [("in 2025", "year"), ("the 3rd", "ordinal"), ("125'inci", "ordinal"), ("3. çeyrek", "ordinal"),
     ("qwen3", "label"), ("C-1042", "label"), ("v1.2.3", "label"), ("Top 20", "label"), ("2 items", "small")],
)  # fmt: skip
def test_exemptions(text: str, why: str) -> None:
    assert scan(text)[-1].exempt == why


@pytest.mark.parametrize(
    ("text", "date"),
    [("2026-12-03T10:00:00Z", (2026, 12, 3)), ("03.12.2026", (2026, 12, 3)), ("12/31/2026", (2026, 12, 31)),
     ("December 3, 2026", (2026, 12, 3)), ("3 Aralık", (0, 12, 3)), ("Aralık 2026", (2026, 12, 0))],
)  # fmt: skip
def test_dates(text: str, date: tuple[int, int, int]) -> None:
    (figure,) = scan(text)
    assert figure.date == date


def test_times_of_day_are_not_checked() -> None:
    assert [f.exempt for f in scan("at 09:14 and 23:59:01")] == ["time", "time"]


def test_an_answer_that_drops_the_asked_figure_is_its_own_signal() -> None:
    verdict = check("Deposits were made today.", TOOLS, [], tools_called=True, question="How much was deposited?")
    assert verdict.status == "figure_dropped" and verdict.tool_figures > 0
    assert check("Deposits were made.", TOOLS, [], tools_called=True, question="Any news?").status == "no_figures"
    clock = check("Saat 14:05.", [("sistem_bilgisi", '{"time": "14:05:00"}')], [], tools_called=True,
                  question="Saat kaç?")  # fmt: skip
    assert clock.status == "no_figures"  # a time is an answer to "kaç", just not a checked figure


def test_derivations_use_numbers_in_prose_but_not_ids() -> None:
    file = json.dumps({"path": "d.txt", "content": "Total 12345.67 USD, card 10000.00 USD."})
    assert check("Card was 81% of it.", [("dosya_oku", file)], [], tools_called=True).status == "grounded"
    ids = json.dumps([{"id": f"TX-{1000 + i}"} for i in range(50)])
    assert check("98.76% were verified.", [("tx", ids)], [], tools_called=True).status == "ungrounded"


@pytest.mark.parametrize(
    "text",
    [row[1] for row in TABLE]
    + [QUESTION, "No digits at all here.", "September      3 and yüzde 12", "x" * 500 + " 7", "a1b2 3.4.5 Ekim 2026"],
)
def test_scanning_only_near_digits_finds_what_a_full_scan_finds(text: str) -> None:
    assert [m.span() for m in figures._matches(text)] == [m.span() for m in figures.PATTERN.finditer(text)]


def test_mixed_columns_count_only_their_strings() -> None:
    states = ["open"] * 12 + [3, {"x": 1}, True] + ["closed"] * 11
    rows = json.dumps([{"state": s} for s in states])
    verdict = check("12 are open, 11 closed.", [("t", rows)], [], tools_called=True)
    assert verdict.status == "grounded", verdict.as_dict()


@pytest.mark.parametrize("token", ["137.52", "4137.52", "1.234", "0.125", "1.2345", "12.345", "1234.567", "9.5"])
def test_the_plain_decimal_fast_path_reads_as_the_general_rule_does(token: str) -> None:
    values = figures.source_values(f'{{"a": {token}}}')[0]
    assert sorted(values) == sorted(v for v, _ in figures._token_readings(token))
