"""The worker's dispatcher: claims the next round for each free slot and starts it at once, on the event loop.

One Lua script (_CLAIM) is a round's whole hand-over from Redis, in one round trip: it pops the next job id in
the queues' priority order (continuing, new, client tasks), takes a slot of the backend's counted lock, reads
and deletes the job's RQ hash and reads the round's cancel flag. When a round on this worker ends, the
dispatcher claims the next one with that round's slot key passed along, so the slot goes from one round to the
next without ever being free in between: the next model request leaves one round trip after the previous
generation's last token. While the queues are empty it waits in BLPOP (which reads the queues in the same
order) and claims the popped id with the same script.

Why not RQ's own worker loop: it read a job only after the previous round had freed its slot, then spent
BLPOP, the job's HGETALL, two bookkeeping pipelines and two thread hand-offs between one generation and the
next (issue 15: 5-7 ms of an idle GPU per round). RQ keeps the rest: the jobs' format and queues
(agent.queue.rq_adapter), the worker's registration and heartbeat, SIGTERM handling (agent.queue.worker).

A one-slot worker that is the only live worker goes further and starts its next round speculatively (the
lookahead): every batch of a generating round's events also asks for the head of the queues (_PEEK), the
dispatcher reads that job's hash in the background, and when the round's last token arrives the next round's
model request goes out at once, before any Redis round trip. Only then does one script (_CONFIRM) take the
round off its queue, re-token the slot for it and read its cancel flag. Until it is confirmed the round writes
no event; if it was not ours to take (another worker took it, the API removed it, a round of another worker
waits for the slot), its model request is closed and the ordinary claim runs. That keeps the claim's round
trip and the round's set-up out of the GPU's idle time between two generations (issue 15).

Guarantees kept: a job leaves the queues only when this worker has a free slot for it (a busy worker never
holds a round another could run); at most WORKER_SLOTS rounds per backend, whichever worker runs them (a
speculative request that was not confirmed is closed before the slot goes to another round); a round of
another worker waiting for this backend's slot (agent.queue.keys.gpu_waiting_key) gets the slot before this
worker's next round does. Order: rounds are claimed in priority order, except that a speculatively started
round keeps its place if a round of a higher-priority queue arrived after the last peek (at most one batch of
events earlier, ~10 ms: the same as if it had arrived just after the claim).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import redis.asyncio as aioredis
import structlog
from redis.exceptions import RedisError

from agent.queue import keys
from agent.queue.rq_adapter import job_args
from agent.queue.wire import call

if TYPE_CHECKING:
    from agent.queue.writer import EventWriter

log = structlog.get_logger("agent.queue.dispatch")

WAIT_S = 1  # BLPOP timeout: how often an idle dispatcher looks up from the queues (a warm shutdown waits this)
RETRY_S = 0.5  # after a failed claim (Redis restarting)
SETTLE_WAIT = 0.05  # s: at most this long a finished round's last events wait for the next round's request
# s: then, for a round started speculatively, at most this long for the model server's answer before the confirmation
# and the finished round's last events (their Redis and API work slowed the server's start by ~0.6 ms on 2 cores)
ANSWER_WAIT = 0.005

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

# KEYS: the queues in priority order, the workers' set, the backend's waiting marker. ARGV: 1 the worker id, 2/3
# the status key's prefix and suffix. Returns the id at the head of the queues (priority order), or false when
# this worker should not speculate: another live worker (its status key not expired) may take that round first,
# this one has not published its status yet, or a round of another worker waits for the slot.
_PEEK = """
local set, waiting = KEYS[#KEYS - 1], KEYS[#KEYS]
if redis.call('exists', waiting) == 1 then return false end
local alone = false
for _, member in ipairs(redis.call('smembers', set)) do
  if redis.call('exists', ARGV[2] .. member .. ARGV[3]) == 1 then
    if member ~= ARGV[1] then return false end
    alone = true
  end
end
if not alone then return false end
for i = 1, #KEYS - 2 do
  local id = redis.call('lindex', KEYS[i], 0)
  if id then return id end
end
return false
"""

# KEYS: the queues in priority order, the backend's waiting marker, the slot key handed over. ARGV: 1 the job id
# started speculatively, 2 the slot's token of the round that ended, 3 the new round's token, 4 LOCK_TTL_MS,
# 5 the RQ job key prefix, 6/7 the cancel key's prefix and suffix.
# Takes the job if it is still at the head of its queue, its hash is there, the slot is still ours and no round
# of another worker waits for it: returns {cancel flag, rounds still queued}; otherwise changes nothing.
_CONFIRM = """
local slot, waiting = KEYS[#KEYS], KEYS[#KEYS - 1]
if redis.call('get', slot) ~= ARGV[2] or redis.call('exists', waiting) == 1
   or redis.call('exists', ARGV[5] .. ARGV[1]) == 0 then
  return false
end
local queue = false
for i = 1, #KEYS - 2 do
  if redis.call('lindex', KEYS[i], 0) == ARGV[1] then
    queue = KEYS[i]
    break
  end
end
if not queue then return false end
redis.call('lpop', queue)
redis.call('del', ARGV[5] .. ARGV[1])
redis.call('set', slot, ARGV[3], 'PX', ARGV[4])
local cancel = redis.call('get', ARGV[6] .. ARGV[1] .. ARGV[7]) or ''
local behind = 0
for i = 1, #KEYS - 2 do behind = behind + redis.call('llen', KEYS[i]) end
return {cancel, behind}
"""

_CANCEL_PREFIX, _CANCEL_SUFFIX = keys.cancel_key("\0").split("\0")
_JOB_AND_CANCEL_AFFIXES = (keys.rq_job_key(""), _CANCEL_PREFIX, _CANCEL_SUFFIX)  # the scripts compute these keys
_STATUS_AFFIXES = keys.worker_status_key("\0").split("\0")


async def _sent(claim: Claim) -> None:
    """Until the claimed round's model request is written, SETTLE_WAIT at most."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(SETTLE_WAIT):
            await claim.sent.wait()


@dataclass
class Claim:
    """A round this worker took off the queues: its job, the backend slot it holds ('' none was free), and the
    cancel flag the API had already set ('' none). A round started speculatively has `confirmed`: it becomes
    True once _CONFIRM took it (cancel and behind are filled in then), False if it was not ours to take."""

    job_id: str
    job: dict[bytes, bytes]  # the RQ job hash (agent.queue.rq_adapter.job_args reads its arguments)
    slot: str
    cancel: str
    token: str
    behind: int  # rounds still queued after it was claimed
    sent: asyncio.Event = field(default_factory=asyncio.Event)  # its model request is written (or it ended)
    answered: asyncio.Event = field(default_factory=asyncio.Event)  # the model server's answer began
    confirmed: asyncio.Future[bool] | None = None
    args: tuple[Any, ...] | None = None  # the job's arguments when already read from `job` (a lookahead's)


@dataclass
class Lookahead:
    """One generating round's view of the next round (a one-slot worker that is alone): the job at the head of
    the queues, as last seen by the round's event writes, and that job's hash and arguments once read."""

    dispatcher: Dispatcher
    job_id: str = ""
    job: dict[bytes, bytes] | None = None
    args: tuple[Any, ...] = ()
    _fetch: asyncio.Task[None] | None = None

    def command(self) -> tuple[Any, ...]:
        """The peek that rides along with each batch of the round's events (agent.queue.writer)."""
        return self.dispatcher.peek_command

    def seen(self, reply: Any) -> None:
        job_id = reply.decode() if isinstance(reply, bytes) else ""
        if job_id == self.job_id:
            return
        self.job_id, self.job = job_id, None
        if self._fetch is not None:
            self._fetch.cancel()
        self._fetch = asyncio.get_running_loop().create_task(self._read(job_id)) if job_id else None

    async def _read(self, job_id: str) -> None:
        try:
            fields = await call(self.dispatcher.redis, "HGETALL", keys.rq_job_key(job_id))
        except RedisError:
            return  # no speculation this time; the ordinary claim reports Redis's trouble
        if not fields or self.job_id != job_id:
            return
        job = dict(fields) if isinstance(fields, dict) else dict(zip(fields[::2], fields[1::2], strict=True))
        try:
            self.args = job_args(job_id, job)
        except Exception:  # a hash RQ cannot read: the ordinary claim takes the job and reports it
            return
        self.job = job

    def take(self) -> Claim | None:
        """The next round to start (its slot and token still to be filled in), if its hash was read; the
        lookahead is spent either way."""
        ahead = Claim(self.job_id, self.job, "", "", "", 0, args=self.args) if self.job else None
        self.job_id, self.job = "", None
        if self._fetch is not None:
            self._fetch.cancel()
        return ahead


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
        self.peek_command = (  # the same for every batch: built once
            "EVAL",
            _PEEK,
            len(keys.RQ_QUEUE_KEYS) + 2,
            *keys.RQ_QUEUE_KEYS,
            keys.WORKERS_SET,
            keys.gpu_waiting_key(self.gpu_id),
            self.worker_id,
            *_STATUS_AFFIXES,
        )

    def lookahead(self) -> Lookahead | None:
        """A round's lookahead, when this worker may start rounds speculatively: one slot (with several, rounds of
        this worker would race each other for the head of the queues)."""
        return Lookahead(self) if self.slots == 1 else None

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

    async def finish(self, writer: EventWriter, behind: int, ahead: Lookahead | None = None) -> None:
        """A round's model stream is done (or the round failed): claim the next round into its slot, passing on
        the backend slot the round held, so the slot is never free in between; and send the round's last
        events. `behind` is how many rounds were queued behind it when it was claimed. If any were, the next
        round's model request goes first and the last events wait until it is written (~1 ms; they would
        slow it down: issue 15); if none were, both go out at once (a claim that finds nothing must not
        delay the answer). With a lookahead that found the next round, that round starts before any claim."""
        if self.stopping:
            await writer.close()  # releases the slot itself
            self._free_slot()
            return
        handed = writer.lock.hand_over()
        next_round = ahead.take() if ahead is not None else None
        if handed is not None and next_round is not None:
            closing = await self._speculate(writer, handed, next_round)
            if closing is None:  # not ours to take (its request is closed, the last events sent): claim as usual
                await self._claim_next(handed)
            else:
                await closing
            return
        closing = None if behind else asyncio.get_running_loop().create_task(writer.close())
        claim = await self._claim_next(handed)
        if closing is not None:
            await closing
            return
        if claim is not None:
            await _sent(claim)
        await writer.close()

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

    async def _speculate(self, writer: EventWriter, handed: tuple[str, str], claim: Claim) -> asyncio.Task[None] | None:
        """Start the peeked round on the handed-over slot, then confirm it (one round trip, beside the finished
        round's last events). Returns the task sending those last events; None if the round was not ours to
        take: then its request has been closed, nothing of it was written, and the slot is still handed over."""
        loop = asyncio.get_running_loop()
        job_id = claim.job_id
        claim.slot, claim.token, claim.confirmed = handed[0], f"{self.worker_id}:{job_id}", loop.create_future()
        task = self._start(claim)
        confirm = (
            _CONFIRM,
            len(keys.RQ_QUEUE_KEYS) + 2,
            *keys.RQ_QUEUE_KEYS,
            keys.gpu_waiting_key(self.gpu_id),
            handed[0],
            job_id,
            handed[1],
            claim.token,
            keys.LOCK_TTL_MS,
            *_JOB_AND_CANCEL_AFFIXES,
        )
        reply = None
        try:
            await _sent(claim)
            with contextlib.suppress(TimeoutError):  # the model server parses it: leave it the CPU for a moment
                async with asyncio.timeout(ANSWER_WAIT):
                    await claim.answered.wait()
            closing = loop.create_task(writer.close())
            try:
                reply = await call(self.redis, "EVAL", *confirm)
            except RedisError as exc:  # the slot's state is unknown: the ordinary claim finds out
                log.warning("confirm_failed", error=f"{type(exc).__name__}: {exc}")
            if reply:
                claim.cancel, claim.behind = reply[0].decode(), int(reply[1])
        finally:  # whatever happened, the round learns whether it is ours (it writes nothing until then)
            claim.confirmed.set_result(bool(reply))
        if reply:
            return closing
        log.info("speculation_lost", job_id=job_id)
        await asyncio.wait([task])  # its model request is closed before the slot serves another round
        await closing
        return None

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
