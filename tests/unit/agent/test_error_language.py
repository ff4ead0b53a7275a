"""The chat user's error text follows the question's language: a small deterministic guess, Turkish or English."""

from __future__ import annotations

import pytest

from agent.errors import DependencyDown, QueueFull, UpstreamTimeout, guess_language


@pytest.mark.parametrize(
    ("question", "language"),
    [
        ("kaç çekim onay bekliyor?", "tr"),
        ("Bugün kaç dolar yatırıldı?", "tr"),
        ("kac cekim onay bekliyor", "tr"),  # typed without Turkish letters: two common words
        ("how many dollars were deposited today?", "en"),
        ("how many accounts are long on EURUSD?", "en"),
        ("is EURUSD var high?", "en"),  # one Turkish-looking word is not enough
        ("", "en"),
    ],
)
def test_guess_language(question: str, language: str) -> None:
    assert guess_language(question) == language


def test_turkish_text_where_a_translation_exists_else_the_english_one() -> None:
    assert DependencyDown("detail").client_message_in("tr") == DependencyDown.public_tr
    assert UpstreamTimeout("detail").client_message_in("en") == UpstreamTimeout.public
    # an error whose text is for the client as written (no public text) is never swapped
    assert QueueFull("queue full, retry in 5 s").client_message_in("tr") == "queue full, retry in 5 s"


def test_a_text_set_on_one_error_is_not_replaced_by_its_class_translation() -> None:
    tools_down = DependencyDown("MCP unreachable at http://mcp:8765")
    tools_down.public = "The company's tools are unavailable right now."
    assert tools_down.client_message_in("tr") == tools_down.public
