"""How ``kubesched run`` ends a leading term (virtual time): a graceful stop lets binds in
flight finish within the time the lease is still ours; a lost lease cancels them. And
SIGTERM sets the stop flag instead of killing the process."""

from __future__ import annotations

import asyncio
import os
import signal
import types
from typing import Any, cast

import pytest

from kubesched.cluster.memory import MemoryCluster
from kubesched.framework.types import Pod
from kubesched.operator import run as run_mod
from kubesched.operator import term
from kubesched.operator.settings import Settings
from kubesched.operator.stopping import trap_signals, until_set
from kubesched.scheduler.eventhandlers import EventHandlers
from kubesched.scheduler.scheduler import Scheduler
from tests.builders import make_node, make_pod


def runtime(bind_seconds: float) -> tuple[Any, MemoryCluster]:
    cluster = MemoryCluster()
    sched = Scheduler(cluster, cluster, seed=0)
    cluster.subscribe(EventHandlers(sched).on_event)
    original = cluster.bind
    binding = asyncio.Event()

    async def slow_bind(pod: Pod, node: str) -> None:
        binding.set()
        await asyncio.sleep(bind_seconds)
        await original(pod, node)

    cluster.bind = slow_bind  # type: ignore[method-assign,assignment]
    synced = asyncio.Event()
    synced.set()
    rt = types.SimpleNamespace(
        settings=Settings(namespace="ns", lease_duration=15, renew_deadline=10, retry_period=2),
        scheduler=sched,
        synced=synced,
        cache_synced=synced,
        leading=False,
        stopping=False,
        binding=binding,
    )
    cluster.apply(make_node("n1").alloc(cpu="4", memory="8Gi").obj())
    cluster.apply(make_pod("p").req(cpu="1").obj())
    return rt, cluster


async def lead_then_stop(rt: Any, *, graceful: bool) -> float:
    """Lead until the bind is in flight, then end the term; returns how long that took."""
    task = asyncio.create_task(term.schedule(cast(run_mod.Runtime, rt)))
    loop = asyncio.get_running_loop()
    await rt.binding.wait()
    assert rt.leading
    rt.stopping = graceful
    t0 = loop.time()
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert not rt.leading and not rt.scheduler._tasks
    return loop.time() - t0


@pytest.mark.looptime
async def test_graceful_stop_finishes_the_bind_in_flight() -> None:
    rt, cluster = runtime(bind_seconds=1.0)
    took = await lead_then_stop(rt, graceful=True)
    assert cluster.bindings == [("default/p", "n1")]
    assert took == pytest.approx(1.0, abs=0.05)


@pytest.mark.looptime
async def test_graceful_stop_waits_no_longer_than_the_lease_is_safe() -> None:
    rt, cluster = runtime(bind_seconds=60.0)
    took = await lead_then_stop(rt, graceful=True)
    # renew deadline 10 s - retry period 2 s = 8 s, capped at SHUTDOWN_GRACE (5 s)
    assert took == pytest.approx(term.SHUTDOWN_GRACE, abs=0.05)
    await asyncio.sleep(120)
    assert cluster.bindings == []


@pytest.mark.looptime
async def test_lost_lease_cancels_the_bind_in_flight_at_once() -> None:
    rt, cluster = runtime(bind_seconds=1.0)
    took = await lead_then_stop(rt, graceful=False)
    assert took < 0.05
    await asyncio.sleep(120)
    assert cluster.bindings == []


async def test_sigterm_sets_the_stop_flag() -> None:
    stop = asyncio.Event()
    trapped = trap_signals(stop)
    loop = asyncio.get_running_loop()
    try:
        assert signal.SIGTERM in trapped  # else the kill below would end the test run
        os.kill(os.getpid(), signal.SIGTERM)
        await asyncio.wait_for(stop.wait(), 5)
    finally:
        for sig in trapped:
            loop.remove_signal_handler(sig)


async def test_a_failed_initial_listing_stops_the_other_listings() -> None:
    """One kind refused (a missing RBAC rule) ends kubesched run's start with that error;
    the other LISTs in flight are cancelled and have ended before the error is raised,
    so the shutdown closes no connection a request still uses."""
    ended: list[str] = []

    async def listing(kind: str, seconds: float) -> None:
        try:
            await asyncio.sleep(seconds)
        finally:
            ended.append(kind)

    async def refused() -> None:
        await asyncio.sleep(0.01)
        raise PermissionError("devicetaintrules is forbidden")

    with pytest.raises(PermissionError, match="devicetaintrules"):
        await run_mod.all_or_none(listing("Pod", 30), refused(), listing("Node", 30))
    assert sorted(ended) == ["Node", "Pod"]
    assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]


async def test_the_initial_listing_waits_for_all() -> None:
    order: list[int] = []

    async def step(i: int) -> None:
        await asyncio.sleep(0.01 * i)
        order.append(i)

    await run_mod.all_or_none(step(3), step(1), step(2))
    assert order == [1, 2, 3]


async def test_a_stop_during_the_initial_listing_cancels_every_listing() -> None:
    ended: list[int] = []

    async def listing(i: int) -> None:
        try:
            await asyncio.sleep(30)
        finally:
            ended.append(i)

    task = asyncio.create_task(run_mod.all_or_none(listing(1), listing(2)))
    await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(ended) == [1, 2]


async def test_a_stop_that_comes_as_the_awaited_event_is_set_is_not_lost() -> None:
    """``run``'s waits for the first bind (the initial sync's, the server's): a cancel that
    arrives in the same step as the event must still cancel the task (``asyncio.wait_for``
    on Python 3.11 returned instead, and shutdown waited for such a task forever)."""
    event = asyncio.Event()
    task = asyncio.create_task(until_set(event, 10.0))
    await asyncio.sleep(0)  # the task is waiting
    event.set()
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_wait_for_the_first_bind_ends_when_set_or_after_its_time() -> None:
    event = asyncio.Event()
    loop = asyncio.get_running_loop()
    start = loop.time()
    await until_set(event, 0.05)  # never set: returns after its time, no error
    assert loop.time() - start >= 0.05
    event.set()
    start = loop.time()
    await until_set(event, 10.0)
    assert loop.time() - start < 1.0
