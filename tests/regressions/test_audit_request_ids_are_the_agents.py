"""Issue 36: the audit's request id was the client's X-Request-ID, so two users' records could share one id (and a
client could make its records look like another's). Now every record carries an id agent-api made, returned as
the response's X-Request-ID; the client's own id is kept apart, as `client_request_id`."""

from __future__ import annotations

from pathlib import Path

from agent.security.audit_check import records
from agent.security.auth import add_key
from tests.unit.agent.security.test_auth import ASK, POLICY, api, bearer, settings_for


async def test_two_users_sending_one_request_id_get_two_audit_ids(tmp_path: Path) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY)
    keys = [add_key(tmp_path / "keys.yaml", name, "guest") for name in ("alice", "mallory")]
    async with api(settings_for(tmp_path), replies=["hi", "hi"]) as (http, _):
        responses = [
            await http.post("/v1/chat/completions", json=ASK, headers=bearer(key) | {"X-Request-ID": "shared-id"})
            for key in keys
        ]
    assert [r.status_code for r in responses] == [200, 200]
    audited = [r for r in records(tmp_path / "audit") if r["event"] == "request"]
    assert [r["user"] for r in audited] == ["alice", "mallory"]
    ids = [r["request_id"] for r in audited]
    assert len(set(ids)) == 2 and "shared-id" not in ids
    assert ids == [r.headers["x-request-id"] for r in responses]  # what the client is told is what was audited
    assert [r["client_request_id"] for r in audited] == ["shared-id", "shared-id"]
