"""``kubesched run`` against the real kube-apiserver: binds, events, conditions, preemption.

Each test starts ``run(...)`` in its own event loop (admin kubeconfig, no leader
election), works in its own namespace, and makes nodes of its own with a unique label
(the control plane and its other nodes are shared). The control plane's REST client is
synchronous: it is called through ``asyncio.to_thread`` so the scheduler, which runs in
this loop, is never blocked.
"""

from __future__ import annotations

import asyncio
import uuid

import pytest

from kubesched.operator.run import Runtime
from tests.controlplane import ApiError, ControlPlane
from tests.e2e.cachecheck import assert_cache_matches_api
from tests.e2e.support import JSON, call, condition, events_for, eventually

pytestmark = pytest.mark.timeout(90)


def label() -> dict[str, str]:
    return {"e2e.kubesched.dev/pool": uuid.uuid4().hex[:10]}


def pod_body(
    name: str,
    namespace: str,
    *,
    cpu: str = "100m",
    selector: dict[str, str] | None = None,
    scheduler: str = "kubesched",
    priority_class: str | None = None,
) -> JSON:
    spec: JSON = {
        "schedulerName": scheduler,
        "containers": [
            {
                "name": "pause",
                "image": "registry.k8s.io/pause:3.10",
                "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
            }
        ],
    }
    if selector:
        spec["nodeSelector"] = selector
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace},
        "spec": spec,
    }


def read_pod(cp: ControlPlane, namespace: str, name: str) -> JSON | None:
    try:
        return cp.api.read("v1", "Pod", name, namespace)
    except ApiError as e:
        if e.status == 404:
            return None
        raise


