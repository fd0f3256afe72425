"""The scheduling loop queues the start's held pods (kubesched.scheduler.held_pods)
right after its first cycle: once that cycle's bind is out, or at once when the cycle
bound nothing, so the second pop sees every pod (virtual time)."""

from __future__ import annotations

import asyncio

import pytest

from kubesched.framework.types import Pod
from kubesched.scheduler.scheduler import FIRST_BIND_WITHIN
from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running

pytestmark = pytest.mark.looptime


def releases(h: Harness, key: str) -> list[tuple[float, str | None]]:
    """Each release of a hold the scheduler owns: (loop time, the node ``key`` was bound
    to by then)."""
    seen: list[tuple[float, str | None]] = []
    held = h.sched.hold_pending(lambda raw: None)
    release = held.release

    def recorded() -> None:
        seen.append((asyncio.get_running_loop().time(), h.node_of(key)))
        release()

    held.release = recorded  # type: ignore[method-assign]
    return seen


async def test_held_pods_are_released_once_the_first_bind_is_out() -> None:
    h = Harness()
    h.apply(make_node("n1").alloc(cpu="4", pods="10").obj(), make_pod("first").req(cpu="1").obj())
    seen = releases(h, "default/first")
    bind = h.cluster.bind

    async def bind_a_round_trip_later(pod: Pod, node: str) -> None:
        await asyncio.sleep(0.005)  # the API server's answer
        await bind(pod, node)

    h.cluster.bind = bind_a_round_trip_later  # type: ignore[method-assign,assignment]
    async with running(h):
        await h.wait_for(lambda: bool(seen))
        await asyncio.sleep(1)
    assert [node for _, node in seen] == ["n1"]  # once, after the bind


async def test_a_first_cycle_that_binds_nothing_releases_them_at_once() -> None:
    h = Harness()
    h.apply(make_node("n1").alloc(cpu="1", pods="10").obj(), make_pod("big").req(cpu="8").obj())
    seen = releases(h, "default/big")
    start = asyncio.get_running_loop().time()
    async with running(h):
        await h.wait_for(lambda: bool(seen))
    assert seen[0][1] is None
    assert seen[0][0] - start < FIRST_BIND_WITHIN / 10
    assert "FailedScheduling" in h.reasons("default/big")
