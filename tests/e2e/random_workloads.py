"""The random cluster kinds about priorities and placement choices (see
:mod:`tests.e2e.random_clusters`): :func:`preemption`, :func:`scoring`, and the
upstream gangs of ``test_random_gangs.py`` (:func:`gang`)."""

from __future__ import annotations

import random

from tests.e2e.random_builders import (
    HOSTNAME,
    JSON,
    ZONE,
    ZONES,
    affinity_term,
    node_doc,
    pod_doc,
)


def preemption(rng: random.Random) -> list[JSON]:
    """Two to five nodes full of running pods of several priorities, apps and start
    times, PodDisruptionBudgets over some apps, and a pod of high priority that fits
    nowhere until pods go: which node and which victims (kube's candidate order: fewest
    PDB violations, lowest highest victim priority, smallest priority sum, fewest
    victims, latest start) must be the same."""
    names = [f"n{k}" for k in range(rng.randint(2, 5))]
    docs: list[JSON] = []
    for name in names:
        capacity = {"cpu": str(rng.choice((4, 8))), "memory": "16Gi", "pods": "110"}
        docs.append(node_doc(name, {ZONE: rng.choice(ZONES), HOSTNAME: name}, {}, capacity))
    apps = ("web", "db", "cache", "batch")
    k = 0
    for name in names:
        for _ in range(rng.randint(1, 4)):
            requests = {"cpu": rng.choice(("1", "2", "3")), "memory": rng.choice(("1Gi", "4Gi"))}
            spec: JSON = {
                "nodeName": name,
                "priority": rng.choice((0, 10, 100, 1000, 10000)),
                "containers": [
                    {"name": "c", "image": "busybox", "resources": {"requests": requests}}
                ],
            }
            pod = pod_doc(f"run-{k}", spec, {"app": rng.choice(apps)})
            # started at times of their own (kube ranks equal victims by start time)
            pod["status"] = {"startTime": f"2026-01-01T{k % 24:02d}:{k:02d}:00Z"}
            docs.append(pod)
            k += 1
    for app in rng.sample(apps, rng.randint(0, 2)):
        allowed = rng.randint(0, 1)
        docs.append(
            {
                "apiVersion": "policy/v1",
                "kind": "PodDisruptionBudget",
                "metadata": {"name": app, "namespace": "default"},
                "spec": {"maxUnavailable": allowed, "selector": {"matchLabels": {"app": app}}},
                "status": {
                    "disruptionsAllowed": allowed,
                    "currentHealthy": 1,
                    "desiredHealthy": 1,
                    "expectedPods": 1,
                },
            }
        )
    requests = {"cpu": rng.choice(("2", "3", "4", "6")), "memory": rng.choice(("1Gi", "8Gi"))}
    spec = {
        "priority": rng.choice((50, 500, 5000)),
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests}}],
    }
    if rng.random() < 0.3:
        spec["nodeSelector"] = {ZONE: rng.choice(ZONES)}
    docs.append(pod_doc("p", spec))
    return docs


IMAGES = ("registry.example.com/app:v1", "registry.example.com/tools:v2")


