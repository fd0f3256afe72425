"""The scheduling loop on the in-memory cluster, in virtual time (looptime)."""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

import pytest

from kubesched.api.profile import PluginRef, Plugins, PluginSet, ProfileSpec
from kubesched.framework.cluster_port import ClusterError, NotFound
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.registry import Registry
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from kubesched.plugins import in_tree_registry
from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running

pytestmark = pytest.mark.looptime


class GatePermit:
    """Holds pods labelled ``hold=yes`` at Permit for ``timeout`` seconds."""

    name = "TestPermit"

    def __init__(self, timeout: float) -> None:
        self.timeout = timeout
        self.unreserved: list[str] = []

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.unreserved.append(pod.key)

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        if pod.labels.get("hold") == "yes":
            return Status.wait("held"), self.timeout
        return None, 0.0


def permit_harness(timeout: float) -> tuple[Harness, GatePermit]:
    plugin = GatePermit(timeout)
    registry: Registry = in_tree_registry()
    registry.register("TestPermit", lambda args, handle: plugin)
    enabled = PluginSet(enabled=[PluginRef(name="TestPermit")])
    spec = ProfileSpec(plugins=Plugins(permit=enabled, reserve=enabled))
    return Harness(profiles=[spec], registry=registry), plugin


async def test_pods_are_bound_with_a_scheduled_event() -> None:
    h = Harness()
    h.apply(make_node("n1").obj(), make_pod("web").req(cpu="1").obj())
    async with running(h):
        await h.wait_for(lambda: h.node_of("default/web") == "n1")
        await h.wait_for(lambda: "Scheduled" in h.reasons("default/web"))
    ev = h.cluster.events_for("default/web")[-1]
    assert ev.message == "Successfully assigned default/web to n1"
    assert ev.reporting_controller == "kubesched"
    assert h.cluster.bindings == [("default/web", "n1")]


async def test_unschedulable_pod_gets_condition_and_event_then_binds_when_a_node_is_added() -> None:
    h = Harness()
    h.apply(make_node("small").alloc(cpu="1", memory="1Gi").obj())
    h.apply(make_pod("big").req(cpu="2").obj())
    async with running(h):
        await h.wait_for(lambda: h.cluster.condition("default/big", "PodScheduled") is not None)
        cond = h.cluster.condition("default/big", "PodScheduled")
        assert cond is not None
        assert cond["status"] == "False"
        assert cond["reason"] == "Unschedulable"
        assert cond["message"] == (
            "0/1 nodes are available: 1 Insufficient cpu. preemption: 0/1 nodes are"
            " available: 1 Preemption is not helpful for scheduling."
        )
        assert "FailedScheduling" in h.reasons("default/big")
        loop = asyncio.get_running_loop()
        added_at = loop.time()
        h.apply(make_node("large").alloc(cpu="8", memory="16Gi").obj())
        bound_at = await h.wait_for(lambda: h.node_of("default/big") == "large")
    # Requeued by the node-add event (after its short backoff), not by the 5-minute flush.
    assert bound_at - added_at < 2.0


async def test_pod_waits_at_permit_until_allowed() -> None:
    h, plugin = permit_harness(timeout=60)
    h.apply(make_node("n1").obj(), make_pod("w").label("hold", "yes").obj())
    async with running(h):
        fwk = h.sched.profiles["kubesched"].framework
        await h.wait_for(lambda: bool(fwk.iterate_waiting_pods()))
        await asyncio.sleep(5)
        assert h.node_of("default/w") is None, "must not bind while waiting at permit"
        (wp,) = fwk.iterate_waiting_pods()
        assert wp.pending_plugins() == ["TestPermit"]
        wp.allow("TestPermit")
        await h.wait_for(lambda: h.node_of("default/w") == "n1")
    assert plugin.unreserved == []


