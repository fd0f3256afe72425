"""Gang scheduling on the real kube-apiserver: PodGroups applied with ``kubectl``.

The CRDs in ``crds/`` are installed with ``kubectl apply`` before ``kubesched run``
starts (Kopf resolves the watched resources once, at start). Each test applies a
PodGroup and a Job-like set of member pods in its own namespace, on nodes of its own
(selected by a unique label), and checks what a user sees: bindings, the PodGroup's
status (``kubectl get kpg``) and the Events on the PodGroup and its pods.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
import yaml

from kubesched.api.profile import PluginRef, Plugins, PluginSet, ProfileSpec
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import PreFilterResult
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from kubesched.operator.run import Runtime
from kubesched.plugins import in_tree_registry
from kubesched.profiles import compile_profile
from tests.controlplane import ControlPlane
from tests.e2e.support import CRDS, JSON, call, eventually

pytestmark = pytest.mark.timeout(90)

LABEL = "kubesched.dev/pod-group"


def pool() -> dict[str, str]:
    return {"e2e.kubesched.dev/pool": uuid.uuid4().hex[:10]}


def pod_group(name: str, min_member: int, **spec: Any) -> JSON:
    return {
        "apiVersion": "kubesched.dev/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {"minMember": min_member, **spec},
    }


def members(
    group: str, n: int, selector: dict[str, str], *, cpu: str = "1", gpu: int = 0
) -> list[JSON]:
    """A Job-like set of pods: same template, named ``<group>-<i>``."""
    resources: JSON = {"requests": {"cpu": cpu, "memory": "64Mi"}}
    if gpu:
        resources["limits"] = {"nvidia.com/gpu": str(gpu)}
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"{group}-{i}", "labels": {LABEL: group, "job": group}},
            "spec": {
                "schedulerName": "kubesched",
                "nodeSelector": selector,
                "containers": [
                    {
                        "name": "worker",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": resources,
                    }
                ],
            },
        }
        for i in range(n)
    ]


def apply(cp: ControlPlane, namespace: str, *objs: JSON) -> None:
    # JSON, not YAML: kubectl reads YAML 1.2, where a generated name like "123e4567"
    # that PyYAML leaves unquoted would become a number.
    doc = {"apiVersion": "v1", "kind": "List", "items": list(objs)}
    out = cp.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc))
    assert out.returncode == 0, out.stderr


async def apply_group_first(
    cp: ControlPlane, kubesched: Runtime, namespace: str, group: JSON, *pods: JSON
) -> None:
    """The PodGroup, then its members once kubesched's cache holds it: it comes by its
    own watch, they by the pods', and a member seen first has a FailedScheduling event
    saying its group does not exist (a test counting FailedScheduling events for another
    reason would count that one)."""
    name = group["metadata"]["name"]
    await call(apply, cp, namespace, group)
    await eventually(
        lambda: kubesched.cluster.get("PodGroup", namespace, name),
        what=f"kubesched seeing PodGroup {name}",
        in_thread=False,
    )
    await call(apply, cp, namespace, *pods)


def read_group(cp: ControlPlane, namespace: str, name: str) -> JSON:
    group: JSON = cp.api.read("kubesched.dev/v1alpha1", "PodGroup", name, namespace)
    return group


def scheduled_condition(group: JSON) -> JSON:
    for c in (group.get("status") or {}).get("conditions") or ():
        if c["type"] == "PodGroupScheduled":
            return dict(c)
    return {}


def events(cp: ControlPlane, namespace: str, kind: str, name: str) -> list[JSON]:
    return [
        e
        for e in cp.api.list("events.k8s.io/v1", "Event", namespace)
        if e["regarding"].get("kind") == kind and e["regarding"]["name"] == name
    ]


def bound(cp: ControlPlane, namespace: str, group: str) -> list[str]:
    pods = cp.api.list("v1", "Pod", namespace, labelSelector=f"{LABEL}={group}")
    return [p["spec"]["nodeName"] for p in pods if p["spec"].get("nodeName")]


def test_the_example_pod_group_is_accepted_by_the_apiserver(
    controlplane: ControlPlane, namespace: str, crds: None
) -> None:
    example = CRDS.parent / "policies" / "examples" / "podgroup-example.yaml"
    (group,) = [d for d in yaml.safe_load_all(example.read_text()) if d["kind"] == "PodGroup"]
    group["metadata"]["namespace"] = namespace
    out = controlplane.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(group))
    assert out.returncode == 0, out.stderr
    bad = {**group, "spec": {"minMember": 0}}
    out = controlplane.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(bad))
    assert out.returncode != 0
    assert "spec.minMember" in out.stderr


async def test_a_gang_that_fits_is_bound_and_its_status_says_scheduled(
    controlplane: ControlPlane, namespace: str, kubesched: Runtime
) -> None:
    cp, sel = controlplane, pool()
    nodes = await call(cp.create_nodes, 2, labels=sel, prefix=f"gang-{sel[next(iter(sel))]}-")
    await call(apply, cp, namespace, pod_group("train", 4), *members("train", 4, sel, cpu="1500m"))

    placed = await eventually(lambda: len(bound(cp, namespace, "train")) == 4, what="4 bound")
    assert placed
    assert set(await call(bound, cp, namespace, "train")) <= set(nodes)

    def scheduled() -> JSON | None:
        g = read_group(cp, namespace, "train")
        st = g.get("status") or {}
        return g if st.get("phase") == "Scheduled" and st["counts"]["bound"] == 4 else None

    group = await eventually(scheduled, what="PodGroup phase Scheduled with 4 bound")
    st = group["status"]
    assert st["counts"] == {
        "pending": 0,
        "waiting": 0,
        "bound": 4,
        "running": 0,
        "succeeded": 0,
        "failed": 0,
    }
    cond = scheduled_condition(group)
    assert (cond["status"], cond["reason"], cond["message"]) == (
        "True",
        "Scheduled",
        "4/4 members bound",
    )
    assert cond["observedGeneration"] == st["observedGeneration"] == 1
    assert st["scheduleStartTime"]
    # Nothing of ours on the PodGroup but its status (no finalizer: deleting it never
    # waits for kubesched), nothing of ours on the pods.
    assert not group["metadata"].get("finalizers")
    annotations = set(group["metadata"].get("annotations") or {})
    assert annotations <= {"kubectl.kubernetes.io/last-applied-configuration"}  # no progress
    for p in await call(cp.api.list, "v1", "Pod", namespace):
        meta = p["metadata"]
        assert not meta.get("finalizers")
        assert not [a for a in meta.get("annotations") or {} if a.startswith("kubesched.dev")]
    evs = await eventually(
        lambda: [
            e for e in events(cp, namespace, "PodGroup", "train") if e["reason"] == "Scheduled"
        ],
        what="a Scheduled event on the PodGroup",
    )
    assert evs[0]["type"] == "Normal"
    assert evs[0]["reportingController"] == "kubesched"
    assert "4 bound" in evs[0]["note"]
    out = await call(
        cp.kubectl, "delete", "kpg", "train", "-n", namespace, "--timeout=20s", timeout=30
    )
    assert out.returncode == 0, out.stderr


async def test_the_finalizer_an_older_release_put_on_a_podgroup_is_taken_off(
    controlplane: ControlPlane, namespace: str, kubesched: Runtime
) -> None:
    # Releases before 2026-11 put Kopf's finalizer on every kubesched.dev PodGroup; with
    # nothing left to take it off, deleting such a group (or its namespace) would hang.
    cp = controlplane
    legacy = pod_group("legacy", 2)
    legacy["metadata"]["finalizers"] = ["kubesched.dev/finalizer", "example.com/keep"]
    await call(apply, cp, namespace, legacy)

    def released() -> JSON | None:
        g = read_group(cp, namespace, "legacy")
        return g if g.get("metadata", {}).get("finalizers") == ["example.com/keep"] else None

    await eventually(released, what="kubesched.dev/finalizer taken off, the other one kept")
    path = f"/apis/kubesched.dev/v1alpha1/namespaces/{namespace}/podgroups/legacy"
    await call(cp.api.patch, path, {"metadata": {"finalizers": None}})

    # One being deleted already (an older release had stopped before releasing it).
    legacy = pod_group("stuck", 2)
    legacy["metadata"]["finalizers"] = ["kubesched.dev/finalizer"]
    await call(apply, cp, namespace, legacy)
    out = await call(
        cp.kubectl, "delete", "kpg", "stuck", "-n", namespace, "--timeout=20s", timeout=30
    )
    assert out.returncode == 0, out.stderr


async def test_a_gang_that_cannot_fit_binds_nothing_and_its_status_says_why(
    controlplane: ControlPlane, namespace: str, kubesched: Runtime
) -> None:
    cp, sel = controlplane, pool()
    await call(
        cp.create_nodes,
        1,
        labels=sel,
        prefix=f"gpu-{sel[next(iter(sel))]}-",
        extra_resources={"nvidia.com/gpu": "2"},
    )
    await call(apply, cp, namespace, pod_group("gpu", 3), *members("gpu", 3, sel, gpu=1))

    def unschedulable() -> JSON | None:
        cond = scheduled_condition(read_group(cp, namespace, "gpu"))
        return cond if cond.get("reason") == "Unschedulable" else None

    cond = await eventually(unschedulable, what="PodGroupScheduled=False, Unschedulable")
    assert cond["status"] == "False"
    assert cond["message"].startswith(f'pod group "{namespace}/gpu": 2/3 members fit; 1 pod: ')
    assert "Insufficient nvidia.com/gpu" in cond["message"]
    # Every member, the two that fit too, says the gang's reason (cluster-autoscaler).
    for name in ("gpu-0", "gpu-1", "gpu-2"):

        def pod_scheduled(name: str = name) -> JSON | None:
            pod = cp.api.read("v1", "Pod", name, namespace)
            conds = (pod.get("status") or {}).get("conditions") or []
            return next((c for c in conds if c.get("type") == "PodScheduled"), None)

        pc = await eventually(pod_scheduled, what=f"PodScheduled on {name}")
        assert (pc["status"], pc["reason"]) == ("False", "Unschedulable")
        assert pc["message"] == cond["message"]
    group = await call(read_group, cp, namespace, "gpu")
    assert group["status"]["phase"] == "Pending"
    assert group["status"]["message"] == cond["message"]
    assert group["status"]["counts"]["pending"] == 3
    evs = await eventually(
        lambda: [
            e for e in events(cp, namespace, "PodGroup", "gpu") if e["reason"] == "Unschedulable"
        ],
        what="an Unschedulable event on the PodGroup",
    )
    assert evs[0]["type"] == "Warning"
    assert "2/3 members fit" in evs[0]["note"]
    assert await call(bound, cp, namespace, "gpu") == []


async def test_a_pod_naming_a_missing_pod_group_waits_with_an_event(
    controlplane: ControlPlane, namespace: str, kubesched: Runtime
) -> None:
    cp, sel = controlplane, pool()
    await call(cp.create_nodes, 1, labels=sel, prefix=f"orphan-{sel[next(iter(sel))]}-")
    await call(apply, cp, namespace, *members("later", 1, sel, cpu="100m"))
    evs = await eventually(
        lambda: [
            e
            for e in events(cp, namespace, "Pod", "later-0")
            if e["reason"] == "FailedScheduling" and "does not exist" in e["note"]
        ],
        what="a FailedScheduling event naming the missing PodGroup",
    )
    assert evs[0]["note"] == (
        f'pod group "{namespace}/later" does not exist; waiting for it to be created'
    )
    assert await call(bound, cp, namespace, "later") == []
    # Creating the group requeues its pod (the PodGroup watch).
    await call(apply, cp, namespace, pod_group("later", 1))
    await eventually(lambda: bound(cp, namespace, "later"), what="the pod bound")


class FailWhileBroken:
    """Members labelled ``slow=yes`` error in PreFilter while ``broken``."""

    name = "FailWhileBroken"
    broken = True

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: list[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        if pod.labels.get("slow") == "yes" and FailWhileBroken.broken:
            return None, Status.as_error("not yet")
        return None, None

    def pre_filter_extensions(self) -> None:
        return None


async def test_a_member_error_reserves_nothing_and_the_gang_binds_whole_later(
    controlplane: ControlPlane, namespace: str, kubesched: Runtime
) -> None:
    cp, sel = controlplane, pool()
    FailWhileBroken.broken = True
    registry = in_tree_registry()
    registry.register("FailWhileBroken", lambda args, handle: FailWhileBroken())
    spec = ProfileSpec(
        plugins=Plugins(pre_filter=PluginSet(enabled=[PluginRef(name="FailWhileBroken")]))
    )
    sched = kubesched.scheduler
    sched.set_profile(compile_profile(spec, sched.services(), registry))
    fwk = sched.profiles["kubesched"].framework
    await call(cp.create_nodes, 1, labels=sel, prefix=f"slow-{sel[next(iter(sel))]}-")
    pods = members("slow", 3, sel, cpu="100m")
    pods[2]["metadata"]["labels"]["slow"] = "yes"
    await apply_group_first(cp, kubesched, namespace, pod_group("slow", 3), *pods)

    def failed(name: str) -> bool:
        return any(e["reason"] == "FailedScheduling" for e in events(cp, namespace, "Pod", name))

    await eventually(
        lambda: all(failed(f"slow-{i}") for i in range(3)),
        what="a FailedScheduling event on every member",
    )
    # One member's error fails the whole gang: no member holds a node meanwhile.
    assert not fwk.waiting_pods
    uids = [p["metadata"]["uid"] for p in await call(cp.api.list, "v1", "Pod", namespace)]
    assert [u for u in uids if sched.cache.get_pod(u) is not None] == []
    assert await call(bound, cp, namespace, "slow") == []
    FailWhileBroken.broken = False
    # The members back off together (1 s doubling to 10 s) and bind as one unit.
    await eventually(
        lambda: len(bound(cp, namespace, "slow")) == 3, within=40, what="all three bound"
    )
