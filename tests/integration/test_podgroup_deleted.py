"""A PodGroup deleted while members of its gang wait at Permit (issue 9, conflicts): the
waiting members are rejected and unreserved at once, nothing of the gang is bound, each
member gets a FailedScheduling event naming the group as deleted, they stay pending
with a reason, and the cache agrees with the cluster. In-memory cluster, virtual time."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.scheduler.cachedump import cache_dump
from tests.builders import make_pod
from tests.e2e.cachecheck import cache_mismatches
from tests.integration.harness import Harness, running
from tests.integration.test_gang_scheduling import (
    LABEL,
    bound,
    coscheduling,
    harness_with_slow_members,
    members,
    nodes,
    pod_group,
)

pytestmark = pytest.mark.looptime

DELETED = 'pod group "default/g" was deleted'


def consistent(h: Harness) -> list[str]:
    return cache_mismatches(
        cache_dump(h.sched), h.cluster.list("Pod"), h.cluster.list("Node"), "kubesched"
    )


def failed_messages(h: Harness, key: str) -> list[str]:
    return [e.message for e in h.cluster.events_for(key) if e.reason == "FailedScheduling"]


def terminating(group: dict[str, Any]) -> dict[str, Any]:
    meta = {
        **group["metadata"],
        "deletionTimestamp": "2026-11-22T00:00:00Z",
        "finalizers": ["kubesched.dev/finalizer"],
    }
    return {**group, "metadata": meta}


@pytest.mark.parametrize("how", ["deleted", "terminating"])
async def test_waiting_members_are_rejected_when_their_pod_group_goes(how: str) -> None:
    h = harness_with_slow_members()
    slow = make_pod("g-2").req(cpu="1").label(LABEL, "g").label("slow", "yes").obj()
    group = pod_group("g", 3, scheduleTimeoutSeconds=600)
    h.apply(*nodes(1), group, *members("g", 2), slow)
    fwk = h.sched.profiles["kubesched"].framework
    waiting = ["default/g-0", "default/g-1"]
    async with running(h):
        t0 = await h.wait_for(lambda: len(fwk.waiting_pods) == 2)
        if how == "deleted":
            h.cluster.delete("PodGroup", "default/g")
        else:
            h.apply(terminating(group))
        t1 = await h.wait_for(lambda: not fwk.waiting_pods and h.sched.cache.pod_count() == 0)
        assert t1 - t0 < 1, "rejected at once, not at the 600 s timeout"
        await h.wait_for(lambda: all(DELETED in failed_messages(h, k) for k in waiting))
        await h.wait_for(lambda: not h.sched._tasks)
        dump = cache_dump(h.sched)
        assert h.cluster.bindings == []
        assert dump["assumed"] == []
        pending = {p["pod"]: p for p in dump["pending"]}
        assert set(pending) == {*waiting, "default/g-2"}
        assert all(pending[k]["reason"] for k in pending)
        assert consistent(h) == []
        # The group back (without the finalizer's leftovers): the gang is tried again.
        h.apply(pod_group("g", 2))
        await h.wait_for(lambda: bound(h, waiting) == 2, within=120)
        await h.wait_for(lambda: not h.sched._tasks and not h.sched.cache.assumed_pods())
        assert consistent(h) == []


async def test_gangs_that_are_gone_are_forgotten() -> None:
    """A long-running scheduler sees many short-lived gangs: once a gang's PodGroup and
    its pods are gone, nothing of it stays in the plugin; a gang with pods left stays."""
    h = Harness()
    h.apply(*nodes(2), pod_group("a", 2), pod_group("b", 2), *members("a", 2), *members("b", 2))
    plugin = coscheduling(h)
    async with running(h):
        await h.wait_for(lambda: bound(h, [f"default/{g}-{i}" for g in "ab" for i in (0, 1)]) == 4)
        assert set(plugin._gangs) == {"default/a", "default/b"}
        for i in (0, 1):  # a: its pods first, then its group (a finished job)
            h.cluster.delete("Pod", f"default/a-{i}")
        h.cluster.delete("PodGroup", "default/a")
        h.cluster.delete("PodGroup", "default/b")  # b: its group first, pods still there
        await h.wait_for(lambda: "default/a" not in plugin._gangs)
        assert set(plugin._gangs) == {"default/b"}
        for i in (0, 1):
            h.cluster.delete("Pod", f"default/b-{i}")
        h.apply(pod_group("c", 2))
        h.cluster.delete("PodGroup", "default/c")  # the next deletion sweeps b too
        await h.wait_for(lambda: not plugin._gangs)
