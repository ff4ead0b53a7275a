"""Render docs/configuration.md's variable tables from the code: both Settings classes and .env.example.

`scripts/gen-config-docs` writes them between the GENERATED markers; tests/unit/test_config_docs.py fails
when the file and the code disagree, so a new setting cannot ship undocumented.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from agent.settings import Settings as AgentSettings
from agent_tools.settings import Settings as ToolSettings

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "configuration.md"
ENV_EXAMPLE = REPO / ".env.example"
BLOCK = re.compile(r"(<!-- BEGIN GENERATED: (\w+)[^>]*-->\n).*?(<!-- END GENERATED: \2 -->)", re.S)


def _default(field: FieldInfo) -> str:
    value: Any = field.get_default(call_default_factory=True)
    if value is None or value == "":
        return "unset"
    if isinstance(value, list):
        value = ",".join(str(v) for v in value)
    return f"`{value}`"


def settings_table(cls: type[BaseSettings]) -> str:
    rows = ["| variable | default | meaning |", "| --- | --- | --- |"]
    for name, field in cls.model_fields.items():
        meaning = (field.description or "").replace("|", "\\|").replace("\n", " ")
        rows.append(f"| `{name.upper()}` | {_default(field)} | {meaning} |")
    return "\n".join(rows) + "\n"


def _row(name: str, value: str, meaning: str) -> str:
    return f"| `{name}` | {f'`{value}`' if value else 'empty'} | {meaning.replace('|', chr(92) + '|')} |"


def env_example_table(text: str) -> str:
    """.env.example's sections, variables, defaults and the comments above them, as one table per section.

    `# --- Title: note` starts a section (the note and the comment lines after it describe the section);
    comment lines right above a variable describe it; `# NAME=value` is a variable documented but unset.
    """
    out: list[str] = []
    comment: list[str] = []
    note = False
    for line in text.splitlines():
        section = re.match(r"^# --- ([^:]+)(?::\s*(.*))?$", line)
        var = re.match(r"^(?:# )?([A-Z][A-Z0-9_]*)=(.*)$", line)
        if section:
            out += ["", f"**{section.group(1).strip()}**", ""]
            comment, note = ([section.group(2)], True) if section.group(2) else ([], False)
        elif var and out:
            if not out[-1].startswith("|"):
                out += [" ".join(comment), ""] if note else []
                out += ["| variable | default | meaning |", "| --- | --- | --- |"]
                comment = [] if note else comment
                note = False
            out.append(_row(var.group(1), var.group(2).strip(), " ".join(comment)))
            comment = []
        elif line.startswith("#") and out:
            comment.append(line.lstrip("#").strip())
        elif not line.strip():
            comment = []
    return "\n".join(out).strip() + "\n"


def blocks() -> dict[str, str]:
    return {
        "compose": env_example_table(ENV_EXAMPLE.read_text(encoding="utf-8")),
        "agent": settings_table(AgentSettings),
        "mcp": settings_table(ToolSettings),
    }


def render(doc: str) -> str:
    """`doc` with every GENERATED block replaced by what the code says now."""
    tables = blocks()
    return BLOCK.sub(lambda m: m.group(1) + tables[m.group(2)] + m.group(3), doc)


def main(argv: list[str]) -> int:
    current = DOC.read_text(encoding="utf-8")
    fresh = render(current)
    if "--check" in argv:
        if fresh != current:
            print(f"{DOC} is out of date: run scripts/gen-config-docs", file=sys.stderr)
            return 1
        return 0
    DOC.write_text(fresh, encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
