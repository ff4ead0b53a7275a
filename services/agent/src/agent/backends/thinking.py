"""Keeps a reasoning model's thinking out of the answer text.

Ollama normally returns reasoning in `message.thinking`. Some model/version pairs put it into `content`
instead: `<think>…</think>answer`, or with the opening tag swallowed, `…reasoning…</think>answer` (the
model's template opens the block in the prompt: docs/api.md, "Thinking models"). The rule
(docs/architecture.md): in content, only what follows the last `</think>` is the answer.
"""

from __future__ import annotations

OPEN, CLOSE = "<think>", "</think>"


def _partial_suffix(text: str, tag: str) -> int:
    """Length of the longest suffix of `text` that is a proper prefix of `tag` (a tag split across chunks)."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0


class ThinkFilter:
    """Streaming splitter: feed content chunks, get (thinking, answer) pieces safe to forward now.

    `holdback=True` is for models whose reasoning may reach content without an opening tag
    (THINK_HOLDBACK_MODELS): all content stays back until a `</think>` shows or the round ends, so no
    reasoning is ever streamed as answer. Otherwise content is held only while it could still open a think
    block (whitespace, then a prefix of `<think>`): the first character that rules that out streams it. A
    `<think>` block goes to thinking; after its `</think>` the answer streams. A later `</think>` after answer
    text has streamed turns what precedes it into thinking from then on.
    """

    def __init__(self, holdback: bool) -> None:
        self.holdback = holdback
        self.raw = ""
        self.emitted = 0  # chars of raw already forwarded as answer
        self.in_think = False
        self.closed_once = False
        self.answered = False  # some answer text has been forwarded

    def feed(self, chunk: str) -> tuple[str, str]:
        self.raw += chunk
        thinking = ""
        opening = not self.closed_once and self.emitted == 0
        if opening and self.raw.lstrip().startswith(OPEN):
            self.in_think = True
        if CLOSE in self.raw[self.emitted :]:
            head, _, _ = self.raw.rpartition(CLOSE)
            thinking = head[self.emitted :].replace(OPEN, "")
            self.emitted = len(head) + len(CLOSE)
            self.in_think, self.closed_once = False, True
        if self.closed_once:  # the answer after </think> starts at its first visible character
            while self.emitted < len(self.raw) and self.raw[self.emitted] in " \n\r\t" and not self.answered:
                self.emitted += 1
        if self.in_think or (self.holdback and not self.closed_once) or (opening and self._may_open()):
            return thinking, ""
        safe_end = len(self.raw) - _partial_suffix(self.raw, CLOSE)
        answer = self.raw[self.emitted : safe_end]
        self.emitted = max(self.emitted, safe_end)
        self.answered = self.answered or bool(answer)
        return thinking, answer

    def _may_open(self) -> bool:
        """Nothing but whitespace and a beginning of `<think>` so far: the next chunk may still open a block."""
        return OPEN.startswith(self.raw.lstrip())

    def finish(self) -> tuple[str, str]:
        """At the end of the round: whatever is still held back."""
        if self.in_think:
            rest = self.raw[self.emitted :].replace(OPEN, "")
            self.emitted = len(self.raw)
            return rest, ""
        rest = self.raw[self.emitted :]
        self.emitted = len(self.raw)
        return "", rest
