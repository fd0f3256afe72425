"""Generated benchmark workloads, modelled on kube-scheduler's scheduler_perf.

Each workload is a node template, a pod template and defaults for the cluster size,
so ``kubesched simulate --workload NAME --nodes N --pods M`` measures the same thing as
the scheduler_perf test case of that name (``test/integration/scheduler_perf``).

======================  ===========================================================
SchedulingBasic         scheduler_perf ``node-default`` nodes (4 CPU, 32Gi, 110 pods)
                        in 3 zones; ``pod-default`` pods (100m CPU, 500Mi).
SchedulingNodeAffinity  the same nodes; pods require ``topology.kubernetes.io/zone``
                        In [zone1, zone2] (2 of the 3 zones qualify).
TopologySpreading       the same nodes; pods labelled ``color: blue`` spread over zones
                        with ``maxSkew: 5``, ``DoNotSchedule``.
SchedulingPodAntiAffinity  the same nodes; pods labelled ``color: green`` with required
                        anti-affinity to each other per ``kubernetes.io/hostname``
                        (at most one per node: pods beyond the node count do not fit).
======================  ===========================================================

Defaults follow scheduler_perf's 500-node case (500 nodes, 1000 measured pods); the
issue's benchmark runs SchedulingBasic at 5000 nodes / 10000 pods. Pods are created
in namespace ``default`` with the default scheduler name (``kubesched`` after
defaulting). Node/pod plugins that the current profile lacks simply ignore the
constraint (e.g. NodeAffinity before it lands).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["WORKLOADS", "ZONES", "Workload", "generate"]

ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: scheduler_perf's zone names (its node-affinity template selects zone1 and zone2).
ZONES = ("zone1", "zone2", "zone3")
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"


def node_default(i: int) -> dict[str, Any]:
    """scheduler_perf's node-default: 4 CPU, 32Gi, 110 pods; zones assigned round-robin."""
    name = f"scheduler-perf-{i}"
    resources = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {HOSTNAME_LABEL: name, ZONE_LABEL: ZONES[i % len(ZONES)]},
        },
        "spec": {},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [{"type": "Ready", "status": "True"}],
            "phase": "Running",
        },
    }


def _pod(name: str, spec_extra: dict[str, Any], labels: dict[str, str]) -> dict[str, Any]:
    """scheduler_perf's pause container (100m CPU, 500Mi requested and limited) + extras."""
    container = {
        "name": "pause",
        "image": PAUSE_IMAGE,
        "ports": [{"containerPort": 80}],
        "resources": {
            "requests": {"cpu": "100m", "memory": "500Mi"},
            "limits": {"cpu": "100m", "memory": "500Mi"},
        },
    }
    spec: dict[str, Any] = {"containers": [container], **spec_extra}
    meta: dict[str, Any] = {"name": name, "namespace": "default"}
    if labels:
        meta["labels"] = dict(labels)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def pod_default(i: int) -> dict[str, Any]:
    """scheduler_perf's pod-default: one pause container requesting 100m CPU and 500Mi."""
    return _pod(f"pod-{i}", {}, {})


def pod_with_node_affinity(i: int) -> dict[str, Any]:
    affinity = {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": ZONE_LABEL, "operator": "In", "values": ["zone1", "zone2"]}
                        ]
                    }
                ]
            }
        }
    }
    return _pod(f"node-affinity-{i}", {"affinity": affinity}, {})


def pod_with_topology_spreading(i: int) -> dict[str, Any]:
    constraint = {
        "maxSkew": 5,
        "topologyKey": ZONE_LABEL,
        "whenUnsatisfiable": "DoNotSchedule",
        "labelSelector": {"matchLabels": {"color": "blue"}},
    }
    return _pod(
        f"spreading-pod-{i}", {"topologySpreadConstraints": [constraint]}, {"color": "blue"}
    )


def pod_with_pod_anti_affinity(i: int) -> dict[str, Any]:
    affinity = {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchLabels": {"color": "green"}},
                    "topologyKey": HOSTNAME_LABEL,
                }
            ]
        }
    }
    return _pod(f"anti-affinity-pod-{i}", {"affinity": affinity}, {"color": "green"})


@dataclass(frozen=True, slots=True)
class Workload:
    """A generated workload: templates indexed by ordinal, and its default size."""

    node: Callable[[int], dict[str, Any]]
    pod: Callable[[int], dict[str, Any]]
    default_nodes: int = 500
    default_pods: int = 1000
    description: str = ""


#: Name -> workload. Names follow scheduler_perf's test cases.
WORKLOADS: dict[str, Workload] = {
    "SchedulingBasic": Workload(
        node_default, pod_default, description="node-default nodes, pod-default pods"
    ),
    "SchedulingNodeAffinity": Workload(
        node_default,
        pod_with_node_affinity,
        description="pods require zone1 or zone2 through required node affinity",
    ),
    "TopologySpreading": Workload(
        node_default,
        pod_with_topology_spreading,
        description="pods spread over zones (maxSkew 5, DoNotSchedule)",
    ),
    "SchedulingPodAntiAffinity": Workload(
        node_default,
        pod_with_pod_anti_affinity,
        default_nodes=500,
        default_pods=400,
        description="required pod anti-affinity per hostname (one pod per node)",
    ),
}


def generate(name: str, nodes: int | None = None, pods: int | None = None) -> list[dict[str, Any]]:
    """The workload's nodes, then its pods, as plain (not yet defaulted) objects.

    ``nodes``/``pods`` of None take the workload's defaults. Raises ValueError for an
    unknown name or a negative size.
    """
    w = WORKLOADS.get(name)
    if w is None:
        raise ValueError(f"unknown workload {name!r} (known: {', '.join(WORKLOADS)})")
    n = w.default_nodes if nodes is None else nodes
    p = w.default_pods if pods is None else pods
    if n < 0 or p < 0:
        raise ValueError(f"node and pod counts must not be negative, got {n} and {p}")
    return [w.node(i) for i in range(n)] + [w.pod(i) for i in range(p)]
