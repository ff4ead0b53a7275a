"""The API's enqueue: a round's RQ job, saved and admitted by one Lua script in one Redis round trip.

The job is RQ's own: RQ builds it (`Queue.create_job`, agent.queue.rq_adapter.round_job) and its hash is RQ's
`Job.to_dict()`, so `rq info` and RQ's `Job.fetch` (in agent-worker's slot processes, RQ's own worker) read it as
RQ's, and no field of RQ's schema is spelled here. What RQ's `enqueue_job` would add in its own MULTI (the queue in
RQ's set of queues, the job's TTL, the push) the script does, with the admission check, in one EVALSHA: RQ's
pipeline cannot hold a check whose answer decides whether to push.

The script admits the round only while both user queues hold fewer than the limit (MAX_QUEUE_DEPTH; a client
task round only while no user round waits; -1 for a retried round, admitted once already), and writes the hash
only when it admits it: a refused round leaves nothing behind. An admitted round's claim stream is opened in the
same step (agent.queue.keys.claim_key: the worker host that pops the round claims it there). An admitted task
round joins the task rounds under way; an admitted user round sets their cancel flags to PREEMPT in the same step.
Atomic, so API replicas racing at the limit cannot overshoot, and a task round cannot slip in between a user
round's admission and its preemption. The cancel flags' names come from the task set's members, so they cannot be
declared in KEYS: fine on one Redis server, not on a cluster.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import redis.asyncio as aioredis

from agent.backends.base import RoundRequest
from agent.queue import keys, rq_adapter
from agent.queue.guard import META_SIGNATURE, RoundSigner

NO_LIMIT = -1
_FIELDS = tuple(f.name for f in dataclasses.fields(RoundRequest))

# KEYS: 1-2 the user queues, 3 this round's queue, 4 TASK_ROUNDS, 5 the job hash, 6 the task queue, 7 RQ's set of
# queues, 8 the caller's fair-share set (job id → when its entry lapses, ms), 9 the round's claim stream. ARGV: 1 job
# id, 2 limit, 3 at front ('1'), 4 role, 5-6 the cancel flag's name around a job id, 7 PREEMPT, 8 CANCEL_TTL, 9 the
# job's TTL, 10 the caller's limit (-1: none), 11 count the round in its share ('1'), 12 a share entry's lifetime
# (ms), 13 the claim's lifetime (s), 14... the hash's fields and values.
# Reply: {admitted 0|1, the user queues' jobs (plus this one if admitted), task rounds preempted, the jobs of all
# three queues once it is done, 1 if refused for the caller's share}.
_ADMIT = """
local depth = redis.call('llen', KEYS[1]) + redis.call('llen', KEYS[2])
local limit = tonumber(ARGV[2])
if limit >= 0 and depth >= limit then
  return {0, depth, 0, depth + redis.call('llen', KEYS[6]), 0}
end
if ARGV[11] == '1' then
  local t = redis.call('time')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  redis.call('zremrangebyscore', KEYS[8], '-inf', now)
  local mine = redis.call('zcard', KEYS[8])
  if tonumber(ARGV[10]) >= 0 and mine >= tonumber(ARGV[10]) then
    return {0, depth, 0, depth + redis.call('llen', KEYS[6]), 1}
  end
  redis.call('zadd', KEYS[8], now + tonumber(ARGV[12]), ARGV[1])
  redis.call('pexpire', KEYS[8], ARGV[12])
end
redis.call('hset', KEYS[5], unpack(ARGV, 14))
redis.call('expire', KEYS[5], ARGV[9])
redis.call('del', KEYS[9])
redis.call('xadd', KEYS[9], '0-1', 'admitted', '1')
redis.call('expire', KEYS[9], ARGV[13])
redis.call('sadd', KEYS[7], KEYS[3])
if ARGV[3] == '1' then redis.call('lpush', KEYS[3], ARGV[1]) else redis.call('rpush', KEYS[3], ARGV[1]) end
local waiting = redis.call('llen', KEYS[1]) + redis.call('llen', KEYS[2]) + redis.call('llen', KEYS[6])
if ARGV[4] == 'task' then
  redis.call('sadd', KEYS[4], ARGV[1])
  return {1, depth + 1, 0, waiting, 0}
end
local tasks = redis.call('smembers', KEYS[4])
for _, id in ipairs(tasks) do
  redis.call('set', ARGV[5] .. id .. ARGV[6], ARGV[7], 'EX', ARGV[8])
