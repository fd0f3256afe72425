"""Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does.

Only the leader schedules; followers keep their caches warm so a failover is fast.
The rules are client-go's (``k8s.io/client-go/tools/leaderelection``) with
kube-scheduler's defaults:

- ``lease_duration`` (15 s): how long a follower waits, *from the moment it observed the
  last change of the lease*, before it takes the lease over. Like client-go, expiry is
  judged on the follower's own monotonic clock (the time it saw ``renewTime`` change),
  not by comparing the holder's ``renewTime`` with the local wall clock: clock skew
  between replicas then cannot cause two leaders. A lease with no holder (released) is
  free at once.
- ``renew_deadline`` (10 s): how long the leader keeps retrying a failed renewal before
  it gives up leadership. Scheduling stops at once (the leading task is cancelled and
  ``on_stopped_leading`` is called) -- before any follower may take over, since
  ``renew_deadline < lease_duration``.
- ``retry_period`` (2 s): the interval between renewals, and (jittered by up to 1.2x,
  as client-go's ``JitterUntil``) between acquisition attempts.

Writes are optimistic: every update carries the ``resourceVersion`` that was read, so of
two replicas racing for a free lease exactly one wins and the other gets 409 Conflict.
A takeover increments ``leaseTransitions`` and sets ``acquireTime``. On a graceful stop
the leader releases the lease (empty ``holderIdentity``, ``leaseDurationSeconds: 1``,
client-go's ``ReleaseOnCancel``) so a follower takes over within one retry period.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import orjson

from kubesched.api.meta import micro_time
from kubesched.framework.cluster_port import Conflict

__all__ = ["KubeLeaseAPI", "LeaderElector", "LeaseAPI"]

log = logging.getLogger("kubesched.leader")

JITTER_FACTOR = 1.2
"""client-go's acquisition jitter: retries come every ``retry_period * (1 + U(0, 1.2))``."""


class LeaseAPI(Protocol):
    """The three calls leader election needs, on plain JSON dicts (the test seam)."""

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None: ...

    async def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]: ...

    async def replace_lease(
        self, namespace: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]: ...


def _status_message(data: bytes) -> str:
    """The API server's Status message (a 403 names the missing permission), else the
    start of the body."""
    try:
        decoded = orjson.loads(data)
    except orjson.JSONDecodeError:
        decoded = None
    if isinstance(decoded, dict) and decoded.get("message"):
        return str(decoded["message"])
    return repr(data[:200])


