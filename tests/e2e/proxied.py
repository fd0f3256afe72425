"""``kubesched run`` in-process behind the fault proxy (:mod:`tests.controlplane.faultproxy`),
for the e2e tests of conflicts and of a slow or failing API."""

from __future__ import annotations

import contextlib
import ssl
from collections.abc import AsyncIterator

from kubesched.operator.run import Runtime
from tests.controlplane import ControlPlane
from tests.controlplane.faultproxy import FaultProxy
from tests.e2e.support import local_settings, running

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
    settings = local_settings(
        proxy.kubeconfig(cp.dir, cp.admin_token), request_timeout=request_timeout
    )
    async with running(settings) as started:
        yield started.runtime
