"""The worst history the answer check meets: 199 messages of distinct amounts (~880 KB, within MAX_BODY_BYTES and
MAX_MESSAGES) and an answer of amounts no tool gave, each of which is then sought in the whole history. Seeded: the
same text every run. Used by tests/regressions/test_a_long_history_stalls_no_one.py and scripts/bench-grounding."""

from __future__ import annotations

import random


def figures(seed: int, chars: int) -> str:
    """`chars` of distinct amounts, as a statement or an earlier answer would list them."""
    rng, parts, size = random.Random(seed), [], 0
    while size < chars:
        part = f"account {seed}-{size} holds {rng.randint(1, 10**7):,}.{rng.randint(0, 99):02d} USD; "
        parts.append(part)
        size += len(part)
    return "".join(parts)


def history(seed: int = 0) -> list[dict[str, str]]:
    """199 messages, ~880 KB of figures, ending with the question. Another `seed`, other texts: the check indexes
    the texts it has seen, so a measurement of its full cost needs texts new to the process."""
    rows = range(seed * 1000, seed * 1000 + 198)
    messages = [{"role": "user" if i % 2 == 0 else "assistant", "content": figures(i, 4_400)} for i in rows]
    return [*messages, {"role": "user", "content": "how many dollars were deposited today?"}]


def invented_answer() -> str:
    """~20 amounts, none from a tool: every one is sought in the history, pairs derived."""
    return "Deposits today: " + figures(999, 400)
