"""Regression fixtures: the integration layer's real processes (scripted Ollama, MCP server)."""

from tests.integration.conftest import fake_ollama, mcp_server, ollama

__all__ = ["fake_ollama", "mcp_server", "ollama"]
