"""Gang scheduling (Coscheduling + PodGroup) on the in-memory cluster, in virtual time."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable, Sequence
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
    want = (
        'pod group "default/big": 2/3 members fit; 1 pod: '
        "0/2 nodes are available: 2 Insufficient cpu., "
        # Gang preemption's outcome, appended as kube-scheduler 1.37 appends it.
        "pod group preemption: No preemption victims found for incoming preemptor"
    )
    for k in keys:
        # Every member says the gang's reason, the fitting ones too (cluster-autoscaler).
        assert h.cluster.events_for(k)[-1].message == want
        (cond,) = [
            c
            for c in h.cluster.pod(k)["status"]["conditions"]  # type: ignore[index]
            if c["type"] == "PodScheduled"
        ]
        assert (cond["status"], cond["reason"], cond["message"]) == ("False", "Unschedulable", want)
    report = coscheduling(h).report("default", "big")
    assert report is not None and report.blocked == want


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


class FailWhileBroken:
    """A PreFilter that errors for pods labelled ``slow=yes`` while ``broken``."""

    name = "FailWhileBroken"
    broken = True

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        if pod.labels.get("slow") == "yes" and FailWhileBroken.broken:
            return None, Status.as_error("not yet")
        return None, None

    def pre_filter_extensions(self) -> None:
        return None


def harness_with_slow_members() -> Harness:
    registry: Registry = in_tree_registry()
    registry.register("FailWhileBroken", lambda args, handle: FailWhileBroken())
    spec = ProfileSpec(
        plugins=Plugins(pre_filter=PluginSet(enabled=[PluginRef(name="FailWhileBroken")]))
    )
    return Harness(profiles=[spec], registry=registry)


async def test_a_member_error_reverts_the_whole_gang_and_it_retries_as_a_group() -> None:
    FailWhileBroken.broken = True
    h = harness_with_slow_members()
    slow = make_pod("g-2").req(cpu="1").label(LABEL, "g").label("slow", "yes").obj()
    h.apply(*nodes(1), pod_group("g", 3), *members("g", 2), slow)
    keys = ["default/g-0", "default/g-1", "default/g-2"]
    async with running(h):
        await h.wait_for(lambda: all("FailedScheduling" in h.reasons(k) for k in keys))
        # Nothing reserved, nothing waiting at Permit: the node stays free meanwhile.
        assert h.sched.cache.pod_count() == 0
        assert not h.sched.profiles["kubesched"].framework.waiting_pods
        # worded as kube-scheduler's framework words a PreFilter plugin's error
        assert h.cluster.events_for("default/g-0")[-1].message == (
            'running PreFilter plugin "FailWhileBroken": not yet'
        )
        FailWhileBroken.broken = False
        # Errors back off (1 s doubling): the three come back together and bind.
        await h.wait_for(lambda: bound(h, keys) == 3, within=30)
    attempts = {h.sched.stats.outcomes[h.cluster.pod(k)["metadata"]["uid"]].attempts for k in keys}  # type: ignore[index]
    assert len(attempts) == 1, "one attempt count for the whole gang"


async def test_a_running_gang_below_its_minimum_gathers_its_replacements_as_a_group() -> None:
    h = Harness()
    h.apply(*nodes(2), pod_group("g", 3), *members("g", 3))
    keys = ["default/g-0", "default/g-1", "default/g-2"]
    async with running(h):
        await h.wait_for(lambda: bound(h, keys) == 3)
        h.cluster.delete("Pod", "default/g-0")
        h.cluster.delete("Pod", "default/g-1")
        await h.wait_for(lambda: h.sched.cache.pod_count() == 1)
        # One replacement is not enough for the minimum (1 + 1 < 3): it waits...
        h.apply(make_pod("g-3").req(cpu="1").label(LABEL, "g").obj())
        q = h.sched.queues.queue("kubesched")
        assert q is not None
        uid = h.cluster.pod("default/g-3")["metadata"]["uid"]  # type: ignore[index]
        await h.wait_for(lambda: (qpi := q.get(uid)) is not None and qpi.gated)
        assert q.get(uid).message == (  # type: ignore[union-attr]
            'pod group "default/g" needs 3 member pods; waiting for the rest to be created'
        )
        assert h.node_of("default/g-3") is None
        # ...and the second one completes the group: both are placed together.
        h.apply(make_pod("g-4").req(cpu="1").label(LABEL, "g").obj())
        await h.wait_for(lambda: bound(h, ["default/g-3", "default/g-4"]) == 2)


async def test_a_least_allocated_profile_spreads_members_over_nodes() -> None:
    h = Harness()
    h.apply(*nodes(3), pod_group("g", 3), *members("g", 3))
    keys = [f"default/g-{i}" for i in range(3)]
    async with running(h):
        await h.wait_for(lambda: bound(h, keys) == 3)
    assert sorted(h.node_of(k) or "" for k in keys) == ["n1", "n2", "n3"]


def most_allocated() -> ProfileSpec:
    return ProfileSpec.model_validate(
        {
            "pluginConfig": [
                {
                    "name": "NodeResourcesFit",
                    "args": {"scoringStrategy": {"type": "MostAllocated"}},
                }
            ]
        }
    )


async def test_a_most_allocated_profile_packs_members_on_one_node() -> None:
    h = Harness(profiles=[most_allocated()])
    h.apply(*nodes(3), pod_group("g", 3), *members("g", 3))
    keys = [f"default/g-{i}" for i in range(3)]
    async with running(h):
        await h.wait_for(lambda: bound(h, keys) == 3)
    assert len({h.node_of(k) for k in keys}) == 1


async def test_anti_affinity_among_members_is_honoured_or_nothing_binds() -> None:
    h = Harness(profiles=[most_allocated()])
    term = {
        "labelSelector": {"matchLabels": {LABEL: "g"}},
        "topologyKey": "kubernetes.io/hostname",
    }
    pods = members("g", 3)
    for p in pods:
        p["spec"]["affinity"] = {
            "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
        }
    h.apply(*nodes(2), pod_group("g", 3), *pods)
    keys = [f"default/g-{i}" for i in range(3)]
    async with running(h):
        await h.wait_for(lambda: all("FailedScheduling" in h.reasons(k) for k in keys))
        assert h.cluster.bindings == []
        assert h.sched.cache.pod_count() == 0
        msg = h.cluster.events_for("default/g-0")[-1].message
        assert msg.startswith('pod group "default/g": 2/3 members fit; 1 pod: 0/2 nodes')
        h.apply(make_node("n3").alloc(cpu="4", memory="32Gi").obj())
        await h.wait_for(lambda: bound(h, keys) == 3, within=60)
    assert len({h.node_of(k) for k in keys}) == 3


async def test_spare_members_are_placed_if_they_fit_and_never_fail_the_gang() -> None:
    h = Harness()
    h.apply(*nodes(1), pod_group("g", 2), *members("g", 5, cpu="1.5"))
    keys = [f"default/g-{i}" for i in range(5)]
    async with running(h):
        await h.wait_for(lambda: bound(h, keys) == 2)
        await h.wait_for(lambda: all(h.reasons(k) for k in keys))
        spare = [k for k in keys if not h.node_of(k)]
        assert len(spare) == 3
        assert all("FailedScheduling" in h.reasons(k) for k in spare)


async def test_group_attempts_are_counted_as_kube_scheduler_does() -> None:
    h = Harness()
    h.apply(*nodes(2), pod_group("ok", 2), *members("ok", 2))
    h.apply(pod_group("big", 3), *members("big", 3, cpu="3"))
    async with running(h):
        await h.wait_for(lambda: bound(h, ["default/ok-0", "default/ok-1"]) == 2)
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/big-0"))
    reg = h.sched.metrics.registry
    get = reg.get_sample_value
    labels = {"profile": "kubesched"}
    assert get("scheduler_podgroup_schedule_attempts_total", {"result": "scheduled", **labels}) == 1
    failed = get(
        "scheduler_podgroup_schedule_attempts_total", {"result": "unschedulable", **labels}
    )
    assert failed is not None and failed >= 1
    count = get(
        "scheduler_podgroup_scheduling_attempt_duration_seconds_count",
        {"result": "scheduled", **labels},
    )
    assert count == 1


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


async def test_a_failing_gang_backs_off_as_a_group_doubling_to_the_cap() -> None:
    FailWhileBroken.broken = True
    h = harness_with_slow_members()
    slow = make_pod("g-2").req(cpu="1").label(LABEL, "g").label("slow", "yes").obj()
    h.apply(*nodes(1), pod_group("g", 3), *members("g", 2), slow)
    keys = ["default/g-0", "default/g-1", "default/g-2"]

    def failures(k: str) -> int:
        return h.reasons(k).count("FailedScheduling")

    def failed_together(n: int) -> Callable[[], bool]:
        return lambda: all(failures(k) == n for k in keys)

    times = []
    async with running(h):
        for n in range(1, 8):
            times.append(await h.wait_for(failed_together(n), within=60))
        FailWhileBroken.broken = False
    gaps = [round(b - a) for a, b in itertools.pairwise(times)]
    # Each attempt tries the three together, and they back off as one pod group of
    # three does in kube-scheduler 1.37: 1 s doubling, capped at 10 s times the square
    # root of 3 (17.3 s). Each expiry is rounded down to its whole second and flushed as
    # the next begins: the attempts fail on whole seconds of virtual time, so each wait
    # is a second longer.
    assert gaps == [2, 3, 5, 9, 17, 18]


async def test_a_gang_that_does_not_fit_waits_for_the_cluster_to_change() -> None:
    # Each failed group cycle writes PodScheduled=False on the members; that status update
    # comes back as a pod update, which must not re-release the gang (PreEnqueue
    # activating every member at once would retry it at the same instant forever). An
    # unschedulable gang waits, as an unschedulable pod does, for an event that may help.
    h = Harness()
    h.apply(*nodes(1, cpu="2"), pod_group("g", 3), *members("g", 3))
    keys = ["default/g-0", "default/g-1", "default/g-2"]
    loop = asyncio.get_running_loop()
    async with running(h):
        await h.wait_for(lambda: all("FailedScheduling" in h.reasons(k) for k in keys))
        start = loop.time()
        await asyncio.sleep(40)
        assert loop.time() - start >= 40, "virtual time stood still: something spins"
        assert [h.reasons(k).count("FailedScheduling") for k in keys] == [1, 1, 1]
        assert h.cluster.bindings == []
        h.apply(make_node("node-big").alloc(cpu="8", memory="32Gi").obj())
        await h.wait_for(lambda: bound(h, keys) == 3)


def status_nomination(h: Harness, key: str) -> Any:
    return (h.cluster.pod(key) or {}).get("status", {}).get("nominatedNodeName")


async def test_a_rejected_gang_clears_the_nominations_of_the_members_that_fitted() -> None:
    # kube-scheduler 1.37 (submitPodGroupAlgorithmResult): a group rejected with no
    # preemption to wait on clears the nomination of each member that found a node in
    # the cycle, and a member that found none keeps its own. Both were nominated by an
    # earlier preemption; "keeper" outranks the gang, so no preemption helps now.
    h = Harness()
    h.apply(*nodes(2))
    h.apply(make_pod("keeper").priority(100).req(cpu="2").node("n2").obj())
    h.apply(pod_group("g", 2))
    h.apply(make_pod("g-0").req(cpu="3").label(LABEL, "g").nominated("n1").obj())
    h.apply(make_pod("g-1").req(cpu="5").label(LABEL, "g").nominated("n2").obj())
    keys = ["default/g-0", "default/g-1"]
    async with running(h):
        await h.wait_for(lambda: all("FailedScheduling" in h.reasons(k) for k in keys))
        await h.wait_for(lambda: status_nomination(h, "default/g-0") is None)
        nominator = h.sched.nominator
        uids = {k: h.cluster.pod(k)["metadata"]["uid"] for k in keys}  # type: ignore[index]
        assert nominator.nominated_node(uids["default/g-0"]) == ""  # g-0 fitted n1
        assert status_nomination(h, "default/g-1") == "n2"  # g-1 fitted nowhere
        assert nominator.nominated_node(uids["default/g-1"]) == "n2"
    assert bound(h, keys) == 0