async def test_permit_timeout_rejects_unreserves_and_requeues() -> None:
    h, plugin = permit_harness(timeout=3)
    h.apply(make_node("n1").obj(), make_pod("w").label("hold", "yes").obj())
    async with running(h):
        fwk = h.sched.profiles["kubesched"].framework
        start = await h.wait_for(lambda: bool(fwk.iterate_waiting_pods()))
        rejected = await h.wait_for(lambda: plugin.unreserved == ["default/w"])
        assert 2.9 <= rejected - start <= 3.2
        # The resources are free again: the cache no longer holds the pod on n1.
        info = h.sched.cache.node_info("n1")
        assert info is not None and info.pods == []
        await h.wait_for(lambda: h.cluster.condition("default/w", "PodScheduled") is not None)
        cond = h.cluster.condition("default/w", "PodScheduled")
        assert cond is not None and "timeout" in cond["message"]
        assert h.node_of("default/w") is None
        # A cluster event brings it back for another attempt (after its backoff).
        h.apply(make_node("n2").obj())
        await h.wait_for(lambda: bool(fwk.iterate_waiting_pods()))


@pytest.mark.parametrize("pop_from_backoff", [True, False])
async def test_a_rejected_pod_an_event_helps_is_tried_at_once_if_nothing_else_waits(
    pop_from_backoff: bool,
) -> None:
    # kube-scheduler 1.37 (SchedulerPopFromBackoffQ, on by default): the node added sends
    # the pod to backoffQ, and with activeQ empty it is popped from there at once;
    # without the feature it waits out its 1-s backoff.
    h = Harness(pop_from_backoff=pop_from_backoff)
    h.apply(make_node("small").alloc(cpu="1", memory="4Gi").obj())
    h.apply(make_pod("p").req(cpu="2").obj())
    async with running(h):
        failed_at = await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/p"))
        h.apply(make_node("big").alloc(cpu="4", memory="8Gi").obj())
        bound_at = await h.wait_for(lambda: h.node_of("default/p") == "big")
    waited = bound_at - failed_at
    assert waited < 0.1 if pop_from_backoff else 0.9 < waited < 1.1


async def test_failed_bind_forgets_the_assumed_pod_and_retries_with_backoff() -> None:
    h = Harness()
    h.apply(make_node("n1").alloc(cpu="1", memory="4Gi").obj())
    h.cluster.fail_next("bind", ClusterError("apiserver said 500"), times=2)
    h.apply(make_pod("p").req(cpu="1").obj())
    attempts: list[float] = []
    original = h.cluster.bind

    async def counting_bind(pod: Pod, node: str) -> None:
        attempts.append(asyncio.get_running_loop().time())
        await original(pod, node)

    h.cluster.bind = counting_bind  # type: ignore[method-assign,assignment]
    async with running(h):
        await h.wait_for(lambda: h.node_of("default/p") == "n1", within=60)
    assert len(attempts) == 3
    gaps = [round(b - a, 1) for a, b in itertools.pairwise(attempts)]
    # 1 s, then 2 s, each expiry rounded down to its whole second and flushed as the
    # next begins (kube-scheduler 1.37): failing on whole seconds of virtual time, each
    # waits a second more
    assert gaps == [2.0, 3.0], "backoff doubles from 1 s"
    assert h.cluster.bindings == [("default/p", "n1")], "bound exactly once"
    info = h.sched.cache.node_info("n1")
    assert info is not None and [p.key for p in info.pods] == ["default/p"]
    errors = [e for e in h.cluster.events_for("default/p") if e.reason == "FailedScheduling"]
    assert errors and "apiserver said 500" in errors[0].message


