"""The customer-id rule: the IDs a result names, and whether a tool argument is an ID or a name."""

from __future__ import annotations

import pytest

from agent_contract.customers import MAX_IDS, customer_ids, parse_customer_id


def test_ids_in_results_are_found_sorted_and_capped() -> None:
    assert customer_ids('{"customer_id": "C1003"} and C1001, C1003; not XC1002 or C12') == ["C1001", "C1003"]
    assert len(customer_ids(" ".join(f"C{1000 + i}" for i in range(MAX_IDS + 5)))) == MAX_IDS


@pytest.mark.parametrize(("typed", "canonical"), [("C1001", "C1001"), (" c 1001 ", "C1001"), ("C-42", "C42")])
def test_typed_ids_are_read_in_the_forms_people_type(typed: str, canonical: str) -> None:
    assert parse_customer_id(typed) == canonical


@pytest.mark.parametrize("name", ["Ayşe Kaya", "C1001 Ayşe", "Cem", ""])
def test_names_are_not_ids(name: str) -> None:
    assert parse_customer_id(name) is None