def scoring(rng: random.Random) -> list[JSON]:
    """Nodes of several shapes (zones, disk labels, a PreferNoSchedule taint, cached
    images) running pods of a few apps, and a pod that fits on most of them with
    preferences: node affinity weights, preferred pod (anti-)affinity, a ScheduleAnyway
    spread, an image some nodes hold. No priorities: the score alone decides."""
    names = [f"n{k}" for k in range(rng.randint(3, 6))]
    # one size per image: kube-scheduler scores an image with the size of the first node
    # it listed holding it, and it lists the nodes at start in no fixed order
    sizes = {image: rng.choice((50, 300, 900)) * 1024 * 1024 for image in IMAGES}
    docs = [_scoring_node(rng, name, sizes) for name in names]
    docs += [_scoring_running_pod(rng, k, names) for k in range(rng.randint(0, 8))]
    requests = {
        "cpu": rng.choice(("100m", "500m", "1", "2")),
        "memory": rng.choice(("128Mi", "1Gi", "2Gi")),
    }
    if rng.random() < 0.12:
        requests = {}  # best effort: scored with kube's default requests
    image = rng.choice((*IMAGES, "busybox"))
    spec: JSON = {
        "containers": [{"name": "c", "image": image, "resources": {"requests": requests}}]
    }
    if rng.random() < 0.2:
        init: JSON = {
            "name": "init",
            "image": "busybox",
            "resources": {"requests": {"cpu": rng.choice(("1", "3")), "memory": "3Gi"}},
        }
        if rng.random() < 0.5:
            init["restartPolicy"] = "Always"  # a sidecar: its requests add up
        spec["initContainers"] = [init]
    affinity: JSON = {}
    if rng.random() < 0.5:
        affinity["nodeAffinity"] = {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": rng.randint(1, 100),
                    "preference": {
                        "matchExpressions": [
                            rng.choice(
                                (
                                    {"key": "disk", "operator": "In", "values": ["ssd"]},
                                    {"key": ZONE, "operator": "In", "values": [rng.choice(ZONES)]},
                                )
                            )
                        ]
                    },
                }
                for _ in range(rng.randint(1, 2))
            ]
        }
    for kind in ("podAffinity", "podAntiAffinity"):
        if rng.random() < 0.35:
            affinity[kind] = {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {
                        "weight": rng.randint(1, 100),
                        "podAffinityTerm": affinity_term(rng, ("web", "db", "cache")),
                    }
                ]
            }
    if affinity:
        spec["affinity"] = affinity
    if rng.random() < 0.4:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": rng.choice((HOSTNAME, ZONE)),
                "whenUnsatisfiable": "ScheduleAnyway",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        ]
    if rng.random() < 0.3:
        spec["tolerations"] = [{"key": "spot", "operator": "Exists", "effect": "PreferNoSchedule"}]
    docs.append(pod_doc("p", spec, {"app": "web"}))
    return docs


