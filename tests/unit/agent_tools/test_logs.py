"""Log setup of the MCP server: request-id cleaning."""

from __future__ import annotations


def test_request_ids_are_sanitised() -> None:
    from agent_tools.logs import clean_request_id

    assert clean_request_id("req-1.a:b_c") == "req-1.a:b_c"
    assert clean_request_id("bad id\nwith newline") is None
    assert clean_request_id("x" * 129) is None
    assert clean_request_id(None) is None
