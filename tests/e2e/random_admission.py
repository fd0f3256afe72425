"""The random cluster kind about what the API server's admission writes into a pod before
any scheduler reads it (see :mod:`tests.e2e.random_clusters`): :func:`admission`."""

from __future__ import annotations

import random

from tests.e2e.random_builders import JSON, ZONE, ZONES, node_doc, pod_doc


def admission(rng: random.Random) -> list[JSON]:
    """Two to five nodes (some labelled and tainted for a sandbox runtime) with running
    pods, maybe a LimitRange in ``default`` with default limits and requests (no bounds:
    the pod is never refused), maybe a RuntimeClass with an overhead and a node selector
    and toleration of its own, and a pod whose containers state some, all or none of
    their resources, maybe naming the class: the defaults and the overhead decide where
    it fits."""
    docs: list[JSON] = []
    sandbox = rng.random() < 0.6
    if sandbox:
        rc: JSON = {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": "sandbox"},
            "handler": "kata",
        }
        if rng.random() < 0.8:
            rc["overhead"] = {
                "podFixed": {
                    "cpu": rng.choice(("100m", "250m", "500m")),
                    "memory": rng.choice(("64Mi", "256Mi")),
                }
            }
        if rng.random() < 0.6:
            rc["scheduling"] = {
                "nodeSelector": {"runtime": "kata"},
                "tolerations": [{"key": "runtime", "operator": "Exists", "effect": "NoSchedule"}],
            }
        docs.append(rc)
    if rng.random() < 0.6:
        item: JSON = {"type": "Container"}
        if rng.random() < 0.7:
            item["default"] = {
                "cpu": rng.choice(("1", "1500m")),
                "memory": rng.choice(("512Mi", "1Gi")),
            }
        if rng.random() < 0.6:
            item["defaultRequest"] = {"cpu": rng.choice(("100m", "250m", "400m"))}
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "LimitRange",
                "metadata": {"name": "defaults"},
                "spec": {"limits": [item]},
            }
        )
    names = [f"n{k}" for k in range(rng.randint(2, 5))]
    for name in names:
        labels = {ZONE: rng.choice(ZONES)}
        spec: JSON = {}
        if rng.random() < 0.4:
            labels["runtime"] = "kata"
            if rng.random() < 0.7:
                spec["taints"] = [{"key": "runtime", "value": "kata", "effect": "NoSchedule"}]
        capacity = {
            "cpu": rng.choice(("1", "2")),
            "memory": rng.choice(("2Gi", "4Gi")),
            "pods": "110",
        }
        docs.append(node_doc(name, labels, spec, capacity))
    for k in range(rng.randint(0, 4)):
        requests = {"cpu": rng.choice(("100m", "500m")), "memory": "256Mi"}
        running = {
            "nodeName": rng.choice(names),
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests}}],
        }
        docs.append(pod_doc(f"run-{k}", running))
    containers = []
    for i in range(rng.randint(1, 2)):
        resources: JSON = {}
        if rng.random() < 0.5:
            resources["requests"] = {"cpu": rng.choice(("200m", "700m"))}
        if rng.random() < 0.3:
            resources["limits"] = {"cpu": rng.choice(("800m", "1200m")), "memory": "768Mi"}
        containers.append({"name": f"c{i}", "image": "busybox", "resources": resources})
    spec = {"containers": containers}
    if sandbox and rng.random() < 0.6:
        spec["runtimeClassName"] = "sandbox"
    elif rng.random() < 0.3:
        spec["tolerations"] = [{"key": "runtime", "operator": "Exists", "effect": "NoSchedule"}]
    docs.append(pod_doc("p", spec))
    return docs
