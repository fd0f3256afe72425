"""Object templates of the benchmark workloads, after kube-scheduler's scheduler_perf.

Plain dicts, not yet defaulted, indexed by ordinal: nodes (``node-default``: 4 CPU,
32Gi, 110 pods, zones round-robin as labels) and the pod shapes the workloads combine
(``pod-default``'s pause container, 100m CPU / 500Mi, plus affinity, spreading, gates,
priority or a gang label). Every pod carries :data:`ROLE_LABEL` so whoever runs a
workload can tell measured pods from the others by label alone.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "GANG_LABEL",
    "HOSTNAME_LABEL",
    "ROLE_LABEL",
    "ZONES",
    "ZONE_LABEL",
    "node_default",
    "pod",
    "pod_group",
    "priority_class",
]

ZONE_LABEL = "topology.kubernetes.io/zone"
HOSTNAME_LABEL = "kubernetes.io/hostname"
#: scheduler_perf's zone names (its node-affinity template selects zone1 and zone2).
ZONES = ("zone1", "zone2", "zone3")
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
#: The label that joins a pod to a PodGroup (kubesched's own).
GANG_LABEL = "kubesched.dev/pod-group"
#: What a pod is for in a benchmark run: ``measured``, ``init``, ``gated`` or ``background``.
ROLE_LABEL = "bench.kubesched.dev/role"


def node_default(name: str, zone_index: int) -> dict[str, Any]:
    """scheduler_perf's node-default: 4 CPU, 32Gi, 110 pods, a zone label."""
    resources = {"cpu": "4", "memory": "32Gi", "pods": "110"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {HOSTNAME_LABEL: name, ZONE_LABEL: ZONES[zone_index % len(ZONES)]},
        },
        "spec": {},
        "status": {
            "capacity": dict(resources),
            "allocatable": dict(resources),
            "conditions": [{"type": "Ready", "status": "True"}],
            "phase": "Running",
        },
    }


def pod(
    name: str,
    role: str,
    *,
    cpu: str = "100m",
    memory: str = "500Mi",
    labels: dict[str, str] | None = None,
    limits: bool = True,
    priority: tuple[str, int] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    """A pause pod (scheduler_perf's pod-default: 100m CPU, 500Mi, limits = requests).

    ``priority`` is (PriorityClass name, its value): both are set, as the API server's
    Priority admission leaves them, so the object means the same to the simulator and
    to a real cluster. ``spec`` entries are added to the pod's spec as given.
    """
    requests = {"cpu": cpu, "memory": memory}
    container: dict[str, Any] = {
        "name": "pause",
        "image": PAUSE_IMAGE,
        "ports": [{"containerPort": 80}],
        "resources": {"requests": requests, **({"limits": dict(requests)} if limits else {})},
    }
    body: dict[str, Any] = {"containers": [container], **spec}
    if priority is not None:
        body["priorityClassName"], body["priority"] = priority
    meta: dict[str, Any] = {
        "name": name,
        "namespace": "default",
        "labels": {**(labels or {}), ROLE_LABEL: role},
    }
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": body}


def priority_class(name: str, value: int) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        "description": "kubesched bench",
    }


def pod_group(name: str, min_member: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubesched.dev/v1alpha1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"minMember": min_member},
    }


def node_affinity_zones(*zones: str) -> dict[str, Any]:
    """Required node affinity: ``topology.kubernetes.io/zone In zones``."""
    expr = {"key": ZONE_LABEL, "operator": "In", "values": list(zones)}
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expr]}]
            }
        }
    }


def pod_affinity(kind: str, color: str, topology_key: str) -> dict[str, Any]:
    """Required (anti-)affinity to pods labelled ``color``; ``kind`` is podAffinity or
    podAntiAffinity. No ``namespaces``: the term selects in the pod's own namespace."""
    term = {"labelSelector": {"matchLabels": {"color": color}}, "topologyKey": topology_key}
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}


def spread(color: str, when: str) -> list[dict[str, Any]]:
    """scheduler_perf's spreading constraint: maxSkew 5 over zones."""
    return [
        {
            "maxSkew": 5,
            "topologyKey": ZONE_LABEL,
            "whenUnsatisfiable": when,
            "labelSelector": {"matchLabels": {"color": color}},
        }
    ]
