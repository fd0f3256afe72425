"""What a failover leaves behind, on the in-memory cluster in virtual time: a pod bound by
someone else between our cycle and our bind (409 at Bind), and binds in flight when the
lease is lost (``Scheduler.abort``)."""

from __future__ import annotations

import asyncio

import pytest

from kubesched.framework.types import Pod
from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running

pytestmark = pytest.mark.looptime


async def test_pod_bound_by_someone_else_is_forgotten_not_retried_nor_reported() -> None:
    h = Harness()
    h.apply(
        make_node("n1").alloc(cpu="4", memory="8Gi").obj(),
        make_node("n2").alloc(cpu="4", memory="8Gi").obj(),
    )
    original = h.cluster.bind
    attempts: list[str] = []

    async def bound_meanwhile(pod: Pod, node: str) -> None:
        attempts.append(node)
        other = "n2" if node == "n1" else "n1"
        await original(pod, other)  # another replica's bind lands first
        await original(pod, node)  # ours: 409, already assigned

    h.cluster.bind = bound_meanwhile  # type: ignore[method-assign,assignment]
    h.apply(make_pod("p").req(cpu="1").obj())
    async with running(h):
        await h.wait_for(lambda: h.node_of("default/p") is not None and not h.sched._tasks)
        await asyncio.sleep(30)  # longer than any backoff: a requeued pod would be retried
    (node,) = attempts
    other = h.node_of("default/p")
    assert other is not None and other != node
    assert h.cluster.bindings == [("default/p", other)]
    assert "FailedScheduling" not in h.reasons("default/p")
    assert (h.cluster.condition("default/p", "PodScheduled") or {}).get("status") == "True"
    # The cache holds the pod where it really is, and only there.
    info = h.sched.cache.node_info(other)
    assert info is not None and [p.key for p in info.pods] == ["default/p"]
    mine = h.sched.cache.node_info(node)
    assert mine is None or mine.pods == []
    uid = make_pod("p").pod().uid
    assert not h.sched.cache.is_assumed(uid)
    assert uid not in h.sched.unscheduled
    q = h.sched.queues.queue("kubesched")
    assert q is not None and q.get(uid) is None


async def test_abort_cancels_binds_in_flight_and_nothing_is_bound() -> None:
    h = Harness()
    h.apply(make_node("n1").alloc(cpu="4", memory="8Gi").obj())
    original = h.cluster.bind
    started = asyncio.Event()

    async def slow_bind(pod: Pod, node: str) -> None:
        started.set()
        await asyncio.sleep(10)  # a slow API server
        await original(pod, node)

    h.cluster.bind = slow_bind  # type: ignore[method-assign,assignment]
    h.apply(make_pod("p").req(cpu="1").obj())
    async with running(h):
        await started.wait()
        await h.sched.abort()  # the lease is lost
        assert not h.sched._tasks
        await asyncio.sleep(30)
    assert h.cluster.bindings == []
    assert h.node_of("default/p") is None
    assert "FailedScheduling" not in h.reasons("default/p")
