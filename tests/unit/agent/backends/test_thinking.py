"""Thinking never reaches the answer: tags in content, a swallowed opening tag, tags split across chunks."""

import pytest

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
