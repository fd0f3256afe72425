"""A failed attempt clears the pod's nomination (status.nominatedNodeName and the
nominator's hold on the node), as kube-scheduler 1.37's clearNominatedNode does for
every failure except one after PostFilter ran: there its result decides, and no
result leaves the nomination as it is. A rejection at Reserve or Permit is reported as
kube reports it, and a status patch that changes nothing is not written."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesched.api.profile import PluginRef, Plugins, PluginSet, ProfileSpec
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from kubesched.plugins import in_tree_registry
from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running

pytestmark = pytest.mark.looptime


class Refuse:
    """Permit says no to pods labelled ``refuse``; Filter fails (an error) on ``broken``."""

    name = "Refuse"

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        if pod.labels.get("refuse"):
            return Status.unschedulable("refused at Permit"), 0.0
        return None, 0.0

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if pod.labels.get("broken"):
            raise RuntimeError("filter broke")
        return None


def harness(**plugins: PluginSet) -> Harness:
    registry = in_tree_registry()
    registry.register(Refuse.name, lambda args, handle: Refuse())
    ref = PluginSet(enabled=[PluginRef(name=Refuse.name)])
    spec = ProfileSpec(plugins=Plugins(permit=ref, filter=ref, **plugins))
    h = Harness(profiles=[spec], registry=registry)
    h.apply(make_node("n1").alloc(cpu="2", memory="4Gi").obj())
    return h


def nominated(h: Harness, name: str) -> Any:
    obj = h.cluster.get("Pod", "default", name)
    assert obj is not None
    return (obj.get("status") or {}).get("nominatedNodeName")


def uid(h: Harness, name: str) -> str:
    obj = h.cluster.get("Pod", "default", name)
    assert obj is not None
    return str(obj["metadata"]["uid"])


async def tried(h: Harness, name: str) -> None:
    await h.wait_for(lambda: bool(h.reasons(f"default/{name}")))


@pytest.mark.parametrize(
    ("pod", "why"),
    [
        (make_pod("p").label("refuse", "yes"), "rejected at Permit"),
        (make_pod("p").label("broken", "yes"), "a Filter error"),
        (make_pod("p").req(cpu="3"), "no fit, with DefaultPreemption finding no victims"),
    ],
)
async def test_a_failed_attempt_clears_the_nomination(pod: Any, why: str) -> None:
    h = harness()
    h.apply(pod.nominated("n1").obj())
    async with running(h):
        await tried(h, "p")
        await h.wait_for(lambda: nominated(h, "p") is None)
    assert h.sched.nominator.nominated_node(uid(h, "p")) == "", why  # n1 held no more


async def test_no_fit_without_post_filter_plugins_clears_the_nomination() -> None:
    h = harness(post_filter=PluginSet(disabled=[PluginRef(name="*")]))
    h.apply(make_pod("p").req(cpu="3").nominated("n1").obj())
    async with running(h):
        await tried(h, "p")
        await h.wait_for(lambda: nominated(h, "p") is None)


async def test_post_filter_without_a_result_leaves_the_nomination() -> None:
    # preemptionPolicy Never: DefaultPreemption declines with no result
    h = harness()
    h.apply(make_pod("p").req(cpu="3").preemption_policy("Never").nominated("n1").obj())
    async with running(h):
        await tried(h, "p")
        await h.wait_for(lambda: len(h.reasons("default/p")) >= 1)
    assert nominated(h, "p") == "n1"
    assert h.sched.nominator.nominated_node(uid(h, "p")) == "n1"


async def test_a_permit_rejection_is_kubes_fit_error_over_one_node_and_does_not_spin() -> None:
    h = harness()
    h.apply(make_pod("p").label("refuse", "yes").obj())
    async with running(h):
        await tried(h, "p")
        await asyncio.sleep(60)
    events = h.cluster.events_for("default/p")
    assert {e.message for e in events} == {"0/1 nodes are available: 1 refused at Permit."}
    # the first failure's condition is the pod's own update, which the plugin (no
    # queueing hints: every event) takes as a reason to try again; the second failure
    # writes nothing new, so nothing moves the pod again before its unschedulable timeout
    assert len(events) == 2
    assert h.sched.stats.unschedulable == 2


class Hold:
    """Permit keeps pods labelled ``hold`` waiting: assumed, their binding not started."""

    name = "Hold"

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        if pod.labels.get("hold"):
            return Status.wait("held"), 600.0
        return None, 0.0


def two_nodes_holding() -> Harness:
    registry = in_tree_registry()
    registry.register(Hold.name, lambda args, handle: Hold())
    spec = ProfileSpec(plugins=Plugins(permit=PluginSet(enabled=[PluginRef(name=Hold.name)])))
    h = Harness(profiles=[spec], registry=registry)
    for name in ("n1", "n2"):
        h.apply(make_node(name).alloc(cpu="2", memory="4Gi").label("host", name).obj())
    return h


@pytest.mark.parametrize("late_patch", [False, True])
async def test_an_assumed_pod_no_longer_holds_its_nominated_node(late_patch: bool) -> None:
    # "high" was nominated to n2 by an earlier preemption but now goes to n1 (its node
    # selector), where it waits at Permit. kube-scheduler drops a pod's nomination when
    # it assumes the pod; had n2 stayed held for "high", "low" would find no room on n2
    # and, with no event to move it, stay pending for minutes (it did on a real API
    # server: two preemptors, each nominated, the first binding on the other's node).
    h = two_nodes_holding()
    high = make_pod("high").priority(100).req(cpu="2").label("hold", "yes")
    h.apply(high.node_selector(host="n1").nominated("n2").obj())
    async with running(h):
        await h.wait_for(lambda: h.sched.cache.is_assumed(uid(h, "high")))
        assert h.sched.nominator.nominated_node(uid(h, "high")) == ""
        if late_patch:
            # the status patch of the old nomination comes back while "high" waits
            obj = h.cluster.get("Pod", "default", "high")
            assert obj is not None
            await h.cluster.patch_pod_status(Pod(obj), nominated_node_name="n2")
            await asyncio.sleep(0.1)
            assert nominated(h, "high") == "n2"
            assert h.sched.nominator.nominated_node(uid(h, "high")) == ""
        h.apply(make_pod("low").priority(10).req(cpu="2").obj())
        await h.wait_for(lambda: h.node_of("default/low") is not None)
    assert h.node_of("default/low") == "n2"
