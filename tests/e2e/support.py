"""What the e2e tests share: the control plane's synchronous REST client called off the
event loop, polling until something holds, the CRDs, and ``kubesched run`` started in
the test's own event loop (where the tests can reach its :class:`Runtime`).

The fixtures built on these (``crds``, ``kubesched``) are in ``conftest.py``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kubesched.cluster.prefetch import Prefetch
from kubesched.operator.run import Runtime, run
from kubesched.operator.settings import Settings
from tests.controlplane import ControlPlane

__all__ = [
    "CRDS",
    "JSON",
    "Started",
    "call",
    "condition",
    "events_for",
    "eventually",
    "install_crds",
    "local_settings",
    "running",
]

JSON = dict[str, Any]
CRDS = Path(__file__).parents[2] / "crds"
"""kubesched's own CRDs (PodGroup, SchedulingProfile, ...)."""


async def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` in a thread: the control plane's client blocks, and the
    scheduler under test runs in this loop."""
    return await asyncio.to_thread(fn, *args, **kwargs)


async def eventually(
    check: Callable[[], Any],
    *,
    within: float = 20.0,
    what: str,
    every: float = 0.2,
    in_thread: bool = True,
) -> Any:
    """Poll ``check`` until it returns something truthy, and return that; fail naming
    ``what`` after ``within`` seconds. ``check`` runs in a thread (it may call the API)
    unless ``in_thread`` is False: a check reading the scheduler's own state must run on
    its loop."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        result = await call(check) if in_thread else check()
        if result:
            return result
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {within} s waiting for {what}")
        await asyncio.sleep(every)


def install_crds(cp: ControlPlane) -> None:
    """Apply kubesched's CRDs and wait until the API server serves them (Kopf resolves
    the watched resources once, when ``kubesched run`` starts)."""
    cp.kubectl("apply", "-f", CRDS, check=True)
    cp.kubectl("wait", "--for=condition=Established", "-f", CRDS, "--timeout=30s", check=True)


def local_settings(kubeconfig: str | Path, **overrides: Any) -> Settings:
    """Settings of a ``kubesched run`` inside a test: no leader election, endpoints on
    a free port, no client-side rate limit, no periodic resync (``overrides`` win)."""
    base: dict[str, Any] = {
        "leader_elect": False,
        "port": 0,
        "client_qps": 0,
        "resync_seconds": 0,
    }
    return Settings(kubeconfig=str(kubeconfig), **(base | overrides))


def events_for(cp: ControlPlane, namespace: str, name: str) -> list[JSON]:
    """The events (events.k8s.io/v1) about the object ``name`` in ``namespace``."""
    return [
        e
        for e in cp.api.list("events.k8s.io/v1", "Event", namespace)
        if e["regarding"]["name"] == name
    ]


def condition(pod: JSON, type_: str) -> JSON | None:
    """The pod's status condition of ``type_``, or None."""
    for c in pod.get("status", {}).get("conditions") or ():
        if c["type"] == type_:
            return dict(c)
    return None


@dataclass(frozen=True)
class Started:
    runtime: Runtime
    task: asyncio.Task[None]
    """``run``'s task: done only if kubesched stopped (or crashed) before the block ended."""


@contextlib.asynccontextmanager
async def running(
    settings: Settings,
    *,
    hook: list[Runtime] | None = None,
    ready_within: float = 60.0,
    prefetch: Prefetch | None = None,
) -> AsyncIterator[Started]:
    """``kubesched run`` in this loop until the block ends; entered once it is ready
    (caches synced), or raising what stopped it from starting. ``hook`` is ``run``'s
    runtime list (a subclass may adjust the runtime as it is built); ``prefetch``, the
    start's first listing (``kubesched run`` starts it before its imports)."""
    stop, ready = asyncio.Event(), asyncio.Event()
    built: list[Runtime] = hook if hook is not None else []
    task = asyncio.create_task(
        run(settings=settings, stop=stop, ready=ready, runtime=built, prefetch=prefetch)
    )
    waiter = asyncio.create_task(ready.wait())
    await asyncio.wait({task, waiter}, timeout=ready_within, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if task.done():
        task.result()  # raises what went wrong
    if not ready.is_set():
        stop.set()
        await asyncio.wait_for(task, 30)
        raise AssertionError(f"kubesched run did not become ready within {ready_within:.0f} s")
    try:
        yield Started(built[0], task)
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
        # Let the runtime (its API client's connections) go now, while this test's loop
        # still runs, as when run() is given no hook: not in a later test's GC.
        built.clear()
