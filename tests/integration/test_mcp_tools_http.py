# ruff: noqa: F401, F811
"""Every tool through the real `mcp-server` process and the SDK client over HTTP, against the SQLite demo db
and a fresh PostgreSQL database; expected numbers are computed here from the rows themselves."""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from typing import Any
from zoneinfo import ZoneInfo

import pytest

# Fixtures are imported by name (the shared conftest belongs to other tests), hence F401/F811 off here.
from tests.integration.mcp_fixtures import ToolServer, mcp_client, mcp_postgres, mcp_sqlite, tool_server

pytestmark = pytest.mark.integration
ZONE = ZoneInfo("Europe/Istanbul")


async def call(server: ToolServer, name: str, **args: Any) -> dict[str, Any]:
    async with mcp_client(server) as client:
        result = await client.call_tool(name, args)
    text = result.content[0].text  # type: ignore[union-attr]
    assert not result.is_error, text
    data: dict[str, Any] = json.loads(text)
    return data


async def call_error(server: ToolServer, name: str, **args: Any) -> str:
    async with mcp_client(server) as client:
        result = await client.call_tool(name, args)
    assert result.is_error
    return str(result.content[0].text)  # type: ignore[union-attr]


def on_days(rows: list[dict[str, Any]], column: str, first: dt.date, last: dt.date) -> list[dict[str, Any]]:
    return [r for r in rows if first.isoformat() <= str(r[column])[:10] <= last.isoformat()]


def today() -> dt.date:
    return dt.datetime.now(ZONE).date()


async def test_sistem_bilgisi_reports_the_configured_zone(tool_server: ToolServer) -> None:
    info = await call(tool_server, "sistem_bilgisi")
    assert info["timezone"] == "Europe/Istanbul"
    assert info["date"] == today().isoformat()
    assert info["utc_offset"] == "+3.0h"


async def test_depozit_ozeti_today(tool_server: ToolServer) -> None:
    got = await call(tool_server, "depozit_ozeti", start_date="today")
    rows = on_days(tool_server.rows("deposits"), "created_at", today(), today())
    assert rows, "the demo data must have deposits today"
    total = sum(float(r["amount_usd"]) for r in rows)
    assert got["count"] == len(rows)
    assert got["total_usd"] == pytest.approx(total, abs=0.011)
    assert got["average_usd"] == pytest.approx(total / len(rows), abs=0.011)
    methods: dict[str, list[float]] = defaultdict(list)
    for r in rows:
        methods[r["method"]].append(float(r["amount_usd"]))
    assert set(got["by_method"]) == set(methods)
    for method, amounts in methods.items():
        assert got["by_method"][method]["count"] == len(amounts)
        assert got["by_method"][method]["total_usd"] == pytest.approx(sum(amounts), abs=0.011)


async def test_depozit_ozeti_iso_range(tool_server: ToolServer) -> None:
    first, last = today() - dt.timedelta(days=6), today()
    got = await call(tool_server, "depozit_ozeti", start_date=first.isoformat(), end_date=last.isoformat())
    rows = on_days(tool_server.rows("deposits"), "created_at", first, last)
    assert (got["start_date"], got["end_date"]) == (first.isoformat(), last.isoformat())
    assert got["count"] == len(rows)
    assert got["total_usd"] == pytest.approx(sum(float(r["amount_usd"]) for r in rows), abs=0.011)


async def test_cekim_ozeti_yesterday_in_turkish(tool_server: ToolServer) -> None:
    got = await call(tool_server, "cekim_ozeti", start_date="dün")
    day = today() - dt.timedelta(days=1)
    everything = tool_server.rows("withdrawals")
    rows = on_days(everything, "created_at", day, day)
    pending = [r for r in rows if r["status"] == "pending"]
    all_pending = [r for r in everything if r["status"] == "pending"]
    assert pending, "the demo data must have withdrawals waiting for approval yesterday"
    assert got["start_date"] == day.isoformat()
    assert got["count"] == len(rows)
    assert got["total_usd"] == pytest.approx(sum(float(r["amount_usd"]) for r in rows), abs=0.011)
    assert got["awaiting_approval"]["count"] == len(pending)
    assert got["awaiting_approval"]["total_usd"] == pytest.approx(
        sum(float(r["amount_usd"]) for r in pending), abs=0.011
    )
    assert got["awaiting_approval_all_dates"]["count"] == len(all_pending)
    for status in {r["status"] for r in rows}:
        assert got["by_status"][status]["count"] == sum(1 for r in rows if r["status"] == status)


