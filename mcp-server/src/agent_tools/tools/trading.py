"""Trading reports: open-position distribution and traded volume per symbol."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from agent_tools import deps
from agent_tools.dates import parse_range
from agent_tools.tools import tool

Symbol = Annotated[
    str, Field(description="Instrument symbol such as EURUSD, XAUUSD (gold), GBPUSD; empty means every symbol.")
]


def _symbol(raw: str, table: str) -> str | None:
    """Normalize 'eur/usd' -> 'EURUSD' and check it exists; None for 'all symbols'."""
    text = "".join(ch for ch in raw.upper() if ch.isalnum())
    aliases = {"GOLD": "XAUUSD", "ALTIN": "XAUUSD", "BITCOIN": "BTCUSD"}
    text = aliases.get(text, text)
    if not text or text in {"ALL", "HEPSI", "TUMU"}:
        return None
    known = [r["symbol"] for r in deps.current().query(f"SELECT DISTINCT symbol FROM {table} ORDER BY symbol")]
    if text not in known:
        raise ToolError(f"unknown symbol {raw!r}; known symbols: {', '.join(known)}")
    return text


def _lots(value: Any) -> float:
    return round(float(value or 0), 2)


@tool()
def pozisyon_dagilimi(symbol: Symbol = "") -> dict[str, Any]:
    """Returns the OPEN positions on a symbol right now: how many accounts are long vs short, and their lots.

    WHEN TO USE: the user asks about open positions, exposure, or how clients are positioned (long/short,
    buy/sell side) on an instrument. Trigger phrases: "open positions on EURUSD", "how many are long gold",
    "long vs short", "position distribution", "açık pozisyonlar", "pozisyon dağılımı",
    "kaç hesap long", "altında kaç kişi short", "EURUSD pozisyonları".
    You do not know live positions: ALWAYS call this tool for them.

    Example: "XAUUSD'de kaç hesap long, kaç hesap short?" / "Show the open positions on EURUSD."

    WHEN NOT TO USE: how much was TRADED (volume, lots executed on a day) -> islem_hacmi.
    A customer's money (balance, equity) -> musteri_bakiyesi.
    """
    d = deps.current()
    sym = _symbol(symbol, "positions")
    where, params = ("WHERE status = ? AND symbol = ?", ("open", sym)) if sym else ("WHERE status = ?", ("open",))
    rows = d.query(
        "SELECT symbol, side, COUNT(*) AS n, COUNT(DISTINCT customer_id) AS accounts, "
        f"SUM(lots) AS lots FROM positions {where} GROUP BY symbol, side ORDER BY symbol, side",
        params,
    )
    per: dict[str, dict[str, Any]] = {}
    for r in rows:
        entry = per.setdefault(
            r["symbol"], {side: {"accounts": 0, "positions": 0, "lots": 0.0} for side in ("long", "short")}
        )
        entry[r["side"]] = {"accounts": int(r["accounts"]), "positions": int(r["n"]), "lots": _lots(r["lots"])}
    for entry in per.values():
        entry["net_lots"] = _lots(entry["long"]["lots"] - entry["short"]["lots"])
    if sym:
        empty = {s: {"accounts": 0, "positions": 0, "lots": 0.0} for s in ("long", "short")} | {"net_lots": 0.0}
        return {"symbol": sym, "status": "open", **per.get(sym, empty)}
    return {"symbol": "ALL", "status": "open", "by_symbol": per}


@tool()
def islem_hacmi(
    symbol: Symbol = "",
    start_date: Annotated[str, Field(description="Day: 'today', 'yesterday', 'bugün', 'dün' or YYYY-MM-DD.")] = "today",
    end_date: Annotated[str, Field(description="Last day of a range; empty means one day.")] = "",
) -> dict[str, Any]:
    """Returns the traded volume in lots (and number of trades, buy vs sell) for a symbol on a day or range.

    WHEN TO USE: the user asks how much was traded, the trading volume, lots executed or number of trades.
    Trigger phrases: "trading volume", "how many lots were traded", "volume on EURUSD today",
    "işlem hacmi", "bugün kaç lot işlem yapıldı", "EURUSD hacmi", "dünkü işlem hacmi".
    You do not know these numbers: ALWAYS call this tool for volume questions.

    Example: "Bugün EURUSD'de işlem hacmi ne kadar?" / "How many lots of gold were traded yesterday?"

    WHEN NOT TO USE: positions that are OPEN now (long vs short) -> pozisyon_dagilimi. Money deposited
    -> depozit_ozeti.
    """
    d = deps.current()
    sym = _symbol(symbol, "trades")
    days = parse_range(start_date, end_date, d.today())
    lo, hi = days.bounds()
    where = "WHERE executed_at >= ? AND executed_at < ?" + (" AND symbol = ?" if sym else "")
    rows = d.query(
        "SELECT symbol, side, COUNT(*) AS n, SUM(lots) AS lots FROM trades "
        f"{where} GROUP BY symbol, side ORDER BY symbol, side",
        (lo, hi, sym) if sym else (lo, hi),
    )
    per: dict[str, dict[str, Any]] = {}
    for r in rows:
        entry = per.setdefault(r["symbol"], {"trades": 0, "lots": 0.0, "buy_lots": 0.0, "sell_lots": 0.0})
        entry["trades"] += int(r["n"])
        entry["lots"] = _lots(entry["lots"] + float(r["lots"]))
        entry[f"{r['side']}_lots"] = _lots(r["lots"])
    total = {"trades": sum(e["trades"] for e in per.values()), "lots": _lots(sum(e["lots"] for e in per.values()))}
    if sym:
        return {"symbol": sym, **days.as_dict(), **per.get(sym, {**total, "buy_lots": 0.0, "sell_lots": 0.0})}
    return {"symbol": "ALL", **days.as_dict(), **total, "by_symbol": per}
