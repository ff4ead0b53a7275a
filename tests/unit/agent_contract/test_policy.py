"""The roles → tools policy: the shipped roles, file validation, SSO group mapping, tool names checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent_contract.policy import Policy, PolicyError, load_policy
from tests.support.contract import PERSONAL_TOOLS, TOOL_NAMES

ALL = TOOL_NAMES


def test_shipped_roles_grant_what_the_design_says() -> None:
    policy = load_policy()
    assert policy.tools_for("admin", ALL) == ALL
    assert policy.tools_for("support", ALL) == ALL
    assert policy.tools_for("operations", ALL) == [t for t in ALL if t not in PERSONAL_TOOLS]
    assert "musteri_bakiyesi" in PERSONAL_TOOLS
    assert policy.tools_for("guest", ALL) == []
    assert policy.tools_for("no-such-role", ALL) == []


def test_the_shipped_policy_names_only_tools_the_server_has() -> None:
    assert load_policy().unknown_tools(ALL) == []


def test_a_misspelt_tool_name_is_found() -> None:
    policy = Policy({"admin": frozenset({"*"}), "ops": frozenset({"kyc_ozeti", "kyc_ozti", "depozit"})})
    assert policy.unknown_tools(ALL) == ["depozit", "kyc_ozti"]


def test_a_policy_file_replaces_the_shipped_one(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("roles:\n  auditors: [kyc_ozeti]\n  nobody:\n")
    policy = load_policy(path)
    assert policy.allows("auditors", "kyc_ozeti") and not policy.allows("auditors", "musteri_bakiyesi")
    assert policy.tools_for("nobody", ALL) == [] and policy.source == str(path)


@pytest.mark.parametrize(
    "text, message",
    [
        ("roles: [admin]", "expected a mapping"),
        ("roles:\n  'bad role': ['*']", "must match"),
        ("roles:\n  ops: kyc_ozeti", "must list tool names"),
        ("roles:\n  ops: [42]", "must list tool names"),
        ("roles:\n  ops: ['']", "must list tool names"),
        ("roles:\n  ops: [kyc_ozeti]\ngroups:\n  it: admins", "`groups` must map"),
        ("roles: {ops: [", "not valid YAML"),
    ],
)
def test_malformed_policies_are_refused_with_the_reason(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(text)
    with pytest.raises(PolicyError, match=message):
        load_policy(path)


def test_a_missing_policy_file_is_an_error_not_an_open_door(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot be read"):
        load_policy(tmp_path / "absent.yaml")


def test_sso_groups_map_to_the_first_listed_role() -> None:
    policy = Policy(
        {"admin": frozenset("*"), "support": frozenset(), "operations": frozenset()},
        {"cn=ops,ou=groups": "operations", "helpdesk": "support"},
    )
    assert policy.role_for_groups(["cn=ops,ou=groups"]) == "operations"
    assert policy.role_for_groups(["cn=ops,ou=groups", "helpdesk"]) == "support"
    assert policy.role_for_groups(["operations", "admin"]) == "admin"
    assert policy.role_for_groups(["marketing"]) is None


def test_front_end_users_map_to_roles_first_match_wins(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text(
        "roles:\n  support: [musteri_bakiyesi]\n  operations: [kyc_ozeti]\n"
        "users:\n  ayse@corp.example: support\n  '*@corp.example': operations\n"
    )
    policy = load_policy(path)
    assert policy.role_for_user("Ayse@corp.example") == "support"
    assert policy.role_for_user("mehmet@corp.example") == "operations"
    assert policy.role_for_user("mallory@elsewhere.example") is None


def test_a_user_mapped_to_an_unknown_role_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("roles:\n  support: []\nusers:\n  ayse@corp.example: admin\n")
    with pytest.raises(PolicyError, match="users"):
        load_policy(path)