async def test_pozisyon_dagilimi_for_gold(tool_server: ToolServer) -> None:
    got = await call(tool_server, "pozisyon_dagilimi", symbol="xau/usd")
    rows = [r for r in tool_server.rows("positions") if r["symbol"] == "XAUUSD" and r["status"] == "open"]
    assert got["symbol"] == "XAUUSD"
    for side in ("long", "short"):
        mine = [r for r in rows if r["side"] == side]
        assert mine, f"the demo data must have open {side} gold positions"
        assert got[side]["positions"] == len(mine)
        assert got[side]["accounts"] == len({r["customer_id"] for r in mine})
        assert got[side]["lots"] == pytest.approx(sum(float(r["lots"]) for r in mine), abs=0.011)
    assert got["net_lots"] == pytest.approx(got["long"]["lots"] - got["short"]["lots"], abs=0.011)


async def test_islem_hacmi_eurusd_today(tool_server: ToolServer) -> None:
    got = await call(tool_server, "islem_hacmi", symbol="EURUSD", start_date="bugün")
    rows = [r for r in on_days(tool_server.rows("trades"), "executed_at", today(), today()) if r["symbol"] == "EURUSD"]
    assert rows
    assert got["trades"] == len(rows)
    assert got["lots"] == pytest.approx(sum(float(r["lots"]) for r in rows), abs=0.011)
    assert got["buy_lots"] == pytest.approx(sum(float(r["lots"]) for r in rows if r["side"] == "buy"), abs=0.011)


async def test_musteri_bakiyesi_by_id(tool_server: ToolServer) -> None:
    got = await call(tool_server, "musteri_bakiyesi", customer="c1003")
    account = next(a for a in tool_server.rows("accounts") if a["customer_id"] == "C1003")
    customer = next(c for c in tool_server.rows("customers") if c["id"] == "C1003")
    assert (got["status"], got["customer_id"], got["name"]) == ("found", "C1003", customer["name"])
    for key in ("balance", "equity", "margin"):
        assert got[key] == pytest.approx(float(account[key]), abs=0.011)
    assert got["free_margin"] == pytest.approx(float(account["equity"]) - float(account["margin"]), abs=0.011)


async def test_musteri_bakiyesi_never_picks_between_two_names(tool_server: ToolServer) -> None:
    got = await call(tool_server, "musteri_bakiyesi", customer="yilmaz")
    expected = sorted(c["id"] for c in tool_server.rows("customers") if "Yılmaz" in c["name"])
    assert len(expected) == 2
    assert got["status"] == "ambiguous"
    assert sorted(c["customer_id"] for c in got["candidates"]) == expected
    assert "balance" not in json.dumps(got)


async def test_musteri_bakiyesi_unknown_id_is_explained(tool_server: ToolServer) -> None:
    text = await call_error(tool_server, "musteri_bakiyesi", customer="C9999")
    assert "no customer has the ID C9999" in text


async def test_kyc_ozeti_counts_and_hostile_note_is_returned_as_data(tool_server: ToolServer) -> None:
    got = await call(tool_server, "kyc_ozeti", status="bekleyen")
    rows = tool_server.rows("kyc_applications")
    for status in ("pending", "approved", "rejected"):
        assert got["counts"][status] == sum(1 for r in rows if r["status"] == status)
    assert all(item["status"] == "pending" for item in got["latest"])
    assert any("ignore previous instructions" in item["note"] for item in got["latest"])


async def test_unknown_symbol_lists_known_ones(tool_server: ToolServer) -> None:
    text = await call_error(tool_server, "islem_hacmi", symbol="DOGEUSD")
    assert "unknown symbol" in text and "EURUSD" in text


async def test_file_tools_over_http(mcp_sqlite: ToolServer) -> None:
    found = await call(mcp_sqlite, "dosya_ara", pattern="policy")
    assert [f["path"] for f in found["files"]] == ["docs/policy.md"]
    read = await call(mcp_sqlite, "dosya_oku", path="docs/policy.md")
    assert read["content"] == (mcp_sqlite.files_root / "docs" / "policy.md").read_text()
    assert "'..'" in await call_error(mcp_sqlite, "dosya_oku", path="../data/notes.sqlite3")


async def test_notes_saved_then_listed(mcp_sqlite: ToolServer) -> None:
    saved = await call(mcp_sqlite, "not_kaydet", text="Denetim cuma günü saat 10'da", title="denetim")
    listed = await call(mcp_sqlite, "notlari_getir", contains="denetim")
    assert listed["notes"][0]["id"] == saved["note"]["id"]
    assert listed["notes"][0]["text"] == "Denetim cuma günü saat 10'da"
