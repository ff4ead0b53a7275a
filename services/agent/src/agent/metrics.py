"""Prometheus metrics of the agent (API and worker): `agent_` prefix, bounded labels, buckets up to 120 s."""

from __future__ import annotations

from prometheus_client import Counter, Gauge, Histogram

# Roughly x2 per step with extra resolution where LLM rounds cluster (1-60 s); +Inf is added by the client.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2, 4, 8, 15, 30, 45, 60, 90, 120)

ROUND_DURATION = Histogram(
    "agent_round_duration_seconds", "One LLM round, enqueue to last token", ["model", "round"], buckets=BUCKETS
)
QUEUE_WAIT = Histogram("agent_queue_wait_seconds", "Time a round waited for the GPU worker", buckets=BUCKETS)
# agent-api's; multiprocess_mode only keeps the 0 that agent-worker's slot processes also create one series.
QUEUE_DEPTH = Gauge("agent_queue_depth", "Rounds waiting for the GPU worker", multiprocess_mode="livemax")
REQUEST_DURATION = Histogram(
    "agent_request_duration_seconds",
    "Whole HTTP request, by outcome: ok, refused (4xx), client_left (the client closed first: 499), error (5xx)",
    ["endpoint", "status", "outcome"],
    buckets=BUCKETS,
)


def outcome(status: int) -> str:
    if status == 499:
        return "client_left"
    return "ok" if status < 400 else "refused" if status < 500 else "error"


TOOL_CALLS = Counter("agent_tool_calls_total", "Tool calls asked for by the model, by outcome", ["tool", "outcome"])
TOOL_DURATION = Histogram(
    "agent_tool_duration_seconds", "Tool call round trip to the MCP server", ["tool"], buckets=BUCKETS
)
LLM_TOKENS = Counter("agent_llm_tokens_total", "Tokens processed by the model", ["model", "kind"])
TIME_TO_FIRST_TOKEN = Histogram("agent_llm_time_to_first_token_seconds", "Round start to first token", buckets=BUCKETS)
ROUNDS_PER_REQUEST = Histogram(
    "agent_rounds_per_request", "LLM rounds one request needed", buckets=(1, 2, 3, 4, 5, 6, 8, 10, 15, 20)
)
GROUNDING_CHECKS = Counter(
    "agent_grounding_checks_total", "Final answers by grounding status of their figures", ["status"]
)
UNGROUNDED_FIGURES = Counter(
    "agent_ungrounded_figures_total", "Figures in answers not found in the tool results", ["kind"]
)
AUDIT_FAILURES = Counter("agent_audit_write_failures_total", "Audit records that could not be written")
REJECTED = Counter("agent_rejected_total", "Requests refused before reaching the model", ["reason"])
MODEL_UP = Gauge("agent_model_up", "1 while this worker's model server (any engine) answers, 0 otherwise", ["gpu"])
# The same, under its name before engines other than Ollama were served: kept one release for dashboards of users.
OLLAMA_UP = Gauge("agent_ollama_up", "Deprecated: agent_model_up under its old name", ["gpu"])
MODEL_PRESENT = Gauge("agent_model_present", "1 when the configured model is pulled in this worker's Ollama", ["gpu"])
CLIENT_TASKS = Counter(
    "agent_client_tasks_total",
    "Client background tasks (titles, tags, follow-ups) by how they were served",
    ["kind", "served"],
)
# Set by agent-worker's slot processes, one round each; its /metrics combines them (prometheus_client's
# multiprocess mode, agent.queue.worker): busy is the max over the live slot processes, rounds their sum.
GPU_BUSY = Gauge(
    "agent_gpu_busy", "1 while this worker's GPU is generating (any of its slots)", ["gpu"], multiprocess_mode="livemax"
)
GPU_ROUNDS = Gauge(
    "agent_gpu_rounds",
    "rounds this worker's GPU is generating now (at most WORKER_SLOTS)",
    ["gpu"],
    multiprocess_mode="livesum",
)

# Tool names reach labels only after validation against the MCP server's list, so the set stays bounded;
# an invented name is counted under this one label instead.
