"""A PodGroup deleted (or terminating) while its gang is pending (issue 9, conflicts):
nothing of the gang is bound or reserved (a whole-group cycle holds nothing between
attempts), the members stay pending with a reason saying the group is gone, the cache
agrees with the cluster, and the group back places them. In-memory cluster, virtual
time."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.scheduler.cachedump import cache_dump
from tests.builders import make_pod
from tests.e2e.cachecheck import cache_mismatches
from tests.integration.harness import Harness, running
from tests.integration.test_gang_scheduling import (
    LABEL,
    FailWhileBroken,
    bound,
    coscheduling,
    harness_with_slow_members,
    members,
    nodes,
    pod_group,
)

pytestmark = pytest.mark.looptime

GONE = 'pod group "default/g" does not exist; waiting for it to be created'


def consistent(h: Harness) -> list[str]:
    return cache_mismatches(
        cache_dump(h.sched), h.cluster.list("Pod"), h.cluster.list("Node"), "kubesched"
    )


def failed_messages(h: Harness, key: str) -> list[str]:
    return [e.message for e in h.cluster.events_for(key) if e.reason == "FailedScheduling"]


def said(h: Harness, key: str, words: str) -> bool:
    """A FailedScheduling event of the pod says ``words``."""
    return any(words in m for m in failed_messages(h, key))


def terminating(group: dict[str, Any]) -> dict[str, Any]:
    meta = {
        **group["metadata"],
        "deletionTimestamp": "2026-11-22T00:00:00Z",
        "finalizers": ["kubesched.dev/finalizer"],
    }
    return {**group, "metadata": meta}


@pytest.mark.parametrize("how", ["deleted", "terminating"])
async def test_members_of_a_pod_group_that_goes_stay_pending_until_it_is_back(how: str) -> None:
    FailWhileBroken.broken = True
    h = harness_with_slow_members()
    slow = make_pod("g-2").req(cpu="1").label(LABEL, "g").label("slow", "yes").obj()
    group = pod_group("g", 3)
    h.apply(*nodes(1), group, *members("g", 2), slow)
    fwk = h.sched.profiles["kubesched"].framework
    keys = ["default/g-0", "default/g-1", "default/g-2"]
    async with running(h):
        await h.wait_for(lambda: all(failed_messages(h, k) for k in keys))
        assert h.sched.cache.pod_count() == 0 and not fwk.waiting_pods
        if how == "deleted":
            h.cluster.delete("PodGroup", "default/g")
        else:
            h.apply(terminating(group))
        FailWhileBroken.broken = False  # the gang would fit now, but its group is gone
        # The members were backing off when it went: they passed PreEnqueue as they
        # entered backoffQ, and are not asked again as they leave it (kube-scheduler
        # 1.37), so their next attempt's PreFilter says the group is gone.
        await h.wait_for(lambda: all(said(h, k, GONE) for k in keys), within=60)
        await h.wait_for(lambda: not h.sched._tasks)
        dump = cache_dump(h.sched)
        assert h.cluster.bindings == []
        assert dump["assumed"] == []
        pending = {p["pod"]: p for p in dump["pending"]}
        assert set(pending) == set(keys)
        assert all(pending[k]["reason"] for k in pending)
        assert consistent(h) == []
        # The group back (a new spec: a terminating group's metadata-only change would
        # not requeue them; on a cluster it is a new object): the gang is tried again.
        h.apply(pod_group("g", 2))
        await h.wait_for(lambda: bound(h, keys) == 3, within=120)
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
