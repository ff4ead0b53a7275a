"""The tools in process (no HTTP): registration, docstrings, dates, ambiguity, notes, errors and metrics."""

from __future__ import annotations

import datetime as dt
import inspect
from pathlib import Path

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from agent_tools import demo
from agent_tools.tools import MODULE_ORDER, describe, discover, tool
from tests.support.contract import TOOL_NAMES
from tests.unit.agent_tools.conftest import Box

NAMES = TOOL_NAMES


def test_discovery_lists_the_modules_in_design_order_and_each_name_once() -> None:
    modules = list(dict.fromkeys(spec.fn.__module__.rpartition(".")[2] for spec in discover()))
    assert modules == [m for m in MODULE_ORDER if m in modules] + sorted(set(modules) - set(MODULE_ORDER))
    assert len(set(NAMES)) == len(NAMES) and "sistem_bilgisi" in NAMES


async def test_listed_descriptions_are_the_cleaned_docstrings(box: Box) -> None:
    listed = {t.name: t for t in await box.server.list_tools()}
    for spec in discover():
        text = listed[spec.name].description or ""
        assert text == inspect.cleandoc(spec.fn.__doc__ or "")
        not_section = text.split("WHEN NOT TO USE:")[1]
        assert any(other in not_section for other in NAMES if other != spec.name), spec.name  # names a neighbour
        assert text.splitlines()[0].startswith(("Returns", "Saves"))
        assert any(ch in text for ch in "çğıöşü"), f"{spec.name} lacks Turkish trigger phrases"
    reads = {n: t.annotations.read_only_hint for n, t in listed.items() if t.annotations}
    assert reads["not_kaydet"] is False and reads["depozit_ozeti"] is True


async def test_parameters_carry_descriptions(box: Box) -> None:
    for t in await box.server.list_tools():
        for name, prop in t.input_schema.get("properties", {}).items():
            assert prop.get("description"), f"{t.name}.{name} has no description"


def test_a_docstring_without_the_sections_is_rejected() -> None:
    @tool()
    def bare() -> str:
        """Returns something."""
        return ""

    with pytest.raises(ValueError, match="WHEN TO USE"):
        describe(bare)


async def test_dates_accept_words_iso_and_ranges(box: Box) -> None:
    today = dt.datetime.now(dt.UTC).date()
    for word in ("today", "bugün", "Bugun"):
        assert (await box.ok("depozit_ozeti", start_date=word))["start_date"] == today.isoformat()
    for word in ("yesterday", "dün"):
        got = await box.ok("cekim_ozeti", start_date=word)
        assert got["start_date"] == got["end_date"] == (today - dt.timedelta(days=1)).isoformat()
    week = await box.ok("depozit_ozeti", start_date=(today - dt.timedelta(days=6)).isoformat(), end_date="today")
    day = await box.ok("depozit_ozeti")
    assert week["count"] > day["count"] > 0


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({"start_date": "next tuesday"}, "could not understand the date"),
        ({"start_date": "2024-02-30"}, "could not understand the date"),
        ({"start_date": "today", "end_date": "yesterday"}, "before start_date"),
        ({"start_date": "2020-01-01", "end_date": "2023-01-01"}, "longer than 366 days"),
    ],
)
async def test_bad_dates_are_explained(box: Box, args: dict[str, str], message: str) -> None:
    is_error, text = await box.call("depozit_ozeti", **args)
    assert is_error and message in text


async def test_customer_lookup_by_name(box: Box) -> None:
    one = await box.ok("musteri_bakiyesi", customer="Ahmet Yılmaz")
    assert (one["status"], one["customer_id"]) == ("found", "C1001")
    two = await box.ok("musteri_bakiyesi", customer="Ayşe")
    assert two["status"] == "ambiguous"
    assert [c["customer_id"] for c in two["candidates"]] == ["C1003", "C1004"]
    assert "do not choose" in two["message"]
    folded = await box.ok("musteri_bakiyesi", customer="AYSE")
    assert folded["status"] == "ambiguous"
    is_error, text = await box.call("musteri_bakiyesi", customer="%")
    assert is_error and "no customer matches" in text


