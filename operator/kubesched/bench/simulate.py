"""The ``simulate`` target: a workload on the in-memory cluster, in this process, in real time.

The real scheduler (default profile, serving ``kubesched``) runs as a task on this
event loop beside the benchmark, which creates the plan's objects in the in-memory
cluster (yielding after each create, as a client waiting for the API server would)
and hears every pod change as a watch event. Unlike ``kubesched simulate`` (virtual
time), time here is wall time: the one-second sampler runs between scheduling
cycles, and backoffs really wait.

CPU seconds are this process's over the measured window (the benchmark's own work
included, which is small next to the scheduler's); peak RSS is the process's
high-water mark. The figures are the scheduler's cost without an API server: an upper
bound for what ``--target cluster`` can reach.
"""

from __future__ import annotations

import asyncio
import contextlib
import resource
import time
from collections.abc import Mapping
from typing import Any

from kubesched.bench.report import RunResult
from kubesched.bench.runner import Limits, run_pods
from kubesched.bench.tracker import Tracker
from kubesched.cluster.memory import MemoryCluster
from kubesched.framework.cluster_port import NotFound
from kubesched.scheduler.eventhandlers import EventHandlers
from kubesched.scheduler.scheduler import Scheduler
from kubesched.simulator.workloads import Plan

__all__ = ["SCHEDULER_NAME", "bench_simulate"]

#: The default profile's schedulerName.
SCHEDULER_NAME = "kubesched"


class MemoryDriver:
    """Creates and deletes objects in a :class:`MemoryCluster` scheduled by a Scheduler."""

    def __init__(self, tracker: Tracker, seed: int | None) -> None:
        self.cluster = MemoryCluster()
        self.sched = Scheduler(self.cluster, self.cluster, seed=seed)
        self.bad: list[str] = []
        handlers = EventHandlers(self.sched, on_bad_object=lambda k, o, m: self.bad.append(m))
        self.cluster.subscribe(handlers.on_event)
        self.tracker = tracker
        self.cluster.subscribe(self._on_event, replay=False)
        self.task: asyncio.Task[None] | None = None
        self.paused = False

    def _on_event(
        self, kind: str, event: str, obj: Mapping[str, Any], old: Mapping[str, Any] | None
    ) -> None:
        if kind == "Pod":
            self.tracker.seen(event, obj)

    def apply(self, obj: dict[str, Any]) -> None:
        obj = {**obj, "metadata": dict(obj.get("metadata") or {})}
        meta = obj["metadata"]
        if obj.get("kind") == "Pod":
            meta.setdefault("uid", f"{meta.get('namespace')}/{meta['name']}")
            meta.setdefault("creationTimestamp", time.strftime("%Y-%m-%dT%H:%M:%SZ"))
            obj["spec"] = {**obj["spec"], "schedulerName": SCHEDULER_NAME}
            obj["status"] = {"phase": "Pending"}
        self.cluster.apply(obj)

    async def create(self, obj: dict[str, Any]) -> None:
        self.apply(obj)
        if not self.paused:
            await asyncio.sleep(0)

    async def pause(self) -> None:
        # Creates stop yielding: the creators' first task makes every pod in one step,
        # before the scheduler's task runs again (an in-process scheduler is not stopped).
        self.paused = True

    async def resume(self) -> None:
        self.paused = False

    async def delete(self, obj: dict[str, Any]) -> None:
        kind, key = MemoryCluster.key_of(obj)
        with contextlib.suppress(NotFound):
            self.cluster.delete(kind, key)
        await asyncio.sleep(0)

    def cpu_seconds(self) -> float | None:
        return time.process_time()

    def cpu_wait_seconds(self) -> float | None:
        return None  # the scheduler shares this process

    def other_cpu_seconds(self) -> dict[str, float]:
        return {}  # one process: the scheduler's figure is all of it

    def check(self) -> None:
        if self.task is not None and self.task.done():
            self.task.result()
            raise RuntimeError("the scheduler stopped")

    async def __aenter__(self) -> MemoryDriver:
        self.task = asyncio.create_task(self.sched.run())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self.task
        await self.sched.abort()


def peak_rss_bytes() -> int:
    """This process's peak resident set size (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


async def bench_simulate(plan: Plan, limits: Limits, *, seed: int | None = None) -> RunResult:
    """Run ``plan`` on a fresh in-memory cluster; the kubesched figures."""
    loop = asyncio.get_running_loop()
    tracker = Tracker(plan, loop.time)
    result = RunResult("kubesched", len(plan.measured))
    driver = MemoryDriver(tracker, seed)
    for obj in [*plan.setup, *plan.nodes]:
        driver.apply(obj)
    async with driver:
        await run_pods(driver, plan, tracker, result, limits)
    if driver.bad:
        raise RuntimeError(f"the scheduler refused objects: {driver.bad[:3]}")
    result.peak_rss_bytes = peak_rss_bytes()
    return result
