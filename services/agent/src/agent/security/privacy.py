"""Customer privacy in the audit log: customer IDs kept, customer names replaced by keyed pseudonyms.

A pseudonym is `name:` + the first 16 hex digits of HMAC-SHA256(PSEUDONYM_KEY, folded name), so the
same customer gets the same pseudonym in every record (queries still work) while the log alone does not
name anyone. Whoever holds the key can test a guessed name: keep the key apart from the log.
Names are recognised where the tools see them: the arguments a tool declares personal (agent.api.trail)
and the `name` fields of customer tool results; those names are then also replaced in the question text.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

from agent.settings import Settings
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


def result_names(text: str) -> list[str]:
    """Customer names in a tool result: the `name` fields next to a `customer_id` in its JSON."""
    try:
        data = json.loads(text)
    except ValueError:
        return []
    found: list[str] = []
    stack: list[Any] = [data]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if isinstance(item.get("name"), str) and "customer_id" in item:
                found.append(item["name"])
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def pseudonymizer(settings: Settings, audit_key: bytes) -> Pseudonymizer:
    """PSEUDONYM_KEY(_FILE), else one derived from the audit key; None (names kept) when switched off."""
    if not settings.audit_pseudonymize:
        return Pseudonymizer(None)
    own = read_secret(settings.pseudonym_key, settings.pseudonym_key_file, "PSEUDONYM_KEY")
    key = own.encode() if own else hashlib.sha256(b"local-agent pseudonym v1\x00" + audit_key).digest()
    return Pseudonymizer(key)
