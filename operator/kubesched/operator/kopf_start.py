"""Kopf in ``kubesched run``: imported, given its handlers and started once the first
bind is out (or the cache synced a second ago: ``rt.watches_open``), off the way to it.

Kopf runs the SchedulingProfile handlers (and, with ``watch_engine: kopf``,
watches every kind). Scheduling waits for none of it: every watched kind is listed into the
cache, and the SchedulingProfiles applied, before the first cycle (``_initial_sync`` in
:mod:`kubesched.operator.run`); Kopf's handlers take over from that listing. So Kopf's
import (with attrs, iso8601, jsonpatch and its own modules: about half a CPU second on
a busy 2-core machine, a third of what ``kubesched run`` imported) is not on that way
either: it runs in a worker thread after the first bind, while the event loop schedules
the next pods, and the registry is built after it. (In a thread, it still holds the GIL
for most of it: started at the cache sync, it slowed the first cycle down.)
"""

from __future__ import annotations

import asyncio
import importlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kubesched.cluster.kubeconfig import load_client_configuration
from kubesched.operator.handlers import build_registry
from kubesched.operator.profile_handlers import register as register_profile_handlers
from kubesched.operator.stopping import wait_first

if TYPE_CHECKING:
    import kopf

    from kubesched.operator.run import Runtime

__all__ = ["kopf_registry", "start_kopf"]


def kopf_registry(rt: Runtime) -> kopf.OperatorRegistry:
    """``rt``'s Kopf handlers: the watched kinds' events (those of the direct informers
    skipped), the SchedulingProfiles', and the login."""
    import kopf

    from kubesched.operator.kopf_runner import login_info

    registry = build_registry(rt.router, skip=rt.direct_kinds)
    register_profile_handlers(registry, rt.profiles)
    kubeconfig = rt.settings.kubeconfig

    @kopf.on.login(registry=registry)
    async def login(**_: Any) -> kopf.AiohttpSession:
        # A fresh read each time Kopf asks (e.g. after a 401): tokens rotate.
        return await login_info(await load_client_configuration(kubeconfig))

    return registry


async def start_kopf(
    rt: Runtime,
    *,
    stop_flag: asyncio.Event,
    on_spawned: Callable[[], None],
    ready_flag: asyncio.Event,
) -> None:
    """Kopf's operator once ``rt.watches_open`` is set (unless ``stop_flag`` comes first),
    until ``stop_flag`` is set (see :func:`kubesched.operator.kopf_runner.run_kopf`)."""
    if await wait_first(rt.watches_open, stop_flag):
        return
    runner = await asyncio.to_thread(importlib.import_module, "kubesched.operator.kopf_runner")
    rt.registry = kopf_registry(rt)
    await runner.run_kopf(
        after=rt.cache_synced,
        stop_flag=stop_flag,
        on_spawned=on_spawned,
        registry=rt.registry,
        settings=runner.kopf_settings(rt.settings),
        clusterwide=True,
        standalone=True,
        ready_flag=ready_flag,
    )
