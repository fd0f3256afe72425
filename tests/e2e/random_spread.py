"""The random cluster kind about topology spread (see :mod:`tests.e2e.random_clusters`):
:func:`spread`."""

from __future__ import annotations

import random

from tests.e2e.random_builders import HOSTNAME, JSON, ZONE, ZONES, container, node_doc, pod_doc

RACK = "example.com/rack"
"""A topology key of the cluster's own (not every node has it)."""

KEYS = (ZONE, HOSTNAME, RACK)


def spread(rng: random.Random) -> list[JSON]:
    """Three to seven nodes in zones and racks (some without one of the labels, some
    tainted, some with a disk label), running pods of two apps and two versions (some in
    another namespace, some terminating), and a pod with one or two spread constraints
    over the zone, the host or the rack: maxSkew 1-3, DoNotSchedule or ScheduleAnyway,
    ``minDomains``, ``nodeAffinityPolicy``, ``nodeTaintsPolicy``, ``matchLabelKeys``,
    a selector by labels or by expression; sometimes a node selector, a required zone,
    a toleration, or a priority high enough to evict for its spread."""
    names = [f"n{k}" for k in range(rng.randint(3, 7))]
    docs = [_spread_node(rng, name) for name in names]
    docs += [_spread_running_pod(rng, k, names) for k in range(rng.randint(2, 12))]
    constraints = [_constraint(rng, key) for key in rng.sample(KEYS, rng.choice((1, 1, 2)))]
    requests = {"cpu": rng.choice(("100m", "500m", "1", "2")), "memory": "512Mi"}
    spec: JSON = {
        "containers": [container(requests)],
        "topologySpreadConstraints": constraints,
        "priority": 1000 if rng.random() < 0.3 else 0,
    }
    if rng.random() < 0.25:
        spec["nodeSelector"] = {"disk": "ssd"}
    if rng.random() < 0.2:
        zones = rng.sample(ZONES, 2)
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": ZONE, "operator": "In", "values": zones}]}
                    ]
                }
            }
        }
    if rng.random() < 0.3:
        spec["tolerations"] = [{"key": "dedicated", "operator": "Exists", "effect": "NoSchedule"}]
    docs.append(pod_doc("p", spec, {"app": "web", "version": rng.choice(("v1", "v2"))}))
    return docs


def _spread_node(rng: random.Random, name: str) -> JSON:
    labels: dict[str, str] = {}
    if rng.random() < 0.9:
        labels[ZONE] = rng.choice(ZONES)
    if rng.random() < 0.8:
        labels[RACK] = f"r{rng.randint(0, 2)}"
    if rng.random() < 0.5:
        labels["disk"] = rng.choice(("ssd", "hdd"))
    spec: JSON = {}
    if rng.random() < 0.15:
        spec["taints"] = [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    capacity = {
        "cpu": str(rng.choice((2, 4, 8))),
        "memory": "16Gi",
        "pods": str(rng.choice((4, 110))),
    }
    return node_doc(name, labels, spec, capacity)


def _spread_running_pod(rng: random.Random, k: int, names: list[str]) -> JSON:
    requests = {"cpu": rng.choice(("100m", "500m", "1")), "memory": "256Mi"}
    spec: JSON = {
        "nodeName": rng.choice(names),
        "priority": rng.choice((0, 0, 100, 2000)),
        "containers": [container(requests)],
    }
    labels = {"app": rng.choice(("web", "web", "db")), "version": rng.choice(("v1", "v2"))}
    pod = pod_doc(f"run-{k}", spec, labels)
    if rng.random() < 0.2:
        pod["metadata"]["namespace"] = "other"  # not counted: spread counts its own namespace
    if rng.random() < 0.1:
        # terminating: not counted by the spread (kube skips pods being deleted)
        pod["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    # started, each at its own time (preemption ranks victims by start time)
    pod["status"] = {"startTime": f"2026-01-01T{k:02d}:{rng.randint(0, 59):02d}:00Z"}
    return pod


def _constraint(rng: random.Random, key: str) -> JSON:
    hard = rng.random() < 0.6
    c: JSON = {
        "maxSkew": rng.choice((1, 1, 2, 3)),
        "topologyKey": key,
        "whenUnsatisfiable": "DoNotSchedule" if hard else "ScheduleAnyway",
    }
    if rng.random() < 0.7:
        c["labelSelector"] = {"matchLabels": {"app": "web"}}
    else:
        c["labelSelector"] = {
            "matchExpressions": [{"key": "app", "operator": "In", "values": ["web", "db"]}]
        }
    if hard and rng.random() < 0.3:
        c["minDomains"] = rng.randint(2, 4)
    if rng.random() < 0.3:
        c["nodeAffinityPolicy"] = rng.choice(("Honor", "Ignore"))
    if rng.random() < 0.3:
        c["nodeTaintsPolicy"] = rng.choice(("Honor", "Ignore"))
    if rng.random() < 0.3:
        c["matchLabelKeys"] = ["version"]
    return c