async def test_symbol_aliases_and_all_symbols(box: Box) -> None:
    gold = await box.ok("pozisyon_dagilimi", symbol="altın")
    assert gold["symbol"] == "XAUUSD"
    everything = await box.ok("islem_hacmi", symbol="")
    assert set(everything["by_symbol"]) <= set(demo.SYMBOLS)
    assert everything["lots"] == pytest.approx(sum(s["lots"] for s in everything["by_symbol"].values()), abs=0.02)


async def test_kyc_status_words(box: Box) -> None:
    rejected = await box.ok("kyc_ozeti", status="reddedilen")
    assert rejected["status_filter"] == "rejected"
    assert all(item["status"] == "rejected" for item in rejected["latest"])
    is_error, text = await box.call("kyc_ozeti", status="maybe")
    assert is_error and "unknown KYC status" in text
    today = await box.ok("kyc_ozeti", start_date="today")
    assert today["total"] >= 1 and today["start_date"] == today["end_date"]


async def test_notes_round_trip_and_limits(box: Box) -> None:
    first = await box.ok("not_kaydet", text="Risk toplantısı yarın 10:00")
    await box.ok("not_kaydet", text="Audit on Friday", title="audit")
    listed = await box.ok("notlari_getir")
    assert [n["text"] for n in listed["notes"]] == ["Audit on Friday", "Risk toplantısı yarın 10:00"]
    assert first["note"]["title"] == "Risk toplantısı yarın 10:00"
    found = await box.ok("notlari_getir", contains="TOPLANTISI")
    assert found["total_matching"] == 1
    for bad, message in (("   ", "empty"), ("x" * 5000, "limit is 4000")):
        is_error, text = await box.call("not_kaydet", text=bad)
        assert is_error and message in text


async def test_system_info_has_time_and_host(box: Box) -> None:
    info = await box.ok("sistem_bilgisi")
    assert info["timezone"] == "UTC" and info["cpu_count"] >= 1 and info["hostname"]
    assert dt.datetime.fromisoformat(info["datetime"]).tzinfo is not None


async def test_metrics_count_each_outcome(box: Box) -> None:
    await box.ok("sistem_bilgisi")
    await box.call("dosya_oku", path="../x")
    await box.call("no_such_tool")
    reg = box.server.metrics.registry
    assert reg.get_sample_value("mcp_tool_calls_total", {"tool": "sistem_bilgisi", "outcome": "ok"}) == 1
    assert reg.get_sample_value("mcp_tool_calls_total", {"tool": "dosya_oku", "outcome": "tool_error"}) == 1
    assert reg.get_sample_value("mcp_tool_calls_total", {"tool": "unknown", "outcome": "unknown_tool"}) == 1
    assert reg.get_sample_value("mcp_tool_duration_seconds_count", {"tool": "sistem_bilgisi"}) == 1


async def test_reports_db_failure_is_a_tool_error(box: Box, tmp_path: Path) -> None:
    box.server.deps.reports.close()
    (tmp_path / "data" / "reports-demo.sqlite3").unlink()
    is_error, text = await box.call("depozit_ozeti")
    assert is_error and "reports database did not answer" in text


def test_tools_need_the_server() -> None:
    from agent_tools.tools.system import sistem_bilgisi

    with pytest.raises(ToolError, match="outside the MCP server"):
        sistem_bilgisi()


async def test_a_crash_is_withheld_from_the_client_and_counted(box: Box, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(sql: str, params: object = ()) -> list[dict[str, object]]:
        raise RuntimeError("internal detail postgres://secret@db")

    monkeypatch.setattr(box.server.deps.reports, "query", boom)
    is_error, text = await box.call("kyc_ozeti")
    assert is_error and "secret" not in text
    reg = box.server.metrics.registry
    assert reg.get_sample_value("mcp_tool_calls_total", {"tool": "kyc_ozeti", "outcome": "error"}) == 1
