"""Customer tool: one customer's balance, equity, margin and free margin, by ID (names give candidates)."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from agent_contract.customers import parse_customer_id
from agent_tools import deps
from agent_tools.textfold import FOLD_FROM, FOLD_TO, fold
from agent_tools.tools import tool

MAX_CANDIDATES = 10
_FOLD_SQL = f"translate(lower(name), '{FOLD_FROM}', '{FOLD_TO}')"


def _balance(customer_id: str) -> dict[str, Any]:
    rows = deps.current().query(
        "SELECT c.id, c.name, COUNT(a.id) AS accounts, SUM(a.balance) AS balance, SUM(a.equity) AS equity, "
        "SUM(a.margin) AS margin FROM customers c LEFT JOIN accounts a ON a.customer_id = c.id "
        "WHERE c.id = ? GROUP BY c.id, c.name",
        (customer_id,),
    )
    if not rows:
        raise ToolError(f"no customer has the ID {customer_id}; check the ID or search by name")
    r = rows[0]
    equity, margin = float(r["equity"] or 0), float(r["margin"] or 0)
    return {
        "status": "found",
        "customer_id": r["id"],
        "name": r["name"],
        "accounts": int(r["accounts"]),
        "currency": "USD",
        "balance": round(float(r["balance"] or 0), 2),
        "equity": round(equity, 2),
        "margin": round(margin, 2),
        "free_margin": round(equity - margin, 2),
        "margin_level_percent": round(equity / margin * 100, 1) if margin > 0 else None,
    }


@tool(personal=("customer",))
def musteri_bakiyesi(
    customer: Annotated[
        str, Field(description="The customer ID such as C1001 (preferred), or the customer's name or surname.")
    ],
) -> dict[str, Any]:
    """Returns ONE customer's balance, equity, margin and free margin in USD, looked up by customer ID.

    WHEN TO USE: the user asks how much money a specific customer has: balance, equity, margin,
    free margin, account status. Trigger phrases: "balance of customer C1001", "what is X's equity",
    "free margin of", "müşteri bakiyesi", "C1001'in bakiyesi", "müşterinin bakiyesi ne kadar",
    "serbest marjin", "özsermaye". You do not know any balance: ALWAYS call this tool for it.
    With a name instead of an ID, the tool returns the matching customers with their IDs; if more
    than one matches, ask the user which ID they mean; never pick one yourself.

    Example: "C1003 müşterisinin bakiyesi ne kadar?" / "What is the free margin of customer C1010?"

    WHEN NOT TO USE: money deposited or withdrawn (by everyone, per day) -> depozit_ozeti /
    cekim_ozeti. Open positions on a symbol -> pozisyon_dagilimi. Never call it for every customer.
    What balance, margin or a margin call mean in general, with no customer named: answer yourself.
    """
    text = customer.strip()
    if not text or len(text) > 100 or "\x00" in text:
        raise ToolError("give one customer ID such as C1001, or a name of at most 100 characters")
    customer_id = parse_customer_id(text)
    if customer_id is not None:
        return _balance(customer_id)
    needle = fold(" ".join(text.split())).replace("!", "!!").replace("%", "!%").replace("_", "!_")
    rows = deps.current().query(
        f"SELECT id, name FROM customers WHERE {_FOLD_SQL} LIKE ? ESCAPE '!' ORDER BY id LIMIT ?",
        (f"%{needle}%", MAX_CANDIDATES + 1),
    )
    if not rows:
        raise ToolError(f"no customer matches {text!r}; ask the user for the customer ID (like C1001)")
    if len(rows) == 1:
        return _balance(str(rows[0]["id"]))
    shown = rows[:MAX_CANDIDATES]
    return {
        "status": "ambiguous",
        "message": f"{len(shown)}{'+' if len(rows) > MAX_CANDIDATES else ''} customers match {text!r}. Ask the "
        "user which customer ID they mean; do not choose one and do not look them all up.",
        "candidates": [{"customer_id": r["id"], "name": r["name"]} for r in shown],
    }
