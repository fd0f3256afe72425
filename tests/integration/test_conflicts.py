"""Conflicts between a decision and its bind on the in-memory cluster, in virtual time
(the real API server's side is in tests/e2e/test_conflicts.py): the in-memory cluster
binds as the API server does -- no resource check, no node check -- and the cache must
end equal to it."""

from __future__ import annotations

import asyncio

import pytest

from kubesched.framework.types import Pod
from kubesched.scheduler.cachedump import cache_dump
from tests.builders import make_node, make_pod
from tests.e2e.cachecheck import cache_mismatches
from tests.integration.harness import Harness, running

pytestmark = pytest.mark.looptime


def consistent(h: Harness) -> list[str]:
    return cache_mismatches(
        cache_dump(h.sched), h.cluster.list("Pod"), h.cluster.list("Node"), "kubesched"
    )


def held(h: Harness) -> asyncio.Event:
    """Hold every bind until the returned event is set."""
    release = asyncio.Event()
    original = h.cluster.bind

    async def bind(pod: Pod, node: str) -> None:
        await release.wait()
        await original(pod, node)

    h.cluster.bind = bind  # type: ignore[method-assign,assignment]
    return release


async def test_node_deleted_before_the_bind() -> None:
    h = Harness()
    h.apply(make_node("n1").alloc(cpu="2", memory="4Gi").obj())
    release = held(h)
    h.apply(make_pod("p").uid("uid-p").req(cpu="1").obj())
    async with running(h):
        await h.wait_for(lambda: bool(h.sched.cache.assumed_pods()))
        h.cluster.delete("Node", "n1")
        release.set()
        await h.wait_for(lambda: h.node_of("default/p") == "n1" and not h.sched._tasks)
        await h.wait_for(lambda: not h.sched.cache.assumed_pods())
        assert h.reasons("default/p") == ["Scheduled"]
        (entry,) = cache_dump(h.sched)["nodes"]
        assert (entry["name"], entry["present"]) == ("n1", False)
        assert [p["pod"] for p in entry["pods"]] == ["default/p"]
        assert consistent(h) == []
        assert len(h.sched.cache.update_snapshot()) == 0  # out of every decision
        h.cluster.delete("Pod", "default/p")  # pod GC
        await h.wait_for(lambda: cache_dump(h.sched)["nodes"] == [])
        assert consistent(h) == []


async def test_node_filled_by_another_scheduler_before_the_bind() -> None:
    h = Harness()
    h.apply(make_node("n1").alloc(cpu="2", memory="4Gi").obj())
    release = held(h)
    h.apply(make_pod("ours").uid("uid-ours").req(cpu="1500m").obj())
    async with running(h):
        await h.wait_for(lambda: bool(h.sched.cache.assumed_pods()))
        h.apply(make_pod("theirs").req(cpu="1500m").scheduler("other").node("n1").obj())
        release.set()
        await h.wait_for(lambda: h.node_of("default/ours") == "n1")
        h.apply(make_pod("later").req(cpu="100m").obj())
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/later"))
        await h.wait_for(lambda: not h.sched._tasks and not h.sched.cache.assumed_pods())
        dump = cache_dump(h.sched)
    (entry,) = dump["nodes"]
    assert entry["requested"]["milliCPU"] == 3000  # over-committed, as kube-scheduler binds
    assert [p["pod"] for p in dump["pending"]] == ["default/later"]
    assert "Insufficient cpu" in dump["pending"][0]["reason"]
    assert consistent(h) == []
