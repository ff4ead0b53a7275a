"""The worker's dispatcher: claims the next round for each free slot and starts it at once, on the event loop.

One Lua script (_CLAIM) is a round's whole hand-over from Redis, in one round trip: it pops the next job id in
the queues' priority order (continuing, new, client tasks), takes a slot of the backend's counted lock, reads
and deletes the job's RQ hash and reads the round's cancel flag. When a round on this worker ends, the
dispatcher claims the next one with that round's slot key passed along, so the slot goes from one round to the
next without ever being free in between: the next model request leaves one round trip after the previous
generation's last token. While the queues are empty it waits in BLPOP (which reads the queues in the same
order) and claims the popped id with the same script.

Why not RQ's own worker loop: it reads a job only after the previous round freed its slot, then spends BLPOP,
the job's HGETALL, two bookkeeping pipelines and a thread hand-off between one generation and the next; side by
side (scripts/bench-queue --rq, docs/architecture.md) that kept the GPU idle more than one point longer at 1 s
rounds. RQ keeps the rest: the jobs' format and queues (agent.queue.rq_adapter), the worker's registration and
heartbeat, SIGTERM handling (agent.queue.worker).

Guarantees: a job leaves the queues only when this worker has a free slot for it (a busy worker never holds a
round another could run); at most WORKER_SLOTS rounds per backend, whichever worker runs them; a round of
another worker waiting for this backend's slot (agent.queue.keys.gpu_waiting_key) gets the slot before this
worker's next round does; rounds are claimed in priority order.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio as aioredis
import structlog
from redis.exceptions import RedisError

from agent.queue import keys
from agent.queue.wire import call

log = structlog.get_logger("agent.queue.dispatch")

WAIT_S = 1  # BLPOP timeout: how often an idle dispatcher looks up from the queues (a warm shutdown waits this)
RETRY_S = 0.5  # after a failed claim (Redis restarting)
Handed = tuple[str, str]  # a slot key and the token of the round that held it
Closing = Callable[[], Coroutine[Any, Any, None]]  # sends a finished round's last events (EventWriter.close)
SETTLE_WAIT = 0.05  # s: at most this long a finished round's last events wait for the next round's request

# KEYS: the queues in priority order (len(keys.RQ_QUEUE_KEYS)), the backend's waiting marker, its slot keys.
# ARGV: 1 a job id to claim ('' pops the next one), 2 the worker id, 3 LOCK_TTL_MS, 4 a slot key handed over by
# a round that ended here ('' none), 5 that round's token, 6 the RQ job key prefix, 7/8 the cancel key's prefix
# and suffix, 9 the number of queues.
# Returns false (nothing claimed; a handed-over slot is freed) or {job id, slot key ('' none free), cancel flag,
# {RQ job hash fields}, rounds still queued}. A job whose hash is gone (expired while queued) is skipped when
# popping, and returned with an empty hash when claimed by id.
_CLAIM = """
local queues = tonumber(ARGV[9])
local waiting = KEYS[queues + 1]
local handing = ARGV[4] ~= '' and redis.call('get', ARGV[4]) == ARGV[5]
local someone_waits = redis.call('exists', waiting) == 1
if handing and someone_waits then
  redis.call('del', ARGV[4])
  return false
end
local id = ARGV[1]
if id == '' then
  id = false
  for i = 1, queues do
    repeat
      id = redis.call('lpop', KEYS[i])
    until (not id) or redis.call('exists', ARGV[6] .. id) == 1
    if id then break end
  end
end
if not id then
  if handing then redis.call('del', ARGV[4]) end
  return false
end
local job = redis.call('hgetall', ARGV[6] .. id)
local slot = ''
local token = ARGV[2] .. ':' .. id
if #job == 0 then
  if handing then redis.call('del', ARGV[4]) end
elseif handing then
  redis.call('set', ARGV[4], token, 'PX', ARGV[3])
  slot = ARGV[4]
elseif not someone_waits then
  for i = queues + 2, #KEYS do
    if redis.call('set', KEYS[i], token, 'NX', 'PX', ARGV[3]) then
      slot = KEYS[i]
      break
    end
  end
end
redis.call('del', ARGV[6] .. id)
local cancel = redis.call('get', ARGV[7] .. id .. ARGV[8]) or ''
local behind = 0
for i = 1, queues do behind = behind + redis.call('llen', KEYS[i]) end
return {id, slot, cancel, job, behind}
"""

_CANCEL_PREFIX, _CANCEL_SUFFIX = keys.cancel_key("\0").split("\0")
_JOB_AND_CANCEL_AFFIXES = (keys.rq_job_key(""), _CANCEL_PREFIX, _CANCEL_SUFFIX)  # the scripts compute these keys


async def _sent(claim: Claim) -> None:
    """Until the claimed round's model request is written, SETTLE_WAIT at most."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(SETTLE_WAIT):
            await claim.sent.wait()


@dataclass
class Claim:
    """A round this worker took off the queues: its job, the backend slot it holds ('' none was free), and the
    cancel flag the API had already set ('' none)."""

    job_id: str
    job: dict[bytes, bytes]  # the RQ job hash (agent.queue.rq_adapter.job_args reads its arguments)
    slot: str
    cancel: str
    token: str
    behind: int  # rounds still queued after it was claimed
    sent: asyncio.Event = field(default_factory=asyncio.Event)  # its model request is written (or it ended)


