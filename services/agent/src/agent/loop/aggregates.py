"""Counts, sums and averages of the JSON lists in a tool result: the figures a summary is expected to state.

A tool that returns rows lets the model say "30 applications, 20 pending, 3,435 USD in total": those are
the list's length, the rows per value of a short-valued column and a column's sum, so the grounding check
(agent.loop.grounding) accepts them as tool figures. Built only when a figure is not found directly.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

from agent.loop.figures import source_values


def parse(content: str) -> Any:
    """The JSON value of a tool result, or None when it is not JSON."""
    if content[:1] not in "{[":
        return None
    try:
        return json.loads(content)
    except ValueError:
        return None


def numbers(data: Any) -> Iterator[float]:
    """Every number of a JSON value, and those of its prose strings (a file's text); not the digits of one-word
    strings such as ids (`TX-1032`) or timestamps: those are labels, not figures."""
    if type(data) is dict:
        data = data.values()
    for item in data:
        kind = type(item)
        if kind is int or kind is float:
            yield abs(float(item))
        elif kind is dict or kind is list:
            yield from numbers(item)
        elif kind is str and " " in item:
            yield from source_values(item)[0]


_NUMBER = (int, float)


def aggregates(data: Any, path: str = "") -> Iterator[tuple[float, str]]:
    """Counts, sums and averages a summary is expected to state: list lengths, column totals, value counts."""
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(value, dict | list):
                yield from aggregates(value, key)
    elif isinstance(data, list) and data:
        yield float(len(data)), f"number of {path or 'items'}"
        if type(data[0]) is dict:
            for column in data[0]:  # tools return rows of one shape: the first row names the columns
                yield from _column(column, [row[column] for row in data if type(row) is dict and column in row])
        else:
            yield from _column(path or "items", data)


def _column(name: str, cells: list[Any]) -> Iterator[tuple[float, str]]:
    """Aggregates of one column (or list), by the type of its first cell."""
    first = type(cells[0])
    if first in _NUMBER:
        numbers = [float(x) for x in cells if type(x) in _NUMBER]
        yield sum(numbers), f"sum of {name}"
        yield sum(numbers) / len(numbers), f"average of {name}"
    elif first is str or first is bool:
        counts = Counter(x for x in cells if type(x) is str or type(x) is bool)
        if len(counts) <= 20:  # a status or a method, not an id: count the rows per value
            yield from ((float(n), f"rows with {name}={value}") for value, n in counts.items())
    elif first is dict or first is list:
        for cell in cells:
            yield from aggregates(cell, name)
