"""The customer-id rule: how a customer ID looks wherever a tool, a result or an audit record names one."""

from __future__ import annotations

import re

CUSTOMER_ID = re.compile(r"\bC\d{3,12}\b")  # as results and the audit log carry it
# As a user or the model may type it in a tool argument: "C1001", "c 1001", "C-1001".
_ID_ARGUMENT = re.compile(r"^[Cc]\s*-?\s*(\d{1,12})$")
MAX_IDS = 50  # customer IDs kept per audited tool result


def customer_ids(text: str) -> list[str]:
    """Customer IDs mentioned in `text` (sorted, at most MAX_IDS): who a tool result was about."""
    return sorted(set(CUSTOMER_ID.findall(text)))[:MAX_IDS]


def parse_customer_id(text: str) -> str | None:
    """The canonical ID ("C1001") if the whole of `text` is a customer ID in a form people type, else None."""
    match = _ID_ARGUMENT.match(text.strip())
    return f"C{match.group(1)}" if match else None
