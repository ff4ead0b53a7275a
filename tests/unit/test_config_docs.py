"""docs/configuration.md says what the code does: both Settings classes and .env.example, generated."""

from __future__ import annotations

import pytest
from pydantic_settings import BaseSettings

from agent.settings import Settings as AgentSettings
from agent_tools.settings import Settings as ToolSettings
from tests.support import config_docs


def test_the_variable_tables_are_generated_from_the_code() -> None:
    current = config_docs.DOC.read_text(encoding="utf-8")
    assert config_docs.render(current) == current, "docs/configuration.md is out of date: run scripts/gen-config-docs"


@pytest.mark.parametrize("cls", [AgentSettings, ToolSettings])
def test_every_setting_has_a_description(cls: type[BaseSettings]) -> None:
    missing = [name for name, field in cls.model_fields.items() if not field.description]
    assert missing == [], f"add a docstring under these fields of {cls.__module__}: {missing}"


def test_a_new_setting_changes_the_docs() -> None:
    class Grown(AgentSettings):
        brand_new_knob: int = 7
        """what it turns"""

    table = config_docs.settings_table(Grown)
    assert "| `BRAND_NEW_KNOB` | `7` | what it turns |" in table
    assert table != config_docs.settings_table(AgentSettings)


def test_every_env_example_variable_is_in_the_docs() -> None:
    doc = config_docs.DOC.read_text(encoding="utf-8")
    for line in config_docs.ENV_EXAMPLE.read_text(encoding="utf-8").splitlines():
        if "=" in line and line.split("=")[0].isupper() and not line.startswith("#"):
            assert f"| `{line.split('=')[0]}` |" in doc, line
