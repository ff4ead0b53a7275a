"""`local-agent`: the whole agent on one machine with Ollama installed — no Docker, no Redis, no queue.

state.py   the state directory: generated MCP token, admin API key, audit log, demo data (kept across starts)
steps.py   the start-up checks (Ollama answers, the model is there, warm-up) and the gate that puts a failed
           check into the chat answer
main.py    the command: steps in order, the MCP server as a child process, the API served in this process
"""
