"""The contract between the agent (package `agent`) and its MCP tool server (package `agent_tools`).

Everything the two services must agree on lives here once, and both import it: the HTTP header names and
the caller identity they carry (headers), the request-id rule (request_id), the role → tools policy and its
one loader (policy, with the shipped policy.yaml), secret-or-file settings (secrets), process logging
(logs), tool-call outcome and metric label names (labels), the customer-id rule (customers) and the tool
fingerprint (fingerprint). It imports neither service.
"""
