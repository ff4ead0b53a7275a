"""Thinking never reaches the answer: tags in content, a swallowed opening tag, tags split across chunks."""

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agent.backends.thinking import ThinkFilter


@pytest.mark.parametrize(
    ("content", "thinking", "answer"),
    [
        ("plain answer", "", "plain answer"),
        ("<think>reason</think>answer", "reason", "answer"),
        ("reasoning with no opening tag</think>\n\nThe answer.", "reasoning with no opening tag", "The answer."),
        ("<think>a</think>b</think>final", "a", "final"),
    ],
)
def test_only_what_follows_the_last_close_tag_is_the_answer(content: str, thinking: str, answer: str) -> None:
    got_thinking, got_answer, _ = run([content], holdback=True)
    assert got_answer == answer
    assert "</think>" not in got_answer
    if thinking:
        assert got_thinking.startswith(thinking[:1])


def run(chunks: list[str], holdback: bool) -> tuple[str, str, list[str]]:
    f = ThinkFilter(holdback)
    thinking, answer, streamed = "", "", []
    for chunk in chunks:
        t, a = f.feed(chunk)
        thinking += t
        answer += a
        if a:
            streamed.append(a)
    t, a = f.finish()
    if a:
        streamed.append(a)
    return thinking + t, answer + a, streamed


def test_open_tag_routes_to_thinking_even_without_holdback() -> None:
    thinking, answer, _ = run(["<think>", "I should ", "count", "</th", "ink>", "Five ", "deposits."], False)
    assert answer == "Five deposits."
    assert "count" in thinking and "<think>" not in thinking


def test_holdback_catches_a_swallowed_opening_tag() -> None:
    thinking, answer, streamed = run(["Let me think", " about it.", "</think>", "\n\nIt is 3 pm."], True)
    assert answer == "It is 3 pm."
    assert "Let me think" in thinking
    assert all("think" not in s for s in streamed)


def test_holdback_flushes_plain_answers_at_the_end() -> None:
    _, answer, streamed = run(["Hello ", "there"], True)
    assert answer == "Hello there"
    assert streamed == ["Hello there"]  # held until the round ended


def test_without_holdback_plain_text_streams_token_by_token() -> None:
    _, answer, streamed = run(["Hello ", "there"], False)
    assert streamed == ["Hello ", "there"]
    assert answer == "Hello there"


def test_partial_close_tag_is_not_streamed() -> None:
    f = ThinkFilter(False)
    assert f.feed("answer </th") == ("", "answer ")
    assert f.feed("ink>rest")[1] == "rest"


def test_an_opening_tag_split_across_chunks_is_never_streamed() -> None:
    thinking, answer, streamed = run(["\n", "<th", "ink>", "I should ", "count", "</think>", "Five."], False)
    assert answer == "Five."
    assert "count" in thinking
    assert all("<" not in s and "count" not in s for s in streamed)


def test_content_streams_as_soon_as_it_cannot_open_a_think_block() -> None:
    f = ThinkFilter(False)
    assert f.feed("  <") == ("", "")  # still a possible `<think>`
    assert f.feed("b>bold") == ("", "  <b>bold")  # `<b` rules it out: everything so far goes at once
    assert f.feed(" text") == ("", " text")


def test_holdback_still_waits_for_the_end_of_a_plain_answer() -> None:
    f = ThinkFilter(True)
    assert f.feed("It is 3 pm.") == ("", "")
    assert f.finish() == ("", "It is 3 pm.")


_WORDS = st.text(alphabet="abcdefghij 0123456789.,\n", min_size=1, max_size=40)


def _chunked(text: str, cuts: list[int]) -> list[str]:
    points = sorted({c % (len(text) + 1) for c in cuts} | {0, len(text)})
    return [text[a:b] for a, b in pairwise(points) if b > a]


@given(_WORDS, _WORDS, st.lists(st.integers(min_value=0), max_size=8), st.booleans())
def test_no_reasoning_reaches_the_answer_however_the_chunks_fall(
    reasoning: str, answer: str, cuts: list[int], holdback: bool
) -> None:
    """Tagged reasoning in either mode, and untagged reasoning in holdback mode, never reaches the answer."""
    content = f"<think>{reasoning}</think>{answer}" if not holdback else f"{reasoning}</think>{answer}"
    _, got, streamed = run(_chunked(content, cuts), holdback)
    assert got == answer.lstrip(" \n\r\t")
    assert "".join(streamed) == got


@given(_WORDS.filter(lambda s: s.strip() != ""), st.lists(st.integers(min_value=0), max_size=8))
def test_a_plain_answer_streams_from_its_first_visible_character(answer: str, cuts: list[int]) -> None:
    f, fed, sent = ThinkFilter(False), "", ""
    for chunk in _chunked(answer, cuts):
        fed, sent = fed + chunk, sent + f.feed(chunk)[1]
        if chunk.strip():  # the first visible character: it cannot begin `<think>`
            break
    assert sent == fed  # everything up to it is forwarded by this very chunk, nothing waits for the round's end
