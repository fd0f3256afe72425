"""``kubesched run`` in-process behind the fault proxy (:mod:`tests.controlplane.faultproxy`),
for the e2e tests of conflicts and of a slow or failing API."""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import AsyncIterator

from kubesched.operator.run import Runtime, run
from kubesched.operator.settings import Settings
from tests.controlplane import ControlPlane
from tests.controlplane.faultproxy import FaultProxy

__all__ = ["BINDING", "fault_proxy", "kubesched_via"]

BINDING = r"/pods/[^/]+/binding$"
"""The path of every bind (``FaultProxy`` rules search it)."""


@contextlib.asynccontextmanager
async def fault_proxy(cp: ControlPlane) -> AsyncIterator[FaultProxy]:
    fp = FaultProxy(cp.server, ssl.create_default_context(cafile=str(cp.ca_file)))
    await fp.start()
    try:
        yield fp
    finally:
        await fp.close()


@contextlib.asynccontextmanager
async def kubesched_via(
    proxy: FaultProxy, cp: ControlPlane, *, request_timeout: float
) -> AsyncIterator[Runtime]:
    """``kubesched run`` (admin identity, no leader election) talking through ``proxy``."""
    settings = Settings(
        kubeconfig=str(proxy.kubeconfig(cp.dir, cp.admin_token)),
        leader_elect=False,
        port=0,
        client_qps=0,
        resync_seconds=0,
        request_timeout=request_timeout,
    )
    stop, ready = asyncio.Event(), asyncio.Event()
    built: list[Runtime] = []
    task = asyncio.create_task(run(settings=settings, stop=stop, ready=ready, runtime=built))
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait({task, waiter}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
    if task.done():
        waiter.cancel()
        task.result()
    assert ready.is_set(), "kubesched run did not become ready within 60 s"
    try:
        yield built[0]
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