end
return {1, depth + 1, #tasks, waiting, 0}
"""
_CANCEL_KEY_AROUND = keys.cancel_key("\n").split("\n")  # the flag's name before and after the job id


@dataclass(frozen=True)
class JobSpec:
    """One round as an RQ job: plain JSON arguments and the lifetimes RQ enforces."""

    job_id: str
    args: tuple[Any, ...]  # (the round's request fields, enqueued_at, job_id): agent.queue.jobs.run_round's
    timeout: int  # RQ's job timeout (SIGALRM in the slot process): the round's own limits plus a margin
    ttl: int  # how long the job may wait in the queue
    claim_ttl: int  # how long its claim stream lives: the wait and the round (agent.queue.keys.claim_key)
    description: str  # shows in RQ's logs: never the prompt


@dataclass(frozen=True)
class Share:
    """The caller's fair share of the queue (MAX_ROUNDS_PER_USER): whose set the round counts in, the most rounds
    that set may hold for this one to be admitted (NO_LIMIT: a round of a conversation under way), how long an
    entry outlives a crashed API that never removed it."""

    key: str | None  # None: the caller is nobody in particular (AGENT_AUTH=none, client tasks): not counted
    limit: int
    lifetime_ms: int


@dataclass(frozen=True)
class Admission:
    """The admit script's answer: whether the job is queued, the user queues' depth (what MAX_QUEUE_DEPTH
    counts), task rounds preempted, the rounds waiting in all three queues (the agent_queue_depth gauge), and
    whether it was the caller's share that refused it."""

    admitted: bool
    depth: int
    preempted: int
    waiting: int
    over_share: bool = False


def request_fields(request: RoundRequest) -> dict[str, Any]:
    """The request as the job's first argument: RoundRequest.to_dict's keys, in its order, without its deep
    copy (dataclasses.asdict copied every message of the conversation each round: 0.4 ms at 15 KB)."""
    return {name: getattr(request, name) for name in _FIELDS}


def limit(queue: str, max_depth: int, retried: bool) -> int:
    """How many user rounds may wait for this one to be admitted: none for a client task round (it runs only
    while no user round waits), MAX_QUEUE_DEPTH for a user round, no limit for a retried round."""
    if retried:
        return NO_LIMIT
    return 1 if queue == keys.QUEUE_TASKS else max_depth


def job_fields(spec: JobSpec, queue: str, signer: RoundSigner) -> list[Any]:
    """The job's hash, as RQ's `Job.to_dict()` gives it (field, value, field, value…), with agent-api's signature
    over the job id and the serialized call in its `meta` (agent.queue.guard: workers run nothing else)."""
    job = rq_adapter.round_job(queue, spec.job_id, spec.args, spec.timeout, spec.ttl, spec.description)
    job.meta[META_SIGNATURE] = signer.sign(spec.job_id, job.data)
    return [item for pair in job.to_dict().items() for item in pair]


async def push(
    client: aioredis.Redis,
    spec: JobSpec,
    queue: str,
    limit: int,
    at_front: bool,
    signer: RoundSigner,
    share: Share = Share(None, NO_LIMIT, 0),
) -> Admission:
    """Save and admit the job: one EVALSHA (redis-py's Script loads the script again after a Redis restart)."""
    script_keys = (
        *keys.RQ_USER_QUEUE_KEYS,
        keys.rq_queue_key(queue),
        keys.TASK_ROUNDS,
        keys.rq_job_key(spec.job_id),
        keys.rq_queue_key(keys.QUEUE_TASKS),
        keys.RQ_QUEUES,
        share.key or keys.fair_key(""),
        keys.claim_key(spec.job_id),
    )
    args = (
        spec.job_id,
        limit,
        "1" if at_front else "0",
        "task" if queue == keys.QUEUE_TASKS else "user",
        *_CANCEL_KEY_AROUND,
        keys.PREEMPT,
        keys.CANCEL_TTL,
        spec.ttl,
        share.limit,
        "1" if share.key else "0",
        share.lifetime_ms,
        spec.claim_ttl,
        *job_fields(spec, queue, signer),
    )
    reply = await client.register_script(_ADMIT)(script_keys, args)
    admitted, depth, preempted, waiting, over_share = reply
    return Admission(bool(admitted), int(depth), int(preempted), int(waiting), bool(over_share))
