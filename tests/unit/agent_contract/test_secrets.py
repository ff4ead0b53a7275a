"""Secret-or-file: VAR wins when set and non-empty, else VAR_FILE; an unreadable file is a named error."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import SecretStr

from agent_contract.secrets import RotatingSecret, SecretFileError, read_secret


def test_the_value_wins_over_the_file(tmp_path: Path) -> None:
    (tmp_path / "t").write_text("from-file\n")
    assert read_secret(SecretStr("direct"), tmp_path / "t", "X") == "direct"


@pytest.mark.parametrize("value", [None, "", SecretStr("")])
def test_an_empty_value_falls_back_to_the_file(tmp_path: Path, value: SecretStr | str | None) -> None:
    (tmp_path / "t").write_text("  from-file\n")
    assert read_secret(value, tmp_path / "t", "X") == "from-file"


def test_neither_gives_none_and_an_empty_file_too(tmp_path: Path) -> None:
    assert read_secret(None, None, "X") is None
    (tmp_path / "t").write_text("\n")
    assert read_secret(None, tmp_path / "t", "X") is None


def test_an_unreadable_file_names_the_variable_and_the_file(tmp_path: Path) -> None:
    with pytest.raises(SecretFileError, match=r"MCP_TOKEN_FILE .*absent cannot be read"):
        read_secret(None, tmp_path / "absent", "MCP_TOKEN")


def test_a_rotating_secret_follows_its_file_and_keeps_the_last_value_when_it_vanishes(tmp_path: Path) -> None:
    path = tmp_path / "t"
    path.write_text("first\n")
    secret = RotatingSecret(None, path, "X")
    assert secret.get() == "first"
    new = tmp_path / "t.tmp"
    new.write_text("second\n")
    new.rename(path)  # how secrets-init rotates it
    assert secret.get() == "second"
    path.unlink()
    assert secret.get() == "second"


def test_a_rotating_secret_with_a_value_never_reads_a_file(tmp_path: Path) -> None:
    assert RotatingSecret(SecretStr("direct"), tmp_path / "absent", "X").get() == "direct"
    with pytest.raises(SecretFileError, match="X_FILE"):
        RotatingSecret(None, tmp_path / "absent", "X")  # unreadable before the first read: a start-up error
