"""Payment reports: deposits and withdrawals for a day or a range of days."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field

from agent_tools import deps
from agent_tools.dates import parse_range
from agent_tools.tools import tool

StartDate = Annotated[str, Field(description="First day: 'today', 'yesterday', 'bugün', 'dün' or YYYY-MM-DD.")]
EndDate = Annotated[
    str, Field(description="Last day of a range (same formats); empty means the same day as start_date.")
]


def _money(value: Any) -> float:
    return round(float(value or 0), 2)


@tool()
def depozit_ozeti(start_date: StartDate = "today", end_date: EndDate = "") -> dict[str, Any]:
    """Returns deposits (money paid IN) for a day or range: total USD, count, average, split by payment method.

    WHEN TO USE: the user asks how much money was deposited or paid in, how many deposits there were,
    the average deposit, or deposits by method (card, bank transfer, crypto, e-wallet).
    Trigger phrases: "deposits today", "how much was deposited", "total deposits", "deposit summary",
    "yatırım", "depozit", "bugün ne kadar yatırıldı", "yatırılan para", "para yatırma", "dünkü yatırımlar".
    You do not know these numbers: ALWAYS call this tool for deposit questions, never estimate.

    Example: "Bugün kaç dolar yatırıldı?" / "How many dollars were deposited yesterday?"

    WHEN NOT TO USE: money taken OUT (withdrawals, çekim, para çekme) -> cekim_ozeti. One customer's
    balance -> musteri_bakiyesi. Trading volume in lots -> islem_hacmi. What a deposit is, or a sum on
    amounts the user gives ("if I pay in X and take out Y"): answer yourself, no company data is asked.
    """
    d = deps.current()
    days = parse_range(start_date, end_date, d.today())
    lo, hi = days.bounds()
    where = "FROM deposits WHERE created_at >= ? AND created_at < ?"
    total = d.query(f"SELECT COUNT(*) AS n, SUM(amount_usd) AS total {where}", (lo, hi))[0]
    methods = d.query(
        f"SELECT method, COUNT(*) AS n, SUM(amount_usd) AS total {where} GROUP BY method ORDER BY method", (lo, hi)
    )
    count = int(total["n"] or 0)
    return {
        **days.as_dict(),
        "currency": "USD",
        "count": count,
        "total_usd": _money(total["total"]),
        "average_usd": _money(float(total["total"] or 0) / count) if count else 0.0,
        "by_method": {m["method"]: {"count": int(m["n"]), "total_usd": _money(m["total"])} for m in methods},
    }


@tool()
def cekim_ozeti(start_date: StartDate = "today", end_date: EndDate = "") -> dict[str, Any]:
    """Returns withdrawals (money paid OUT) for a day or range: total USD, count, by status, how many await approval.

    WHEN TO USE: the user asks about withdrawals, payouts, money taken out, or withdrawal requests
    waiting for approval. Trigger phrases: "withdrawals today", "how much was withdrawn",
    "pending withdrawals", "withdrawals awaiting approval", "çekim", "para çekme", "çekimler",
    "bugün ne kadar çekildi", "onay bekleyen çekimler", "bekleyen çekim talepleri".
    You do not know these numbers: ALWAYS call this tool for withdrawal questions, never estimate.

    Example: "Onay bekleyen kaç çekim var?" / "What is today's withdrawal total?"

    WHEN NOT TO USE: money paid IN (deposits, yatırım) -> depozit_ozeti. One customer's balance ->
    musteri_bakiyesi.
    """
    d = deps.current()
    days = parse_range(start_date, end_date, d.today())
    lo, hi = days.bounds()
    rows = d.query(
        "SELECT status, COUNT(*) AS n, SUM(amount_usd) AS total FROM withdrawals "
        "WHERE created_at >= ? AND created_at < ? GROUP BY status ORDER BY status",
        (lo, hi),
    )
    waiting = d.query("SELECT COUNT(*) AS n, SUM(amount_usd) AS total FROM withdrawals WHERE status = ?", ("pending",))[
        0
    ]
    by_status = {r["status"]: {"count": int(r["n"]), "total_usd": _money(r["total"])} for r in rows}
    pending = by_status.get("pending", {"count": 0, "total_usd": 0.0})
    return {
        **days.as_dict(),
        "currency": "USD",
        "count": sum(s["count"] for s in by_status.values()),
        "total_usd": _money(sum(s["total_usd"] for s in by_status.values())),
        "by_status": by_status,
        "awaiting_approval": {"count": pending["count"], "total_usd": pending["total_usd"]},
        "awaiting_approval_all_dates": {"count": int(waiting["n"] or 0), "total_usd": _money(waiting["total"])},
    }
