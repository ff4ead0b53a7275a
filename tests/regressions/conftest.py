"""Regression fixtures: the integration layer's real processes (scripted Ollama, MCP server)."""

from tests.integration.conftest import agent_api, fake_ollama, mcp_server, ollama

__all__ = ["agent_api", "fake_ollama", "mcp_server", "ollama"]
