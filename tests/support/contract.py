"""The tool names every test layer checks against, taken from the tool server's registry (never written out).

Adding a tool changes them by itself: tests/unit/test_adding_a_tool.py shows the tool function and its
policy lines are all a new tool needs.
"""

from agent_tools.tools import AUDIT_META, discover

# Every tool, in the MCP server's listing order.
TOOL_NAMES = [spec.name for spec in discover()]
# Tools with an argument that names one customer (declared `@tool(personal=...)`): the roles without
# per-customer access (operations) must not have them.
PERSONAL_TOOLS = [spec.name for spec in discover() if spec.meta[AUDIT_META]["personal"]]
