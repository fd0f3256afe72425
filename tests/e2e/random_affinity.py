"""The random cluster kind about inter-pod affinity (see :mod:`tests.e2e.random_clusters`):
:func:`affinity`."""

from __future__ import annotations

import random

from tests.e2e.random_builders import HOSTNAME, JSON, ZONE, ZONES, container, node_doc, pod_doc
from tests.e2e.random_spread import RACK

NAMESPACES = {"team-a": {"team": "a", "env": "prod"}, "team-b": {"team": "b", "env": "dev"}}
"""The namespaces the pods live in besides ``default``, always with these labels (a
namespace outlives the scenario that made it: no namespace controller runs)."""

APPS = ("web", "db", "cache")


def affinity(rng: random.Random) -> list[JSON]:
    """Three to six nodes in zones and racks (some lacking a label) running pods of three
    apps in three namespaces, some of them carrying required or preferred (anti-)affinity
    terms of their own (which the pod may match: the symmetric half of InterPodAffinity),
    and a pod with required and preferred terms over the host, the zone or the rack: label
    selectors by labels or expressions (In, NotIn, Exists, DoesNotExist), ``namespaces``,
    ``namespaceSelector``, ``matchLabelKeys`` and ``mismatchLabelKeys``; sometimes a
    priority that may evict for its terms."""
    docs: list[JSON] = [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": labels}}
        for ns, labels in NAMESPACES.items()
    ]
    names = [f"n{k}" for k in range(rng.randint(3, 6))]
    for name in names:
        labels: dict[str, str] = {}
        if rng.random() < 0.9:
            labels[ZONE] = rng.choice(ZONES)
        if rng.random() < 0.8:
            labels[RACK] = f"r{rng.randint(0, 2)}"
        capacity = {"cpu": "8", "memory": "32Gi", "pods": "110"}
        docs.append(node_doc(name, labels, {}, capacity))
    running = [_affinity_running_pod(rng, k, names) for k in range(rng.randint(3, 12))]
    docs += running
    spec: JSON = {
        "containers": [container({"cpu": "100m", "memory": "128Mi"})],
        "priority": 1000 if rng.random() < 0.25 else 0,
    }
    terms = _terms(rng, required=(0.35, 0.35), preferred=(0.5, 0.5))
    if spec["priority"] and rng.random() < 0.6:
        # a term against the app most running pods have, in the pod's namespace:
        # preemption may evict pods of lower priority for it
        apps = [
            r["metadata"]["labels"]["app"]
            for r in running
            if r["metadata"]["namespace"] == "default"
        ]
        hard = terms.setdefault("podAntiAffinity", {})
        hard["requiredDuringSchedulingIgnoredDuringExecution"] = [
            {
                "topologyKey": rng.choice((HOSTNAME, ZONE, RACK)),
                "labelSelector": {"matchLabels": {"app": max(APPS, key=apps.count)}},
            }
        ]
    if terms:
        spec["affinity"] = terms
    version = rng.choice(("v1", "v2"))
    docs.append(pod_doc("p", spec, {"app": "web", "tier": "fe", "version": version}))
    return docs


def _affinity_running_pod(rng: random.Random, k: int, names: list[str]) -> JSON:
    spec: JSON = {
        "nodeName": rng.choice(names),
        "priority": rng.choice((0, 100, 2000)),
        "containers": [container({"cpu": "100m", "memory": "128Mi"})],
    }
    if rng.random() < 0.4:
        # terms of its own, which the pod may match (kube checks and scores them too)
        terms = _terms(rng, required=(0.15, 0.3), preferred=(0.4, 0.4))
        if terms:
            spec["affinity"] = terms
    labels = {
        "app": rng.choice(APPS),
        "tier": rng.choice(("fe", "be")),
        "version": rng.choice(("v1", "v2")),
    }
    pod = pod_doc(f"run-{k}", spec, labels)
    pod["metadata"]["namespace"] = rng.choice(("default", "default", *NAMESPACES))
    # started, each at its own time (preemption ranks victims by start time)
    pod["status"] = {"startTime": f"2026-01-01T{k:02d}:{rng.randint(0, 59):02d}:00Z"}
    return pod


def _terms(
    rng: random.Random, required: tuple[float, float], preferred: tuple[float, float]
) -> JSON:
    """An affinity with (anti-)affinity terms, each kind drawn with its odds."""
    out: JSON = {}
    for kind, hard, soft in (
        ("podAffinity", required[0], preferred[0]),
        ("podAntiAffinity", required[1], preferred[1]),
    ):
        block: JSON = {}
        if rng.random() < hard:
            block["requiredDuringSchedulingIgnoredDuringExecution"] = [_term(rng)]
        if rng.random() < soft:
            block["preferredDuringSchedulingIgnoredDuringExecution"] = [
                {"weight": rng.randint(1, 100), "podAffinityTerm": _term(rng)}
                for _ in range(rng.randint(1, 2))
            ]
        if block:
            out[kind] = block
    return out


def _term(rng: random.Random) -> JSON:
    term: JSON = {"topologyKey": rng.choice((HOSTNAME, HOSTNAME, ZONE, RACK))}
    roll = rng.random()
    if roll < 0.55:
        term["labelSelector"] = {"matchLabels": {"app": rng.choice(APPS)}}
    else:
        op = rng.choice(("In", "NotIn", "Exists", "DoesNotExist"))
        expression: JSON = {"key": rng.choice(("app", "tier")), "operator": op}
        if op in ("In", "NotIn"):
            expression["values"] = rng.sample(("web", "db", "fe", "be"), rng.randint(1, 2))
        term["labelSelector"] = {"matchExpressions": [expression]}
    roll = rng.random()
    if roll < 0.2:
        term["namespaces"] = rng.sample(("default", *NAMESPACES), rng.randint(1, 2))
    elif roll < 0.3:
        term["namespaceSelector"] = {}  # every namespace
    elif roll < 0.4:
        term["namespaceSelector"] = {"matchLabels": {"env": rng.choice(("prod", "dev"))}}
    if rng.random() < 0.2:
        term["matchLabelKeys"] = ["version"]
    elif rng.random() < 0.15:
        term["mismatchLabelKeys"] = ["tier"]
    return term
