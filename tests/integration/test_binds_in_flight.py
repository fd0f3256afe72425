"""Binds the API server has not answered yet are bounded: the scheduling loop waits for
one to end before placing more pods (each pending bind holds its cycle state, its request
and a coroutine); pods waiting at Permit never count, so they cannot stall the cycles
that would let them go."""

from __future__ import annotations

import asyncio

import pytest

from kubesched.framework.types import Pod
from kubesched.scheduler import binding_cycle
from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running
from tests.integration.test_scheduler_loop import permit_harness

pytestmark = pytest.mark.looptime

LIMIT = 4


def held_binds(h: Harness) -> tuple[asyncio.Event, list[str]]:
    """Binds wait for the returned event; the list says which are waiting."""
    release, waiting = asyncio.Event(), []
    original = h.cluster.bind

    async def slow_bind(pod: Pod, node: str) -> None:
        waiting.append(pod.key)
        await release.wait()
        await original(pod, node)

    h.cluster.bind = slow_bind  # type: ignore[method-assign,assignment]
    return release, waiting


async def test_no_more_binds_in_flight_than_the_limit(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binding_cycle, "MAX_BINDS_IN_FLIGHT", LIMIT)
    h = Harness()
    h.apply(*(make_node(f"n{i}").obj() for i in range(3)))
    h.apply(*(make_pod(f"p{i}").req(cpu="100m").obj() for i in range(LIMIT + 6)))
    release, waiting = held_binds(h)
    async with running(h):
        await h.wait_for(lambda: len(waiting) == LIMIT)
        await asyncio.sleep(10)
        assert len(waiting) == LIMIT  # the API server answered none: nothing more placed
        assert len(h.sched.cache.assumed_pods()) == LIMIT
        queue = h.sched.queues.queue("kubesched")
        assert queue is not None and len(queue.pending_pods()) == 6
        release.set()
        await h.wait_for(lambda: len(h.cluster.bindings) == LIMIT + 6)
    assert len(waiting) == LIMIT + 6


async def test_pods_waiting_at_permit_do_not_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(binding_cycle, "MAX_BINDS_IN_FLIGHT", LIMIT)
    h, _ = permit_harness(timeout=600)
    h.apply(make_node("n1").alloc(cpu="64", memory="64Gi", pods="110").obj())
    h.apply(*(make_pod(f"held-{i}").label("hold", "yes").obj() for i in range(LIMIT + 2)))
    h.apply(make_pod("free").obj())
    async with running(h):
        fwk = h.sched.profiles["kubesched"].framework
        await h.wait_for(lambda: h.node_of("default/free") == "n1")
        assert len(list(fwk.iterate_waiting_pods())) == LIMIT + 2
        for wp in fwk.iterate_waiting_pods():
            wp.allow("TestPermit")
        await h.wait_for(lambda: len(h.cluster.bindings) == LIMIT + 3)
