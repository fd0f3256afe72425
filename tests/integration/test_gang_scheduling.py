"""Gang scheduling (Coscheduling + PodGroup) on the in-memory cluster, in virtual time."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from kubesched.api.profile import PluginRef, Plugins, PluginSet, ProfileSpec
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import PreFilterResult
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.registry import Registry
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from kubesched.plugins import in_tree_registry
from kubesched.plugins.coscheduling import Coscheduling
from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running

pytestmark = pytest.mark.looptime

LABEL = "kubesched.dev/pod-group"


def pod_group(name: str, min_member: int, ns: str = "default", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "kubesched.dev/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"minMember": min_member, **spec},
    }


def members(group: str, n: int, cpu: str = "1", **labels: str) -> list[dict[str, Any]]:
    return [
        make_pod(f"{group}-{i}").req(cpu=cpu).label(LABEL, group).labels(**labels).obj()
        for i in range(n)
    ]


def nodes(n: int, cpu: str = "4") -> list[dict[str, Any]]:
    return [make_node(f"n{i}").alloc(cpu=cpu, memory="32Gi").obj() for i in range(1, n + 1)]


def bound(h: Harness, keys: Sequence[str]) -> int:
    return sum(1 for k in keys if h.node_of(k))


def coscheduling(h: Harness) -> Coscheduling:
    plugin = h.sched.profiles["kubesched"].framework.chain.permit[-1]
    assert isinstance(plugin, Coscheduling)
    return plugin


async def test_a_gang_that_fits_is_bound_completely() -> None:
    h = Harness()
    pods = members("train", 4, cpu="2")
    h.apply(*nodes(2), pod_group("train", 4), *pods)
    keys = [f"default/train-{i}" for i in range(4)]
    async with running(h):
        await h.wait_for(lambda: bound(h, keys) == 4)
    assert all("Scheduled" in h.reasons(k) for k in keys)


async def test_a_gang_that_cannot_fit_binds_nothing_and_says_why() -> None:
    h = Harness()
    h.apply(*nodes(2), pod_group("big", 3), *members("big", 3, cpu="3"))
    keys = [f"default/big-{i}" for i in range(3)]
    async with running(h):
        await h.wait_for(lambda: all("FailedScheduling" in h.reasons(k) for k in keys))
        assert bound(h, keys) == 0
        assert h.cluster.bindings == []
    msg = h.cluster.events_for("default/big-0")[-1].message
    assert msg.startswith("0/2 nodes are available: 2/3 members fit; 1 pods: Insufficient cpu.")
    report = coscheduling(h).report("default", "big")
    assert report is not None and report.blocked.startswith("2/3 members fit")


async def test_two_gangs_of_sixty_percent_never_both_partial() -> None:
    h = Harness()
    a, b = members("alpha", 3, cpu="4"), members("beta", 3, cpu="4")
    h.apply(*nodes(5), pod_group("alpha", 3), pod_group("beta", 3), *a, *b)
    ka = [f"default/alpha-{i}" for i in range(3)]
    kb = [f"default/beta-{i}" for i in range(3)]
    async with running(h):
        await h.wait_for(lambda: bound(h, ka) == 3)
        await h.wait_for(lambda: all("FailedScheduling" in h.reasons(k) for k in kb))
        assert bound(h, kb) == 0
        assert h.sched.cache.pod_count() == 3


class FailInRealCycles:
    """A PreFilter that errors for pods labelled ``slow=yes``, except in dry runs."""

    name = "FailInRealCycles"

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        if pod.labels.get("slow") == "yes" and not state.get("Coscheduling/dry-run"):
            return None, Status.as_error("not yet")
        return None, None

    def pre_filter_extensions(self) -> None:
        return None


def harness_with_slow_members() -> Harness:
    registry: Registry = in_tree_registry()
    registry.register("FailInRealCycles", lambda args, handle: FailInRealCycles())
    spec = ProfileSpec(
        plugins=Plugins(pre_filter=PluginSet(enabled=[PluginRef(name="FailInRealCycles")]))
    )
    return Harness(profiles=[spec], registry=registry)


async def test_a_timeout_releases_every_reservation_and_the_group_backs_off() -> None:
    h = harness_with_slow_members()
    slow = make_pod("g-2").req(cpu="1").label(LABEL, "g").label("slow", "yes").obj()
    h.apply(*nodes(1), pod_group("g", 3, scheduleTimeoutSeconds=5), *members("g", 2), slow)
    plugin = coscheduling(h)
    fwk = h.sched.profiles["kubesched"].framework
    async with running(h):
        start = await h.wait_for(lambda: len(fwk.waiting_pods) == 2)
        assert h.sched.cache.node_info("n1") is not None
        assert len(h.sched.cache.node_info("n1").pods) == 2  # type: ignore[union-attr]
        end = await h.wait_for(lambda: not fwk.waiting_pods, within=10)
        assert 4.9 <= end - start <= 5.1
        await h.wait_for(lambda: h.sched.cache.pod_count() == 0)
        assert h.cluster.bindings == []
        events = h.cluster.events_for("default/g-0")
        assert "rejected due to timeout after waiting 5s at plugin Coscheduling" in [
            e.message for e in events
        ]
        report = plugin.report("default", "g")
        assert report is not None and report.timed_out
        assert "timed out" in report.blocked


async def test_a_member_deleted_while_others_wait_does_not_leave_them_stuck() -> None:
    h = harness_with_slow_members()
    slow = make_pod("g-2").req(cpu="1").label(LABEL, "g").label("slow", "yes").obj()
    h.apply(*nodes(1), pod_group("g", 3, scheduleTimeoutSeconds=600), *members("g", 2), slow)
    fwk = h.sched.profiles["kubesched"].framework
    async with running(h):
        t0 = await h.wait_for(lambda: len(fwk.waiting_pods) == 2)
        h.cluster.delete("Pod", "default/g-0")
        t1 = await h.wait_for(lambda: not fwk.waiting_pods and h.sched.cache.pod_count() == 0)
        assert t1 - t0 < 1, "released at once, not at the 600 s timeout"
        assert h.cluster.bindings == []
        # A replacement member completes the gang again; the slow one now passes too.
        h.apply(make_pod("g-3").req(cpu="1").label(LABEL, "g").obj())
        h.apply({**slow, "metadata": {**slow["metadata"], "labels": {LABEL: "g"}}})
        keys = ["default/g-1", "default/g-2", "default/g-3"]
        await h.wait_for(lambda: bound(h, keys) == 3, within=120)


async def test_pods_outside_gangs_are_unaffected() -> None:
    h = Harness()
    h.apply(*nodes(1), pod_group("big", 3), *members("big", 3, cpu="3"))
    h.apply(make_pod("web").req(cpu="1").obj(), make_pod("api").req(cpu="1").obj())
    async with running(h):
        await h.wait_for(lambda: h.node_of("default/web") == "n1")
        await h.wait_for(lambda: h.node_of("default/api") == "n1")


async def test_a_pod_naming_a_missing_pod_group_waits_with_a_message_until_it_exists() -> None:
    h = Harness()
    h.apply(*nodes(1), *members("late", 2))
    keys = ["default/late-0", "default/late-1"]
    q = h.sched.queues.queue("kubesched")
    assert q is not None
    async with running(h):
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/late-0"))
        msg = h.cluster.events_for("default/late-0")[-1].message
        assert msg == 'pod group "default/late" does not exist; waiting for it to be created'
        qpi = q.get(h.cluster.pod("default/late-0")["metadata"]["uid"])  # type: ignore[index]
        assert qpi is not None and qpi.gated and qpi.message == msg
        assert bound(h, keys) == 0
        h.apply(pod_group("late", 2))
        await h.wait_for(lambda: bound(h, keys) == 2)


async def test_members_wait_until_min_member_pods_exist() -> None:
    h = Harness()
    h.apply(*nodes(1), pod_group("g", 3), *members("g", 2))
    async with running(h):
        await h.wait_for(lambda: h.sched.queues.queue("kubesched").pending_counts()["gated"] == 2)  # type: ignore[union-attr]
        assert h.cluster.bindings == []
        h.apply(make_pod("g-9").req(cpu="1").label(LABEL, "g").obj())
        await h.wait_for(lambda: bound(h, ["default/g-0", "default/g-1", "default/g-9"]) == 3)


async def test_scheduler_plugins_label_is_honoured() -> None:
    h = Harness()
    pods = [
        make_pod(f"sp-{i}").req(cpu="3").label("scheduling.x-k8s.io/pod-group", "sp").obj()
        for i in range(3)
    ]
    h.apply(*nodes(2), pod_group("sp", 3), *pods)
    async with running(h):
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/sp-0"))
        assert h.cluster.bindings == []
