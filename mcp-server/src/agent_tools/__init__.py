"""agent-tools: the MCP tool server of local-agent."""
