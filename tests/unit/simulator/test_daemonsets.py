"""A scenario's DaemonSet expanded as the DaemonSet controller expands it: which nodes get
a pod, and the tolerations and node affinity each pod gets (the e2e test compares the
same with kube-controller-manager)."""

from __future__ import annotations

from typing import Any

from kubesched.simulator.controllers import DAEMON_TOLERATIONS, created_objects

JSON = dict[str, Any]


def node(name: str, labels: dict[str, str] | None = None, **spec: Any) -> JSON:
    return {"kind": "Node", "metadata": {"name": name, "labels": labels or {}}, "spec": spec}


def daemon_set(**pod_spec: Any) -> JSON:
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {"name": "ds", "namespace": "default"},
        "spec": {
            "selector": {"matchLabels": {"app": "ds"}},
            "template": {
                "metadata": {"labels": {"app": "ds"}},
                "spec": {"containers": [{"name": "c", "image": "i"}], **pod_spec},
            },
        },
    }


def targets(ds: JSON, nodes: list[JSON]) -> list[str]:
    out = []
    for pod in created_objects(ds, nodes):
        req = pod["spec"]["affinity"]["nodeAffinity"][
            "requiredDuringSchedulingIgnoredDuringExecution"
        ]
        out.append(req["nodeSelectorTerms"][0]["matchFields"][0]["values"][0])
    return out


def test_a_pod_per_node_it_may_run_on() -> None:
    nodes = [
        node("plain"),
        node("cordoned", unschedulable=True),
        node("tainted", taints=[{"key": "gpu", "effect": "NoSchedule"}]),
        node("evicting", taints=[{"key": "maint", "effect": "NoExecute"}]),
        node("soft", taints=[{"key": "spot", "effect": "PreferNoSchedule"}]),
        node(
            "pressured",
            taints=[{"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule"}],
        ),
    ]
    assert targets(daemon_set(), nodes) == ["plain", "cordoned", "soft", "pressured"]


def test_the_template_node_selector_affinity_and_node_name_choose_nodes() -> None:
    nodes = [node("a1", {"pool": "a"}), node("b1", {"pool": "b"}), node("a2", {"pool": "a"})]
    assert targets(daemon_set(nodeSelector={"pool": "a"}), nodes) == ["a1", "a2"]
    assert targets(daemon_set(nodeName="a2"), nodes) == ["a2"]
    term = {
        "matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": ["b1"]}]
    }
    required = {"nodeSelectorTerms": [term]}
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    assert targets(daemon_set(affinity=affinity), nodes) == ["b1"]


def test_the_controllers_tolerations_are_added_once_and_affinity_pinned() -> None:
    preferred = [
        {"weight": 1, "preference": {"matchExpressions": [{"key": "x", "operator": "Exists"}]}}
    ]
    affinity = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": preferred}}
    mine = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
    (pod,) = created_objects(daemon_set(tolerations=[mine], affinity=affinity), [node("n")])
    keys = [(t["key"], t["effect"]) for t in pod["spec"]["tolerations"]]
    assert keys == list(DAEMON_TOLERATIONS[:-1])  # not network-unavailable: no hostNetwork
    assert (
        pod["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        == preferred
    )
    assert pod["metadata"]["ownerReferences"][0]["kind"] == "DaemonSet"
    (net,) = created_objects(daemon_set(hostNetwork=True), [node("n")])
    assert ("node.kubernetes.io/network-unavailable", "NoSchedule") in [
        (t["key"], t["effect"]) for t in net["spec"]["tolerations"]
    ]
