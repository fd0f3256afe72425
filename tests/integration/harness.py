"""A running scheduler on the in-memory cluster, for integration tests in virtual time."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from kubesched.api.profile import ProfileSpec
from kubesched.cluster.memory import MemoryCluster
from kubesched.framework.registry import Registry
from kubesched.scheduler.eventhandlers import EventHandlers
from kubesched.scheduler.scheduler import Scheduler


class Harness:
    def __init__(
        self,
        *,
        profiles: Sequence[ProfileSpec] | None = None,
        registry: Registry | None = None,
        seed: int = 0,
        pop_from_backoff: bool = True,
    ) -> None:
        self.cluster = MemoryCluster()
        self.sched = Scheduler(
            self.cluster,
            self.cluster,
            profiles=profiles,
            registry=registry,
            seed=seed,
            pop_from_backoff=pop_from_backoff,
        )
        self.bad: list[str] = []
        self.handlers = EventHandlers(self.sched, on_bad_object=lambda k, o, m: self.bad.append(m))
        self.cluster.subscribe(self.handlers.on_event)

    def apply(self, *objs: dict[str, Any]) -> None:
        for o in objs:
            self.cluster.apply(o)

    async def wait_for(
        self, predicate: Callable[[], bool], within: float = 30.0, step: float = 0.01
    ) -> float:
        """Wait (virtual time) until ``predicate()``; returns the loop time it became true."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while not predicate():
            if loop.time() > deadline:
                raise AssertionError(f"condition not met within {within} s")
            await asyncio.sleep(step)
        return loop.time()

    def node_of(self, key: str) -> str | None:
        return self.cluster.node_of(key)

    def reasons(self, key: str) -> list[str]:
        return [e.reason for e in self.cluster.events_for(key)]


@contextlib.asynccontextmanager
async def running(h: Harness) -> AsyncIterator[Harness]:
    task = asyncio.create_task(h.sched.run())
    try:
        yield h
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        for t in list(h.sched._tasks):
            t.cancel()
        await asyncio.gather(*h.sched._tasks, return_exceptions=True)
