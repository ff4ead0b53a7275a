"""agent-tools: the MCP tool server of local-agent."""

__version__ = "0.1.0"
