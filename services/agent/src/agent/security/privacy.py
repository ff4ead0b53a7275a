"""Customer privacy in the audit log: customer IDs kept, customer names replaced by keyed pseudonyms.

A pseudonym is `name:` + the first 16 hex digits of HMAC-SHA256(PSEUDONYM_KEY, folded name), so the
same customer gets the same pseudonym in every record (queries still work) while the log alone does not
name anyone. Whoever holds the key can test a guessed name: keep the key apart from the log.
Names are recognised where the tools see them: the arguments a tool declares personal (agent.api.trail)
and the `name` fields of customer records in tool results; those names are then replaced wherever else they
occur in the record: the question text and every string argument of every call, whatever its key.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import unicodedata
from collections.abc import Callable, Iterable
from typing import Any

from agent.settings import Settings
from agent_contract.customers import CUSTOMER_ID, MAX_IDS
from agent_contract.secrets import read_secret


def fold(name: str) -> str:
    """Case, accents and spacing removed: "AYŞE  Kaya" and "ayse kaya" are one person."""
    decomposed = unicodedata.normalize("NFKD", name.replace("ı", "i").replace("İ", "I"))
    plain = "".join(ch for ch in decomposed if not unicodedata.combining(ch))
    return " ".join(plain.casefold().split())


class Pseudonymizer:
    """Keyed pseudonyms for customer names; with `key=None` names are kept as they are (operator's choice)."""

    def __init__(self, key: bytes | None) -> None:
        self.key = key

    def token(self, name: str) -> str:
        if self.key is None:
            return name
        digest = hmac.new(self.key, fold(name).encode(), hashlib.sha256).hexdigest()
        return f"name:{digest[:16]}"

    def digest(self, text: str) -> str:
        """Free text (a note, a search pattern) as its size and a keyed hash: equal texts match, none is readable."""
        if self.key is None:
            return f"<{len(text)} chars>"
        digest = hmac.new(self.key, b"free text\x00" + text.encode("utf-8", "replace"), hashlib.sha256).hexdigest()
        return f"text:{digest[:16]} ({len(text)} chars)"

    def text(self, text: str, names: Iterable[str]) -> str:
        """`text` with every occurrence of the given names (longest first, any case) pseudonymised."""
        if self.key is None:
            return text
        for name in sorted({n for n in names if len(n.strip()) >= 2}, key=len, reverse=True):
            pattern = r"\s+".join(re.escape(part) for part in name.split())
            text = re.sub(pattern, self.token(name), text, flags=re.IGNORECASE)
        return text


def customer_records(text: str) -> tuple[list[str], list[str]]:
    """(names, IDs) of the customer records in a tool result: the JSON objects that carry a `customer_id`.
    Free text that merely mentions a customer (a note about C1009, a file naming him) is not a record."""
    try:
        data = json.loads(text)
    except ValueError:
        return [], []
    names: list[str] = []
    ids: list[str] = []
    stack: list[Any] = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            found = item.get("customer_id")
            if isinstance(found, str) and CUSTOMER_ID.fullmatch(found):
                ids.append(found)
                if isinstance(item.get("name"), str):
                    names.append(item["name"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return names, sorted(set(ids))[:MAX_IDS]


def result_names(text: str) -> list[str]:
    """Customer names in a tool result: the `name` fields of its customer records."""
    return customer_records(text)[0]


def every_string(value: Any, change: Callable[[str], str]) -> Any:
    """`value` (JSON-like) with `change` applied to every string in it, at any depth."""
    if isinstance(value, str):
        return change(value)
    if isinstance(value, dict):
        return {k: every_string(v, change) for k, v in value.items()}
    if isinstance(value, list):
        return [every_string(v, change) for v in value]
    return value


def pseudonymizer(settings: Settings, audit_key: bytes) -> Pseudonymizer:
    """PSEUDONYM_KEY(_FILE), else one derived from the audit key; None (names kept) when switched off."""
    if not settings.audit_pseudonymize:
        return Pseudonymizer(None)
    own = read_secret(settings.pseudonym_key, settings.pseudonym_key_file, "PSEUDONYM_KEY")
    key = own.encode() if own else hashlib.sha256(b"local-agent pseudonym v1\x00" + audit_key).digest()
    return Pseudonymizer(key)
