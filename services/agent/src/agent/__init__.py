"""local-agent: the agent API, tool loop, GPU queue and worker."""