async def test_pod_deleted_before_bind_is_forgotten_without_requeue() -> None:
    h = Harness()
    h.apply(make_node("n1").obj())
    h.cluster.fail_next("bind", NotFound("pods 'default/gone' not found"))
    h.apply(make_pod("gone").req(cpu="1").obj())
    async with running(h):
        await h.wait_for(lambda: h.sched.stats.outcomes == {} and not h.sched._tasks)
        h.cluster.delete("Pod", "default/gone")
        await asyncio.sleep(30)
    info = h.sched.cache.node_info("n1")
    assert info is None or info.pods == []
    q = h.sched.queues.queue("kubesched")
    assert q is not None and q.get(make_pod("gone").pod().uid) is None
    assert h.cluster.bindings == []


async def test_pods_of_other_schedulers_are_left_alone_but_count_as_load() -> None:
    h = Harness()
    other: dict[str, Any] = make_pod("theirs").scheduler("default-scheduler").req(cpu="3").obj()
    h.apply(make_node("n1").alloc(cpu="4", memory="8Gi").obj(), other)
    h.apply(make_pod("bound-elsewhere").scheduler("other").req(cpu="3").node("n1").obj())
    h.apply(make_pod("ours").req(cpu="2").obj())
    async with running(h):
        await h.wait_for(lambda: h.cluster.condition("default/ours", "PodScheduled") is not None)
    assert h.node_of("default/theirs") is None
    cond = h.cluster.condition("default/ours", "PodScheduled")
    assert cond is not None
    assert cond["message"].startswith("0/1 nodes are available: 1 Insufficient cpu.")


