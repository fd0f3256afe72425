"""A leading term of ``kubesched run`` and the end of the process: scheduling while the
lease is held (or always, with leader election off), the binds in flight when a term
ends, and the stop of every task ``run`` started (:mod:`kubesched.operator.run`).

Losing the lease ends ``run`` with :class:`LeadershipLost` (kube-scheduler exits too:
state built while leading, such as assumed pods, must not leak into a new term).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any

from kubernetes_asyncio import client as k8s_client

from kubesched.cluster import aio
from kubesched.operator.stopping import connections_closed

if TYPE_CHECKING:
    from kubesched.operator.run import Runtime

__all__ = ["SHUTDOWN_GRACE", "LeadershipLost", "end_term", "lead", "schedule", "shutdown"]

SHUTDOWN_GRACE = 5.0
"""Seconds for binds in flight to finish when a leading term ends on a graceful stop
(within the lease's remaining time; the process's own stop then has
``shutdown_flush_seconds`` for them and the queued Events)."""


class LeadershipLost(Exception):
    """The lease could not be renewed: this replica stopped scheduling."""


async def schedule(rt: Runtime) -> None:
    await rt.cache_synced.wait()
    rt.leading = True
    try:
        await rt.scheduler.run()
    finally:
        rt.leading = False
        await end_term(rt)


async def end_term(rt: Runtime) -> None:
    """Binding cycles in flight when scheduling stops. On a graceful stop they finish
    first, so the lease is released only after their binds reached the API server (the
    next leader's cache then holds them); the wait stays within the time the lease
    remains ours unrenewed. After the lease is lost they are cancelled at once: another
    replica may lead now, and nothing more may be written."""
    try:
        if rt.stopping:
            s = rt.settings
            grace = SHUTDOWN_GRACE
            if s.leader_elect:
                grace = max(0.0, min(grace, s.renew_deadline - s.retry_period))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(grace):
                    await rt.scheduler.drain()
    finally:
        await rt.scheduler.abort()


async def lead(rt: Runtime) -> None:
    from kubesched.operator.leader import LeaderElector

    s = rt.settings

    def stopped() -> None:
        rt.leading = False

    # kubernetes_asyncio's client, for the Lease alone: made here, so that a scheduler
    # without leader election never imports or builds it; its REST client imports aiohttp
    # (kubesched.cluster.aio: in a worker thread, the loop going on meanwhile)
    await aio.imported()
    async with k8s_client.ApiClient(configuration=rt.cfg) as api:
        elector = LeaderElector(
            api,
            namespace=s.namespace,
            name=s.lease_name,
            identity=s.identity,
            lease_duration=s.lease_duration,
            renew_deadline=s.renew_deadline,
            retry_period=s.retry_period,
        )
        await elector.run(lambda: schedule(rt), stopped)
    raise LeadershipLost(f"lost the lease {s.namespace}/{s.lease_name}")


async def shutdown(
    rt: Runtime, tasks: dict[str, asyncio.Task[Any]], kopf_stop: asyncio.Event
) -> None:
    rt.stopping = True
    if rt.kopf_reconcile is not None:
        rt.kopf_reconcile.cancel()
        tasks["kopf-reconcile"] = rt.kopf_reconcile
    for name in ("schedule", "resync", "sync", "stop", "server"):
        t = tasks.get(name)
        if t is not None:
            t.cancel()
    for name, t in tasks.items():
        if name.startswith("watch-"):
            t.cancel()
    kopf_stop.set()
    # Binds and status writes in flight first (their Events are queued as they end),
    # then the queued Events, all within shutdown_flush_seconds.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + rt.settings.shutdown_flush_seconds
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(max(0.0, deadline - loop.time())):
            await rt.scheduler.drain()
    await rt.podgroups.close()  # pending status writes: the next leader writes them
    await rt.cluster.aclose(max(0.0, deadline - loop.time()))
    try:
        pending = list(tasks.values())
        await asyncio.gather(*pending, return_exceptions=True)
    finally:
        await rt.cluster.close()  # the aiohttp sessions, even when the wait is cancelled
    await connections_closed()
