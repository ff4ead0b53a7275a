"""Counts, sums and averages of the JSON lists in a tool result: the figures a summary is expected to state.

A tool that returns rows lets the model say "30 applications, 20 pending, 3,435 USD in total": those are
the list's length, the rows per value of a short-valued column and a column's sum, so the grounding check
(agent.checks.grounding) accepts them as tool figures. Built only when a figure is not found directly.
"""

from __future__ import annotations

import contextlib
import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

from agent.checks.figures import source_values


def parse(content: str) -> Any:
    """The JSON value of a tool result, or None when it is not JSON."""
    if content[:1] not in "{[":
        return None
    try:
        return json.loads(content)
    except ValueError:
        return None


def numbers(data: Any) -> list[float]:
    """Every number of a JSON value in document order, and those of its prose strings (a file's text); not the
    digits of one-word strings such as ids (`TX-1032`) or timestamps: those are labels, not figures."""
    found: list[float] = []
    _collect(data, found)
    return found


def _collect(node: Any, found: list[float]) -> None:
    # Appends to one list: a recursive generator (`yield from` per level) cost more than the rest of the check.
    for item in node.values() if type(node) is dict else node:
        kind = type(item)
        if kind is int or kind is float:
            found.append(abs(item))
        elif kind is dict or kind is list:
            _collect(item, found)
        elif kind is str and " " in item:
            found += source_values(item)[0]


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
        counts = _counts(cells)
        if len(counts) <= 20:  # a status or a method, not an id: count the rows per value
            yield from ((float(n), f"rows with {name}={value}") for value, n in counts.items())
    elif first is dict or first is list:
        for cell in cells:
            yield from aggregates(cell, name)


def _counts(cells: list[Any]) -> Counter[Any]:
    """Rows per string or boolean value: counted in C when the column holds only those, else cell by cell."""
    with contextlib.suppress(TypeError):  # TypeError: a dict or list among the cells
        counts = Counter(cells)
        if all(type(value) is str or type(value) is bool for value in counts):
            return counts
    return Counter(x for x in cells if type(x) is str or type(x) is bool)
