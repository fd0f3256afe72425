"""The random burst (``test_random_bursts.py``): several pending pods at once, where what
one is given decides what the next can have: the queue's order, the room a preemptor's
nomination holds for it while its victims go, and the pods requeued when they are gone."""

from __future__ import annotations

import random

from tests.e2e.random_builders import HOSTNAME, JSON, ZONE, ZONES, container, node_doc, pod_doc

RUNNING_PRIORITIES = (100, 1000)
"""The running pods' priorities: above every filler's, so only the preemptor evicts."""


def burst(rng: random.Random) -> list[JSON]:
    """Two to four nodes of different sizes (so that few placements tie) running pods of
    priority 100 and 1000, each started at its own time; then three to six pending pods
    of distinct priorities (so both schedulers take them in one order): in about two
    bursts of three a preemptor (priority 500 or 5000, which may evict the 100s or all)
    asking more than any node has free, and fillers of priority 1-9 that can evict
    nothing, some of them pinned to a zone or asking more than a node holds."""
    sizes = rng.sample((4, 6, 8, 10), rng.randint(2, 4))
    names = [f"n{k}" for k in range(len(sizes))]
    docs: list[JSON] = []
    for name, cpu in zip(names, sizes, strict=True):
        capacity = {"cpu": str(cpu), "memory": "32Gi", "pods": "110"}
        docs.append(node_doc(name, {ZONE: rng.choice(ZONES[:2]), HOSTNAME: name}, {}, capacity))
    k = 0
    for name, cpu in zip(names, sizes, strict=True):
        used = 0
        for _ in range(rng.randint(1, 3)):
            want = rng.choice((1, 2, 3))
            if used + want > cpu:
                break
            used += want
            spec: JSON = {
                "nodeName": name,
                "priority": rng.choice(RUNNING_PRIORITIES),
                "containers": [container({"cpu": str(want), "memory": "1Gi"})],
            }
            pod = pod_doc(f"run-{k}", spec, {"app": rng.choice(("web", "db"))})
            pod["status"] = {"startTime": f"2026-01-01T{k:02d}:{rng.randint(0, 59):02d}:00Z"}
            docs.append(pod)
            k += 1
    fillers = rng.sample(range(1, 10), rng.randint(2, 5))
    for i, priority in enumerate(fillers):
        spec = {
            "priority": priority,
            "containers": [container({"cpu": rng.choice(("1", "2", "3", "5")), "memory": "1Gi"})],
        }
        if rng.random() < 0.25:
            spec["nodeSelector"] = {ZONE: rng.choice(ZONES[:2])}
        docs.append(pod_doc(f"q{i}", spec))
    if rng.random() < 0.65:
        spec = {
            "priority": rng.choice((500, 5000)),
            "containers": [container({"cpu": str(rng.randint(3, max(sizes))), "memory": "2Gi"})],
        }
        if rng.random() < 0.2:
            spec["preemptionPolicy"] = "Never"
        docs.append(pod_doc("boss", spec))
    return docs