@dataclass
class Dispatcher:
    """Claims rounds while this worker has free slots and runs each as a task on the event loop (start)."""

    redis: aioredis.Redis  # the worker's client (decode_responses=False: the job hash holds compressed bytes)
    worker_id: str
    gpu_id: str
    slots: int
    start: Callable[[Claim], Coroutine[Any, Any, object]]
    burst: bool = False  # stop once the queues are found empty
    stopping: bool = False
    finished: threading.Event = field(default_factory=threading.Event)  # the RQ thread returns when set
    failed: Exception | None = None
    free: int = 0
    rounds: set[asyncio.Task[object]] = field(default_factory=set)
    _wake: asyncio.Event = field(default_factory=asyncio.Event)
    _runner: asyncio.Task[None] | None = None

    def __post_init__(self) -> None:
        self.free = self.slots
        self._slot_keys = keys.gpu_slot_keys(self.gpu_id, self.slots)
        self._keys = [*keys.RQ_QUEUE_KEYS, keys.gpu_waiting_key(self.gpu_id), *self._slot_keys]

    def begin(self) -> None:
        """Start claiming (on the event loop)."""
        self._runner = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        try:
            await self._loop()
        except Exception as exc:  # a bug, not Redis (handled in the loop): agent-worker exits non-zero
            self.failed = exc
            log.exception("dispatcher_failed")
        finally:
            self.finished.set()

    async def _loop(self) -> None:
        while not self.stopping:
            if self.free == 0:
                await self._wake.wait()
                self._wake.clear()
                continue
            self.free -= 1
            try:
                claim = await self.claim()
                if claim is None and not self.burst:
                    claim = await self._wait_and_claim()
            except RedisError as exc:  # Redis restarting: the rounds under way report it; keep trying
                self.free += 1
                log.warning("claim_failed", error=f"{type(exc).__name__}: {exc}")
                await asyncio.sleep(RETRY_S)
                continue
            if claim is not None:
                self._start(claim)
                continue
            self.free += 1
            if self.burst:
                log.info("queues_empty")
                self.stopping = True

    async def claim(self, job_id: str = "") -> Claim | None:
        """One round trip: pop (or take `job_id`), a free slot, the job, its cancel flag."""
        return self._claimed(await call(self.redis, "EVAL", *self.claim_command(job_id)))

    def claim_command(self, job_id: str = "", handed: tuple[str, str] | None = None) -> tuple[Any, ...]:
        """EVAL arguments of a claim; `handed` is the (slot key, token) of a round that ended on this worker."""
        key, token = handed or ("", "")
        args = (job_id, self.worker_id, keys.LOCK_TTL_MS, key, token, *_JOB_AND_CANCEL_AFFIXES, len(keys.RQ_QUEUE_KEYS))
        return (_CLAIM, len(self._keys), *self._keys, *args)

    def _claimed(self, reply: Any) -> Claim | None:
        if not reply:
            return None
        raw_id, slot, cancel, fields, behind = reply
        claimed = raw_id.decode()
        job = dict(zip(fields[::2], fields[1::2], strict=True))
        return Claim(claimed, job, slot.decode(), cancel.decode(), f"{self.worker_id}:{claimed}", int(behind))

    async def _wait_and_claim(self) -> Claim | None:
        popped = await self.redis.blpop(list(keys.RQ_QUEUE_KEYS), timeout=WAIT_S)
        if popped is None:
            return None
        queue, job_id = (part.decode() if isinstance(part, bytes) else part for part in popped)
        if self.stopping:  # a warm shutdown began while we waited: the round goes back, first in line
            await self.redis.lpush(queue, job_id)
            return None
        claim = await self.claim(job_id)
        if claim is not None and not claim.job:
            log.warning("claimed_job_gone", job_id=job_id)
            return None
        return claim

    def _start(self, claim: Claim) -> asyncio.Task[object]:
        task = asyncio.get_running_loop().create_task(self.start(claim))
        self.rounds.add(task)
        task.add_done_callback(self.rounds.discard)
        return task

    async def finish(self, hand_over: Callable[[], Handed | None], close: Closing, behind: int) -> None:
        """A round's model stream is done (or the round failed): claim the next round into the slot it hands over
        (`hand_over` gives the slot key and the round's token, None if it holds none), so the slot is never free
        in between, and send the round's last events (`close`, which releases a slot not handed over). `behind`
        is how many rounds were queued behind it when it was claimed. If any were, the next round's model request
        goes first and the last events wait until it is written (~1 ms; they would slow it down); if none were,
        both go out at once (a claim that finds nothing must not delay the answer)."""
        if self.stopping:
            await close()  # releases the slot itself
            self._free_slot()
            return
        handed = hand_over()
        closing = None if behind else asyncio.get_running_loop().create_task(close())
        claim = await self._claim_next(handed)
        if closing is not None:
            await closing
            return
        if claim is not None:
            await _sent(claim)
        await close()

    async def _claim_next(self, handed: tuple[str, str] | None) -> Claim | None:
        """Claim a round into the handed-over slot and start it; with none, the slot is freed."""
        claim: Claim | None = None
        try:
            claim = self._claimed(await call(self.redis, "EVAL", *self.claim_command(handed=handed)))
        except RedisError as exc:  # Redis restarting: the handed-over slot expires after LOCK_TTL_MS
            log.warning("claim_failed", error=f"{type(exc).__name__}: {exc}")
        if claim is None:
            self._free_slot()
        else:
            self._start(claim)
        return claim

    def _free_slot(self) -> None:
        self.free += 1
        self._wake.set()

    def stop(self) -> None:
        """Claim nothing more (a warm shutdown); rounds under way go on."""
        self.stopping = True
        self._wake.set()

    async def drain(self) -> None:
        """Stop claiming, then wait for the claim in flight and every round under way."""
        self.stop()
        if self._runner is not None:
            await self._runner
        while self.rounds:
            await asyncio.wait(self.rounds)
