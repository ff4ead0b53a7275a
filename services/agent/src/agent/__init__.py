"""local-agent: the agent API, tool loop, GPU queue and worker."""

__version__ = "0.1.0"
