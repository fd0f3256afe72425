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
