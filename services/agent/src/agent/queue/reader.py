"""The API's reader of one round: its claim, then the events of the one worker host that claimed it.

A round's events come in a stream under the prefix of the worker host that runs it (agent.queue.keys.events_key),
which only that host's Redis user may write, and agent-api follows the stream of the host named by the round's
first claim (keys.claim_key: opened by the API at admission, claimed by the host that pops the round). Any other
writer on the round is an intrusion, and the round fails closed (errors.RoundIntruded, never the text): a second
claim, or entries in another worker host's stream of the round. The worker hosts are the Redis users named
`worker-NAME` (`ACL USERS`, re-read every HOSTS_TTL seconds and whenever a claim names a host not seen yet); where
the api user may not list them (a Redis without the shipped ACL), only the claimed host's stream is read.
"""

from __future__ import annotations

import json
import re
import time
from typing import Any, cast

import redis.asyncio as aioredis
import structlog
from redis.exceptions import NoPermissionError

from agent.context import RequestContext
from agent.errors import RoundIntruded
from agent.queue import keys
from agent.settings import worker_host_of

HOSTS_TTL = 5.0  # seconds the list of worker hosts is trusted before it is read again
_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9-]{0,62}")  # what secrets-init accepts as a worker host's name
_ADMITTED = "0-1"  # the claim stream's first entry, agent-api's own
_Entries = list[tuple[str, dict[str, str]]]

log = structlog.get_logger("agent.queue.reader")


class WorkerHosts:
    """The worker hosts Redis knows, from its ACL users; None where the api user may not list them."""

    def __init__(self, redis: aioredis.Redis) -> None:
        self.redis = redis
        self._hosts: frozenset[str] | None = None
        self._read_at = -HOSTS_TTL
        self._listable = True

    async def known(self, fresh: bool = False) -> frozenset[str] | None:
        if not self._listable:
            return None
        if fresh or time.monotonic() - self._read_at >= HOSTS_TTL:
            try:
                users = await self.redis.acl_users()
            except NoPermissionError:
                self._listable = False
                log.warning(
                    "worker_hosts_unlisted",
                    detail="the api Redis user may not run ACL USERS: a second writer on a round goes unnoticed "
                    "(its events are still never read); give it +acl|users as images/entrypoint/redis-users does",
                )
                return None
            hosts = {worker_host_of(str(user)) for user in users}
            self._hosts = frozenset(h for h in hosts if h) or None  # no worker users: a Redis without the ACL
            self._read_at = time.monotonic()
        return self._hosts


class RoundReader:
    """Reads one round's events, in order, from the host that claimed it (XREAD BLOCK on the claim and the hosts'
    streams at once). `host` is the claimant once its claim has been read; the hosts that wrote the round are noted
    in the request's `context` (its audit record's `workers`)."""

    def __init__(
        self, redis: aioredis.Redis, job_id: str, hosts: WorkerHosts, context: RequestContext | None = None
    ) -> None:
        self.redis, self.job_id, self.hosts, self.context = redis, job_id, hosts, context
        self.host: str | None = None
        self._positions: dict[Any, Any] = {keys.claim_key(job_id): "0-0"}  # stream → the last id read
        self._started = False

    async def read(self, count: int, block_ms: int) -> list[dict[str, Any]]:
        """The claimant's entries after the last ones returned, waiting up to `block_ms` for the first; [] when
        none came. Raises RoundIntruded when anyone else wrote the round."""
        if not self._started:
            self._started = True
            for host in await self.hosts.known() or ():
                self._positions.setdefault(keys.events_key(host, self.job_id), "0-0")
        # RESP2's reply, decoded: [[key, [(id, {field: value}), …]], …] (or empty)
        reply = cast(list[tuple[str, _Entries]], await self.redis.xread(self._positions, count=count, block=block_ms))
        by_key = {str(key): entries for key, entries in reply or ()}
        for key, entries in by_key.items():
            if entries:
                self._positions[key] = str(entries[-1][0])
        claim = by_key.pop(keys.claim_key(self.job_id), [])
        for entry_id, fields in claim:
            if str(entry_id) != _ADMITTED:
                await self._claimed(str(fields.get("host", "")))
        events: list[dict[str, Any]] = []
        for key, entries in by_key.items():
            if not entries:
                continue
            writer = key.split(":")[2]  # agent:host:<host>:round:<id>:events
            if writer != self.host:
                self._intruded(writer, f"{writer} wrote a round {self.host or 'nobody'} claimed")
            events.extend(json.loads(fields["e"]) for _entry_id, fields in entries)
        return events

    async def _claimed(self, host: str) -> None:
        if self.host is not None:
            self._intruded(host, f"a second claim, by {host!r}")
        if not _HOST_NAME.fullmatch(host):
            self._intruded(host[:64], "a claim naming no valid worker host")
        known = await self.hosts.known()
        if known is not None and host not in known:
            known = await self.hosts.known(fresh=True)  # a host added a moment ago
        if known is not None and host not in known:
            self._intruded(host, f"a claim by {host!r}, which is no worker host's Redis user")
        self.host = host
        self._note(host)  # the audit's `workers`: the host whose Redis user alone could write what is read
        self._positions.setdefault(keys.events_key(host, self.job_id), "0-0")

    def _note(self, host: str) -> None:
        if self.context is not None:  # outside a request (a bench, a test): nobody to tell
            self.context.note_worker(host)

    def _intruded(self, other: str, what: str) -> None:
        involved = sorted({h for h in (self.host, other) if h})
        for host in involved:
            self._note(host)
        log.error("round_intruded", job_id=self.job_id, hosts=involved, detail=what)
        raise RoundIntruded(f"round {self.job_id}: {what}; hosts involved: {', '.join(involved)}")