class KubeLeaseAPI:
    """:class:`LeaseAPI` over a kubernetes_asyncio ``ApiClient``.

    Raw JSON both ways: the typed ``V1Lease`` would serialise ``renewTime`` with
    ``datetime.isoformat()``, which drops the microseconds when they are zero, and the
    API server's MicroTime wants exactly six digits."""

    def __init__(self, api_client: Any) -> None:
        from kubernetes_asyncio.client import CoordinationV1Api

        self._api = CoordinationV1Api(api_client)

    async def _call(self, method: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        resp = await method(*args, _preload_content=False)
        async with resp:
            data = await resp.read()
            if resp.status == 404:
                return None
            if resp.status == 409:
                raise Conflict(data.decode(errors="replace"))
            if not 200 <= resp.status <= 299:
                raise RuntimeError(f"lease API: HTTP {resp.status}: {_status_message(data)}")
            return orjson.loads(data)

    async def get_lease(self, namespace: str, name: str) -> dict[str, Any] | None:
        out: dict[str, Any] | None = await self._call(
            self._api.read_namespaced_lease, name, namespace
        )
        return out

    async def create_lease(self, namespace: str, body: dict[str, Any]) -> dict[str, Any]:
        out = await self._call(self._api.create_namespaced_lease, namespace, body)
        if out is None:
            raise RuntimeError(f"lease API: namespace {namespace} not found")
        return dict(out)

    async def replace_lease(
        self, namespace: str, name: str, body: dict[str, Any]
    ) -> dict[str, Any]:
        out = await self._call(self._api.replace_namespaced_lease, name, namespace, body)
        if out is None:
            raise Conflict(f"lease {namespace}/{name} was deleted")
        return dict(out)


def _micro_time(ts: float) -> str:
    return micro_time(datetime.datetime.fromtimestamp(ts, tz=datetime.UTC))


class LeaderElector:
    """Campaigns for one Lease; ``run`` leads while it holds it (see the module docstring).

    ``clock`` is the monotonic clock expiry is judged by (the event loop's by default, so
    tests run in virtual time); ``wall_clock`` stamps ``acquireTime``/``renewTime``.
    """

    def __init__(
        self,
        api_client: Any,
        *,
        namespace: str,
        name: str,
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] | None = None,
        wall_clock: Callable[[], float] | None = None,
        rng: random.Random | None = None,
        release_on_cancel: bool = True,
    ) -> None:
        # client-go's NewLeaderElector validation.
        if lease_duration <= renew_deadline:
            raise ValueError("lease_duration must be greater than renew_deadline")
        if renew_deadline <= JITTER_FACTOR * retry_period:
            raise ValueError("renew_deadline must be greater than retry_period*1.2")
        if retry_period < 1 or not identity:
            raise ValueError("retry_period must be at least 1 s and identity non-empty")
        self.api: LeaseAPI = (
            api_client if hasattr(api_client, "get_lease") else KubeLeaseAPI(api_client)
        )
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.lease_duration = lease_duration
        self.renew_deadline = renew_deadline
        self.retry_period = retry_period
        self._clock = clock
        self._wall = wall_clock or _wall_time
        self._rng = rng or random.Random()
        self.release_on_cancel = release_on_cancel
        """client-go's ReleaseOnCancel: give the lease up on a graceful stop (a follower
        then takes over within one retry period instead of one lease duration)."""
        self._leading = False
        self._observed: dict[str, Any] | None = None  # the lease spec last seen
        self._observed_rv = ""
        self._observed_at = 0.0
        self.leader_identity = ""
        """Who holds the lease, as last observed ("" if nobody)."""

    @property
    def is_leader(self) -> bool:
        return self._leading

    def _now(self) -> float:
        return self._clock() if self._clock is not None else asyncio.get_running_loop().time()

    # -- the campaign -----------------------------------------------------------------------
    async def run(
        self,
        on_started_leading: Callable[[], Awaitable[None]],
        on_stopped_leading: Callable[[], None],
    ) -> None:
        """Acquire, then renew until the lease is lost (returns) or cancelled (releases).

        ``on_started_leading()`` runs as a task while leading and is cancelled the moment
        leadership ends; ``on_stopped_leading()`` is called then (only if this replica
        led). If the leading task fails, leadership is released and the error raised."""
        await self._acquire()
        self._leading = True
        log.info("became leader of lease %s/%s as %s", self.namespace, self.name, self.identity)
        task: asyncio.Task[None] = asyncio.ensure_future(on_started_leading())
        failed: BaseException | None = None
        try:
            await self._renew_until_lost(task)
            if self.leader_identity and self.leader_identity != self.identity:
                log.error(
                    "lost lease %s/%s: now held by %s",
                    self.namespace,
                    self.name,
                    self.leader_identity,
                )
            else:
                log.error(
                    "lost lease %s/%s: not renewed within %.0f s",
                    self.namespace,
                    self.name,
                    self.renew_deadline,
                )
        except _LeadingTaskFailed:
            failed = task.exception()
        finally:
            lost = not self._leading
            self._leading = False
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
            on_stopped_leading()
            if not lost and self.release_on_cancel:
                await self._release()
        if failed is not None:
            raise failed

    async def _acquire(self) -> None:
        while True:
            if await self._try_acquire_or_renew():
                return
            delay = self.retry_period * (1 + self._rng.random() * JITTER_FACTOR)
            await asyncio.sleep(delay)

    async def _renew_until_lost(self, leading_task: asyncio.Task[None]) -> None:
        """Returns when a renewal could not succeed within ``renew_deadline``."""
        while True:
            await self._sleep_or_fail(leading_task, self.retry_period)
            deadline = self._now() + self.renew_deadline
            renewed = False
            while not renewed:
                remaining = deadline - self._now()
                if remaining <= 0:
                    self._leading = False
                    return
                try:
                    async with asyncio.timeout(remaining):
                        renewed = await self._try_acquire_or_renew()
                except TimeoutError:
                    self._leading = False
                    return
                if not renewed:
                    if self._observed is not None and self.leader_identity != self.identity:
                        self._leading = False  # somebody else holds it now
                        return
                    await self._sleep_or_fail(leading_task, min(self.retry_period, remaining))

    @staticmethod
    async def _sleep_or_fail(leading_task: asyncio.Task[None], delay: float) -> None:
        """Sleep, but stop early if the leading task raised (run() releases, re-raises)."""
        if not leading_task.done():
            await asyncio.wait({leading_task}, timeout=delay)
        else:
            await asyncio.sleep(delay)
        if leading_task.done() and not leading_task.cancelled() and leading_task.exception():
            raise _LeadingTaskFailed

    # -- one attempt ----------------------------------------------------------------------------
    async def _try_acquire_or_renew(self) -> bool:
        """client-go's tryAcquireOrRenew: True if this replica holds the lease now."""
        try:
            return await self._attempt()
        except Conflict:
            log.info("lease %s/%s: lost a race (409 Conflict)", self.namespace, self.name)
            return False
        except asyncio.CancelledError:
            raise
        except Exception as e:
            log.warning("lease %s/%s: %s: %s", self.namespace, self.name, type(e).__name__, e)
            return False

    async def _attempt(self) -> bool:
        wall = _micro_time(self._wall())
        lease = await self.api.get_lease(self.namespace, self.name)
        if lease is None:
            spec = self._spec(holder=self.identity, acquire=wall, renew=wall, transitions=0)
            body = {
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": self.name, "namespace": self.namespace},
                "spec": spec,
            }
            created = await self.api.create_lease(self.namespace, body)
            self._observe(created)
            return True
        self._observe(lease)
        spec = lease.get("spec") or {}
        holder = spec.get("holderIdentity") or ""
        if holder and holder != self.identity and not self._expired(spec):
            return False
        transitions = int(spec.get("leaseTransitions") or 0)
        if holder == self.identity:
            acquire = spec.get("acquireTime") or wall
        else:
            acquire = wall
            transitions += 1
        new = dict(lease)
        new["spec"] = self._spec(
            holder=self.identity, acquire=acquire, renew=wall, transitions=transitions
        )
        updated = await self.api.replace_lease(self.namespace, self.name, new)
        self._observe(updated)
        return True

    def _spec(self, *, holder: str, acquire: str, renew: str, transitions: int) -> dict[str, Any]:
        return {
            "holderIdentity": holder,
            "leaseDurationSeconds": max(1, round(self.lease_duration)),
            "acquireTime": acquire,
            "renewTime": renew,
            "leaseTransitions": transitions,
        }

    def _observe(self, lease: dict[str, Any]) -> None:
        """Remember when the lease last *changed* (its resourceVersion moved)."""
        rv = str((lease.get("metadata") or {}).get("resourceVersion") or "")
        spec = lease.get("spec") or {}
        if self._observed is None or rv != self._observed_rv or spec != self._observed:
            self._observed = spec
            self._observed_rv = rv
            self._observed_at = self._now()
        self.leader_identity = spec.get("holderIdentity") or ""

    def _expired(self, spec: dict[str, Any]) -> bool:
        duration = float(spec.get("leaseDurationSeconds") or self.lease_duration)
        return self._observed_at + duration <= self._now()

    async def _release(self) -> None:
        """Give the lease up (ReleaseOnCancel): holder cleared, duration 1 s."""
        try:
            lease = await self.api.get_lease(self.namespace, self.name)
            spec = (lease or {}).get("spec") or {}
            if lease is None or spec.get("holderIdentity") != self.identity:
                return
            wall = _micro_time(self._wall())
            new = dict(lease)
            new["spec"] = {
                "holderIdentity": "",
                "leaseDurationSeconds": 1,
                "acquireTime": wall,
                "renewTime": wall,
                "leaseTransitions": int(spec.get("leaseTransitions") or 0),
            }
            await self.api.replace_lease(self.namespace, self.name, new)
            self.leader_identity = ""
            log.info("released lease %s/%s", self.namespace, self.name)
        except Exception as e:  # best effort: the lease expires by itself anyway
            log.warning("could not release lease %s/%s: %s", self.namespace, self.name, e)


class _LeadingTaskFailed(Exception):
    pass


def _wall_time() -> float:
    return datetime.datetime.now(tz=datetime.UTC).timestamp()