def ensure_priority_class(cp: ControlPlane, name: str, value: int) -> None:
    try:
        cp.api.create(
            {
                "apiVersion": "scheduling.k8s.io/v1",
                "kind": "PriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
        )
    except ApiError as e:
        if e.status != 409:
            raise


async def test_pods_are_bound_with_a_scheduled_event(
    controlplane: ControlPlane, namespace: str, kubesched: Runtime
) -> None:
    cp = controlplane
    pool = label()
    nodes = await call(cp.create_nodes, 2, labels=pool, prefix=f"run-{pool[next(iter(pool))]}-")
    for i in range(3):
        await call(cp.api.create, pod_body(f"web-{i}", namespace, selector=pool))
    for i in range(3):
        node = await call(cp.wait_bound, f"web-{i}", namespace, 30.0)
        assert node in nodes
    evs = await eventually(
        lambda: [e for e in events_for(cp, namespace, "web-0") if e["reason"] == "Scheduled"],
        what="a Scheduled event for web-0",
    )
    (ev,) = evs
    node = (await call(read_pod, cp, namespace, "web-0"))["spec"]["nodeName"]
    assert ev["type"] == "Normal"
    assert ev["action"] == "Binding"
    assert ev["reportingController"] == "kubesched"
    assert ev["reportingInstance"].startswith("kubesched-")
    assert ev["note"] == f"Successfully assigned {namespace}/web-0 to {node}"
    assert ev["regarding"]["kind"] == "Pod"


async def test_unschedulable_pod_is_reported_then_bound_when_a_node_fits(
    controlplane: ControlPlane, namespace: str, kubesched: Runtime
) -> None:
    cp = controlplane
    pool = label()
    await call(cp.api.create, pod_body("waiting", namespace, selector=pool))

    def failed() -> JSON | None:
        pod = read_pod(cp, namespace, "waiting")
        cond = condition(pod or {}, "PodScheduled")
        return cond if cond and cond["status"] == "False" else None

    cond = await eventually(failed, what="PodScheduled=False")
    n = len(kubesched.cluster.objects.get("Node", {}))
    assert cond["reason"] == "Unschedulable"
    assert cond["message"] == (
        f"0/{n} nodes are available: {n} node(s) didn't match Pod's node affinity/selector. "
        f"preemption: 0/{n} nodes are available: "
        f"{n} Preemption is not helpful for scheduling."
    )
    assert cond.get("lastTransitionTime")
    evs = await eventually(
        lambda: [
            e for e in events_for(cp, namespace, "waiting") if e["reason"] == "FailedScheduling"
        ],
        what="a FailedScheduling event",
    )
    assert evs[0]["type"] == "Warning"
    assert evs[0]["note"] == cond["message"]

    (node,) = await call(cp.create_nodes, 1, labels=pool, prefix=f"late-{pool[next(iter(pool))]}-")
    assert await call(cp.wait_bound, "waiting", namespace, 30.0) == node


async def test_preemption_evicts_the_lower_priority_victim(
    controlplane: ControlPlane, namespace: str, kubesched: Runtime
) -> None:
    cp = controlplane
    pool = label()
    await call(ensure_priority_class, cp, "e2e-low", 10)
    await call(ensure_priority_class, cp, "e2e-high", 1000)
    (node,) = await call(
        cp.create_nodes, 1, cpu="1", labels=pool, prefix=f"pre-{pool[next(iter(pool))]}-"
    )
    await call(
        cp.api.create,
        pod_body("victim", namespace, cpu="800m", selector=pool, priority_class="e2e-low"),
    )
    assert await call(cp.wait_bound, "victim", namespace, 30.0) == node
    await call(
        cp.api.create,
        pod_body("bystander", namespace, cpu="100m", selector=pool, priority_class="e2e-high"),
    )
    assert await call(cp.wait_bound, "bystander", namespace, 30.0) == node
    await call(
        cp.api.create,
        pod_body("preemptor", namespace, cpu="800m", selector=pool, priority_class="e2e-high"),
    )

    # With no kubelet, the deleted victim stays Terminating: the condition is observable.
    def evicted() -> JSON | None:
        pod = read_pod(cp, namespace, "victim")
        if pod is None or not pod["metadata"].get("deletionTimestamp"):
            return None
        return pod

    victim = await eventually(evicted, what="the victim's deletion")
    cond = condition(victim, "DisruptionTarget")
    assert cond is not None
    assert (cond["status"], cond["reason"]) == ("True", "PreemptionByScheduler")
    bystander = await call(read_pod, cp, namespace, "bystander")
    assert bystander is not None and not bystander["metadata"].get("deletionTimestamp")
    preemptor = await eventually(
        lambda: (
            (p := read_pod(cp, namespace, "preemptor"))
            and p["status"].get("nominatedNodeName")
            and p
        ),
        what="the preemptor's nomination",
    )
    assert preemptor["status"]["nominatedNodeName"] == node
    evs = await eventually(
        lambda: [e for e in events_for(cp, namespace, "victim") if e["reason"] == "Preempted"],
        what="a Preempted event",
    )
    assert evs[0]["related"]["name"] == "preemptor"

    # The kubelet's part: the victim's containers stop, the pod object goes.
    await call(cp.api.remove, "v1", "Pod", "victim", namespace, grace_period_seconds=0)
    assert await call(cp.wait_bound, "preemptor", namespace, 30.0) == node


async def test_pods_of_other_schedulers_are_left_alone(
    controlplane: ControlPlane, namespace: str, kubesched: Runtime
) -> None:
    cp = controlplane
    pool = label()
    await call(cp.create_nodes, 1, labels=pool, prefix=f"oth-{pool[next(iter(pool))]}-")
    await call(
        cp.api.create, pod_body("theirs", namespace, selector=pool, scheduler="someone-else")
    )
    await call(cp.api.create, pod_body("ours", namespace, selector=pool))
    await call(cp.wait_bound, "ours", namespace, 30.0)
    await asyncio.sleep(1.0)
    theirs = await call(read_pod, cp, namespace, "theirs")
    assert not theirs["spec"].get("nodeName")
    assert condition(theirs, "PodScheduled") is None
    assert await call(events_for, cp, namespace, "theirs") == []
    # ... but it is in our store (it would count once bound)
    assert kubesched.cluster.get("Pod", namespace, "theirs") is not None


async def test_pod_deleted_before_bind_is_forgotten(
    controlplane: ControlPlane, namespace: str, kubesched: Runtime
) -> None:
    cp = controlplane
    pool = label()
    created = await call(cp.api.create, pod_body("gone", namespace, selector=pool))
    uid = created["metadata"]["uid"]
    sched = kubesched.scheduler
    await eventually(lambda: sched.stats.outcomes.get(uid), what="a first scheduling attempt")
    assert uid in sched.unscheduled
    await call(cp.api.remove, "v1", "Pod", "gone", namespace, grace_period_seconds=0)
    await eventually(lambda: uid not in sched.unscheduled, what="the scheduler forgetting the pod")
    assert uid not in sched.stats.outcomes
    assert all(
        qpi.pod.uid != uid for q in sched.queues.queues().values() for qpi, _ in q.pending_pods()
    )
    assert kubesched.cluster.get("Pod", namespace, "gone") is None
    url = f"http://127.0.0.1:{kubesched.port}"
    dump = await call(assert_cache_matches_api, url, cp.api, namespace=namespace, nodes=False)
    assert uid not in {p["uid"] for n in dump["nodes"] for p in n["pods"]}
