"""Note tools: save a note and list saved notes (a small SQLite store in DATA_DIR)."""

from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver.exceptions import ToolError
from pydantic import Field

from agent_tools import deps
from agent_tools.notes_store import MAX_NOTE_CHARS
from agent_tools.tools import tool


@tool(read_only=False, free_text=("text", "title"))
def not_kaydet(
    text: Annotated[str, Field(description="The note's text, exactly what the user asked to remember.")],
    title: Annotated[str, Field(description="Optional short title; leave empty to use the first words.")] = "",
) -> dict[str, Any]:
    """Saves a note and returns it with its id and time.

    WHEN TO USE: the user asks to note, remember, save or write something down for later.
    Trigger phrases: "take a note", "remember that", "save this", "write down", "not al",
    "not kaydet", "bunu kaydet", "unutma", "aklında tut", "not et".
    Nothing is remembered unless it is saved: ALWAYS call this tool when asked to keep something.

    Example: "Not al: yarın 10'da risk toplantısı var." / "Remember that the audit is on Friday."

    WHEN NOT TO USE: to show or search notes saved earlier, use notlari_getir. Do not save report
    results unless the user asks to. Advice or tips about taking notes ask for no note to be saved:
    answer yourself.
    """
    body = text.strip()
    if not body:
        raise ToolError("the note is empty: say what should be saved")
    if len(body) > MAX_NOTE_CHARS:
        raise ToolError(f"the note is {len(body)} characters; the limit is {MAX_NOTE_CHARS}")
    heading = (title.strip() or " ".join(body.split()[:6]))[:120]
    d = deps.current()
    try:
        note = d.notes.add(deps.user(), heading, body, d.now())
    except OverflowError as exc:
        raise ToolError(str(exc)) from exc
    return {"saved": True, "note": note}


@tool(free_text=("contains",))
def notlari_getir(
    contains: Annotated[str, Field(description="Optional word to filter notes by; empty lists all.")] = "",
    limit: Annotated[int, Field(ge=1, le=100, description="Most notes to return, newest first.")] = 20,
) -> dict[str, Any]:
    """Returns the notes this user saved, newest first (id, title, text, time), optionally filtered by a word.

    WHEN TO USE: the user asks what was noted or saved before, or to show, list or search notes.
    Trigger phrases: "my notes", "what did I save", "show the notes", "notlarım", "notları göster",
    "notları getir", "kaydettiğim notlar", "ne not almıştım".
    Saved notes are not in your memory: ALWAYS call this tool to see them.

    Example: "Notlarımı göster." / "What notes do I have about the audit?"

    WHEN NOT TO USE: to save a new note use not_kaydet. Files on disk are not notes: use dosya_ara
    / dosya_oku for them.
    """
    notes, total = deps.current().notes.list(deps.user(), limit, contains.strip() or None)
    return {"count": len(notes), "total_matching": total, "notes": notes}
