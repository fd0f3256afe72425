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

Kopf resolves the kinds it watches as it starts (its CRD scanning is off). Started
without the SchedulingProfile CRD, it runs until ``ProfileController.watch_crd`` finds
the CRD served, and then once more, with a registry built anew: SchedulingProfiles are
applied from then on, with no restart of ``kubesched run``.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kubesched.cluster.kinds import WATCHED
from kubesched.cluster.kubeconfig import load_client_configuration
from kubesched.framework.cluster_port import ClusterError
from kubesched.operator.handlers import build_registry
from kubesched.operator.profile_handlers import register as register_profile_handlers
from kubesched.operator.stopping import wait_first

if TYPE_CHECKING:
    import kopf

    from kubesched.operator.run import Runtime

__all__ = ["kopf_registry", "start_kopf"]

log = logging.getLogger("kubesched.run")

STORAGE_WAIT = 10.0
"""Seconds Kopf's restart waits at most for the lists of CRDs installed a moment ago."""


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
    until ``stop_flag`` is set (see :func:`kubesched.operator.kopf_runner.run_kopf`);
    started again once, if the SchedulingProfile CRD is installed meanwhile."""
    if await wait_first(rt.watches_open, stop_flag):
        return
    runner = await asyncio.to_thread(importlib.import_module, "kubesched.operator.kopf_runner")
    found = rt.profiles.crd_found
    # Kopf resolves the kinds it watches as it starts: without the SchedulingProfile CRD
    # then, it runs until the CRD is found (ProfileController.watch_crd), then once more
    restart = rt.profiles.served is False and not found.is_set()
    reconcile: asyncio.Future[None] | None = None
    try:
        while True:
            rt.registry = kopf_registry(rt)
            this_run = asyncio.Event() if restart else stop_flag
            relay = asyncio.ensure_future(_relay(stop_flag, found, this_run)) if restart else None
            try:
                await runner.run_kopf(
                    after=rt.cache_synced,
                    stop_flag=this_run,
                    on_spawned=on_spawned,
                    registry=rt.registry,
                    settings=runner.kopf_settings(rt.settings),
                    clusterwide=True,
                    standalone=True,
                    ready_flag=ready_flag,
                )
            finally:
                if relay is not None:
                    relay.cancel()
            if not restart or stop_flag.is_set() or not found.is_set():
                return  # stopped, or Kopf ended on its own (run ends then)
            restart = False
            await _until_lists_answer(rt, stop_flag)
            if stop_flag.is_set():
                return
            log.info("Kopf starts again, to watch SchedulingProfiles")
            ready_flag = asyncio.Event()
            # with watch_engine: kopf, what changed while no Kopf watched
            reconcile = asyncio.ensure_future(_reconcile_once(rt, ready_flag))
    finally:
        if reconcile is not None:
            reconcile.cancel()


async def _relay(stop_flag: asyncio.Event, found: asyncio.Event, this_run: asyncio.Event) -> None:
    """Ends this run of Kopf's at the stop, or once the SchedulingProfile CRD is found."""
    await wait_first(found, stop_flag)
    this_run.set()


async def _until_lists_answer(rt: Runtime, stop_flag: asyncio.Event) -> None:
    """Until the optional kinds Kopf watches (``watch_engine: kopf``) can be listed, or
    :data:`STORAGE_WAIT` seconds, or the stop: their CRDs, installed with the
    SchedulingProfile one, answer 429 "storage is (re)initializing" for a moment, which
    Kopf would log as an ERROR before its retry."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + STORAGE_WAIT
    for w in WATCHED:
        if not w.optional or w.kind not in rt.kopf_kinds:
            continue
        while True:
            try:
                await rt.cluster.request("GET", f"{w.prefix}/{w.plural}", query={"limit": "1"})
            except ClusterError as e:
                if e.retryable and loop.time() < deadline and not stop_flag.is_set():
                    await asyncio.sleep(0.2)
                    continue
            break  # listed, not installed (404), or Kopf's to retry


async def _reconcile_once(rt: Runtime, ready: asyncio.Event) -> None:
    await ready.wait()
    rt.reconcile_kopf_kinds("Kopf's restart")