def _scoring_running_pod(rng: random.Random, k: int, names: list[str]) -> JSON:
    """A running pod of one of three apps, sometimes with (anti-)affinity terms of its
    own toward web pods: kube-scheduler counts those of existing pods too (preferred by
    their weight, required by hardPodAffinityWeight)."""
    requests = {
        "cpu": rng.choice(("250m", "500m", "1", "2")),
        "memory": rng.choice(("256Mi", "1Gi", "4Gi")),
    }
    spec: JSON = {
        "nodeName": rng.choice(names),
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests}}],
    }
    if rng.random() < 0.25:
        kind = rng.choice(("podAffinity", "podAntiAffinity"))
        term = affinity_term(rng, ("web",))
        if kind == "podAffinity" and rng.random() < 0.4:
            spec["affinity"] = {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        else:
            weighted = {"weight": rng.randint(1, 100), "podAffinityTerm": term}
            spec["affinity"] = {
                kind: {"preferredDuringSchedulingIgnoredDuringExecution": [weighted]}
            }
    return pod_doc(f"run-{k}", spec, {"app": rng.choice(("web", "db", "cache"))})


def _scoring_node(rng: random.Random, name: str, sizes: dict[str, int]) -> JSON:
    labels = {ZONE: rng.choice(ZONES), HOSTNAME: name}
    if rng.random() < 0.5:
        labels["disk"] = rng.choice(("ssd", "hdd"))
    spec: JSON = {}
    if rng.random() < 0.2:
        spec["taints"] = [{"key": "spot", "value": "true", "effect": "PreferNoSchedule"}]
    capacity = {
        "cpu": str(rng.choice((4, 8, 16))),
        "memory": rng.choice(("8Gi", "16Gi", "32Gi")),
        "pods": "110",
    }
    node = node_doc(name, labels, spec, capacity)
    if rng.random() < 0.3:
        # some of it kept for the system
        node["status"]["allocatable"] = {**capacity, "cpu": f"{int(capacity['cpu']) * 1000 - 500}m"}
    images = [
        {"names": [image], "sizeBytes": sizes[image]} for image in IMAGES if rng.random() < 0.4
    ]
    if images:
        node["status"]["images"] = images
    return node


GANG_NS = "ml"
"""The namespace of :func:`gang`'s group and pods."""


def gang(rng: random.Random) -> list[JSON]:
    """An upstream gang (Workload + PodGroup, ``scheduling.k8s.io/v1beta1``) of two to four
    alike members in ``ml``, maybe held to one rack, on two to four nodes running pods of
    priorities below and above the gang's (pod group preemption's victims); or, in about
    a third, a gang needing fewer members than it has, among pods it cannot evict."""
    names = [f"n{k}" for k in range(rng.randint(2, 4))]
    docs: list[JSON] = []
    for name in names:
        capacity = {
            "cpu": str(rng.choice((2, 4, 8))),
            "memory": rng.choice(("8Gi", "16Gi")),
            "pods": "110",
        }
        labels = {ZONE: rng.choice(ZONES[:2])}
        if rng.random() < 0.8:
            labels["rack"] = rng.choice(("r1", "r2"))
        docs.append(node_doc(name, labels, {}, capacity))
    docs += _gang_running_pods(rng, names)
    size = rng.randint(2, 4)
    # all or nothing, but for a few groups (below)
    policy = {"gang": {"minCount": size}}
    template: JSON = {"name": "workers", "schedulingPolicy": policy}
    group: JSON = {"workloadRef": {"workloadName": "job", "templateName": "workers"}}
    group["schedulingPolicy"] = policy
    if rng.random() < 0.25:
        template["schedulingConstraints"] = {"topology": [{"key": "rack"}]}
        group["schedulingConstraints"] = {"topology": [{"key": "rack"}]}
    # the members' class, the group's too (else kube-scheduler refuses the group: its
    # priority must be each member's)
    value = rng.choice((50, 500))
    priority_class = f"gang-{value}"
    docs.insert(
        0,
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": priority_class},
            "value": value,
        },
    )
    if rng.random() < 0.9:
        group["priorityClassName"] = priority_class
    upstream = "scheduling.k8s.io/v1beta1"
    docs.append(
        {
            "apiVersion": upstream,
            "kind": "Workload",
            "metadata": {"name": "job", "namespace": GANG_NS},
            "spec": {"podGroupTemplates": [template]},
        }
    )
    docs.append(
        {
            "apiVersion": upstream,
            "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": GANG_NS},
            "spec": group,
        }
    )
    # one shape for every member, as a training job's workers have: kube-scheduler tries
    # members in the order it listed them at start (random), which decides which of
    # members of different sizes fit
    requests = {"cpu": rng.choice(("1", "2", "3")), "memory": rng.choice(("1Gi", "6Gi"))}
    for k in range(size):
        spec = {
            "priorityClassName": priority_class,
            "schedulingGroup": {"podGroupName": "train"},
            "containers": [{"name": "c", "image": "busybox", "resources": {"requests": requests}}],
        }
        member = pod_doc(f"train-{k}", spec)
        member["metadata"]["namespace"] = GANG_NS
        docs.append(member)
    if rng.random() < 0.35:
        # spare members: the group needs fewer than it has, and nothing may be evicted
        # for it (kube-scheduler 1.37 also evicts for a spare member left over from a
        # group placed at its minCount, kubesched by design does not: docs/differences.md,
        # "Only the members still needed"), so every running pod outranks it
        policy["gang"]["minCount"] = rng.randint(1, size - 1)
        for doc in docs:
            if doc["kind"] == "Pod" and doc["spec"].get("nodeName"):
                doc["spec"]["priority"] = 1000
    return docs


def _gang_running_pods(rng: random.Random, names: list[str]) -> list[JSON]:
    """Zero to four running pods of priorities below and above a gang's, in its namespace."""
    docs: list[JSON] = []
    for k in range(rng.randint(0, 4)):
        spec: JSON = {
            "nodeName": rng.choice(names),
            "priority": rng.choice((0, 10, 1000)),
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": rng.choice(("1", "2", "3"))}},
                }
            ],
        }
        pod = pod_doc(f"run-{k}", spec)
        pod["metadata"]["namespace"] = GANG_NS
        pod["status"] = {"startTime": f"2026-01-01T{k:02d}:{rng.randint(0, 59):02d}:00Z"}
        docs.append(pod)
    return docs
