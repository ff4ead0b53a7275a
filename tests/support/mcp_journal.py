"""A minimal MCP server process that writes a journal line each time its tool runs, for restart tests.

`python -m tests.support.mcp_journal PORT JOURNAL`: the tool `record(tag, hold)` appends `tag` to JOURNAL, then
waits `hold` seconds before answering, so a test can kill the server while a call it has run is unanswered.
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import uvicorn
from mcp.server import MCPServer
from mcp.server.transport_security import TransportSecuritySettings


def main(port: int, journal: Path) -> None:
    server = MCPServer("journal")

    @server.tool()
    async def record(tag: str, hold: float = 0.0) -> str:
        """Writes the tag to the journal, then answers after `hold` seconds."""
        with journal.open("a", encoding="utf-8") as out:
            out.write(tag + "\n")
        await asyncio.sleep(hold)
        return f"recorded {tag}"

    app = server.streamable_http_app(
        stateless_http=True,
        json_response=True,
        transport_security=TransportSecuritySettings(allowed_hosts=["127.0.0.1:*"]),
    )
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning")


if __name__ == "__main__":
    main(int(sys.argv[1]), Path(sys.argv[2]))