async def test_malformed_pod_is_reported_and_the_loop_keeps_scheduling() -> None:
    h = Harness()
    bad = make_pod("bad").obj()
    bad["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "lots"}}
    h.apply(make_node("n1").obj(), bad, make_pod("good").obj())
    async with running(h):
        await h.wait_for(lambda: h.node_of("default/good") == "n1")
    assert len(h.bad) == 1
    assert "Pod default/bad" in h.bad[0] and "spec.containers[0].resources.requests.cpu" in h.bad[0]


async def test_a_victim_waiting_at_permit_fails_with_kubes_preemption_error() -> None:
    # kube-scheduler 1.37 stops a preempted pod waiting at Permit with an error
    # (waitingPod.Preempt), not a rejection: its binding cycle fails with "waiting on
    # permit for pod: preempted" (reason SchedulerError), and the preemptor binds.
    h, plugin = permit_harness(timeout=60)
    h.apply(make_node("n1").alloc(cpu="2", memory="4Gi").obj())
    h.apply(make_pod("w").label("hold", "yes").req(cpu="2").obj())
    async with running(h):
        fwk = h.sched.profiles["kubesched"].framework
        await h.wait_for(lambda: bool(fwk.iterate_waiting_pods()))
        h.apply(make_pod("high").priority(100).req(cpu="2").obj())
        await h.wait_for(lambda: h.node_of("default/high") == "n1")
    failed = [e for e in h.cluster.events_for("default/w") if e.reason == "FailedScheduling"]
    assert failed and failed[0].message == "waiting on permit for pod: preempted"
    preempted = [e for e in h.cluster.events_for("default/w") if e.reason == "Preempted"]
    assert [e.message for e in preempted] == [
        f"Preempted by pod {h.cluster.pod('default/high')['metadata']['uid']} on node n1 "  # type: ignore[index]
        "(in kube-scheduler memory)."
    ]
    assert plugin.unreserved[:1] == ["default/w"]
    # preempted once, in memory: the preemptor's next cycle found it gone from the node
    # (not still there and no longer waiting, which once had it deleted through the API)
    assert h.cluster.pod("default/w") is not None
    assert h.node_of("default/w") is None


async def test_a_pod_waiting_at_permit_is_nominated_to_its_node_until_bound() -> None:
    # kube-scheduler 1.37's NominatedNodeNameForExpectation (beta, on): the cluster
    # autoscaler sees a pod held at Permit (or with PreBind work) is about to land on its
    # node; the API server clears the nomination at the bind. A pod with neither is
    # bound without it.
    h, _ = permit_harness(timeout=60)
    h.apply(make_node("n1").obj(), make_pod("w").label("hold", "yes").obj())
    nominations: list[tuple[str, str | None]] = []
    patch = h.cluster.patch_pod_status

    async def recording(pod: Pod, **kw: Any) -> None:
        nominations.append((pod.key, kw.get("nominated_node_name")))
        await patch(pod, **kw)

    h.cluster.patch_pod_status = recording  # type: ignore[method-assign]
    async with running(h):
        fwk = h.sched.profiles["kubesched"].framework
        await h.wait_for(lambda: bool(fwk.iterate_waiting_pods()))
        await h.wait_for(lambda: nominations == [("default/w", "n1")])
        status = (h.cluster.pod("default/w") or {}).get("status") or {}
        assert status.get("nominatedNodeName") == "n1"
        assert h.node_of("default/w") is None
        (wp,) = fwk.iterate_waiting_pods()
        wp.allow("TestPermit")
        await h.wait_for(lambda: h.node_of("default/w") == "n1")
        h.apply(make_pod("plain").obj())
        await h.wait_for(lambda: h.node_of("default/plain") == "n1")
    status = (h.cluster.pod("default/w") or {}).get("status") or {}
    assert "nominatedNodeName" not in status
    assert nominations == [("default/w", "n1")]


async def test_a_pre_bind_pre_flight_error_lets_go_of_a_pod_held_at_permit() -> None:
    # kube's binding cycle fails with the PreBindPreFlight error; the pod leaves Permit
    # with it (nothing is left waiting for a timeout that no one awaits)
    h, _ = permit_harness(timeout=60)
    h.apply(make_node("n1").obj())
    async with running(h):
        fwk = h.sched.profiles["kubesched"].framework
        error = Status.as_error('running PreBindPreFlight "X": no luck', plugin="X")
        fwk.run_pre_bind_pre_flights = lambda *_: error  # type: ignore[method-assign]
        h.apply(make_pod("w").label("hold", "yes").obj())
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/w"))
        await h.wait_for(lambda: not fwk.iterate_waiting_pods() and not fwk.waiting_pods)
        assert h.node_of("default/w") is None


class SlowPreBind:
    """PreBind of pods labelled ``slow=yes`` takes 5 s (a volume or claim write)."""

    name = "TestPreBind"

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        if pod.labels.get("slow") == "yes":
            await asyncio.sleep(5)
        return None


async def test_a_victim_in_prebind_is_cancelled_in_memory_not_deleted() -> None:
    # kube-scheduler's executor cancels a victim in PreBind (CancelPod) instead of deleting
    # it: the pod is not bound, fails with "preempted by DefaultPreemption", and stays
    registry: Registry = in_tree_registry()
    registry.register("TestPreBind", lambda args, handle: SlowPreBind())
    spec = ProfileSpec(plugins=Plugins(pre_bind=PluginSet(enabled=[PluginRef(name="TestPreBind")])))
    h = Harness(profiles=[spec], registry=registry)
    h.apply(make_node("n1").alloc(cpu="2", memory="4Gi").obj())
    h.apply(make_pod("low").label("slow", "yes").req(cpu="2").obj())
    async with running(h):
        fwk = h.sched.profiles["kubesched"].framework
        await h.wait_for(lambda: bool(fwk.pods_in_pre_bind))
        h.apply(make_pod("high").priority(100).req(cpu="2").obj())
        await h.wait_for(lambda: h.node_of("default/high") == "n1", within=60)
    assert h.cluster.pod("default/low") is not None, "a victim in PreBind must not be deleted"
    assert h.node_of("default/low") is None
    failed = [e for e in h.cluster.events_for("default/low") if e.reason == "FailedScheduling"]
    assert failed and failed[0].message == "preempted by DefaultPreemption"
    preempted = [e.message for e in h.cluster.events_for("default/low") if e.reason == "Preempted"]
    assert preempted and all(m.endswith("(in kube-scheduler memory).") for m in preempted)
