"""Random small clusters, each with one pod to schedule (``default/p``), for
``test_random_differential.py``: scenarios nobody wrote by hand, played to kube-scheduler
and to kubesched.

Five kinds, each a function of a ``random.Random``:

* :func:`general`: two to five nodes with zones, some labels, taints
  (NoSchedule, PreferNoSchedule, NoExecute), cordons, few pods or an extended resource;
  running pods of several priorities with requests, host ports (one pod per port and
  node) and required anti-affinity, each started at its own time; the pod asks cpu and memory, maybe the extended resource, a host port,
  a node selector, tolerations, a Gt/Lt node affinity, required (anti-)affinity, zone or
  hostname spread, and its priority is usually above some running pods (so preemption
  and its verdicts are exercised).
* :func:`volumes`: two to four nodes, a local WaitForFirstConsumer class with local PVs
  pinned to nodes, a CSI class (maybe limited by ``allowedTopologies``, maybe with a
  CSIDriver that tracks capacity and per-node CSIStorageCapacity objects), an Immediate
  class, CSINode attach limits; the pod uses some of: a claim bound to a zonal PV, a local
  claim, a claim to provision, an unbound Immediate claim, a claim that does not exist.
* :func:`preemption`: two to five nodes full of running pods of several priorities,
  apps and start times, PodDisruptionBudgets (0 or 1 disruption allowed) over some
  apps, and a pod of high priority that fits nowhere until pods go.
* :func:`scoring`: three to six nodes of several shapes (zones, disk labels, a
  PreferNoSchedule taint, cached images) running pods of three apps, and a pod that fits
  on most of them with preferences (node affinity weights, preferred pod
  (anti-)affinity, a ScheduleAnyway spread, an image some nodes hold): the score decides.
* :func:`dra`: two to four nodes publishing GPUs through ResourceSlices (model, NUMA and
  memory attributes; sometimes shared counters, tainted devices, or a pool in two
  slices of which one is missing), maybe a NIC pool for every node or one zone, claims
  already allocated; the pod asks one or two claims: counts, ``All``, CEL selectors,
  tolerations, ``firstAvailable``, ``matchAttribute``, a class that does not exist, or
  a claim allocated already (the pod must follow it); running pods of lower and higher
  priority take cpu, some of them using an allocated claim.

The objects are scenario documents (``kubesched.simulator.scenario`` defaults them as it
defaults a file).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

JSON = dict[str, Any]

POD = "default/p"
"""The pod each cluster schedules."""

ZONES = ("a", "b", "c")
TAINTS = (
    ("dedicated", "gpu", "NoSchedule"),
    ("spot", "true", "PreferNoSchedule"),
    ("maint", "", "NoExecute"),
    ("team", "x", "NoSchedule"),
)
GPU = "example.com/gpu"
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
CSI = "disk.csi.example.com"


def _node(name: str, labels: dict[str, str], spec: JSON, capacity: dict[str, str]) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"capacity": capacity},
    }


def _pod(name: str, spec: JSON, labels: dict[str, str] | None = None) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
    }


def _term(rng: random.Random, apps: tuple[str, ...]) -> JSON:
    return {
        "topologyKey": rng.choice((HOSTNAME, ZONE)),
        "labelSelector": {"matchLabels": {"app": rng.choice(apps)}},
    }


def general(rng: random.Random) -> list[JSON]:
    names = [f"n{k}" for k in range(rng.randint(2, 5))]
    docs = [_general_node(rng, name) for name in names]
    taken: set[tuple[str, int]] = set()
    docs += [_running_pod(rng, k, names, taken) for k in range(rng.randint(1, 8))]
    docs.append(_pending_pod(rng))
    return docs


def _general_node(rng: random.Random, name: str) -> JSON:
    labels = {ZONE: rng.choice(ZONES)}
    if rng.random() < 0.4:
        labels["disk"] = rng.choice(("ssd", "hdd"))
    if rng.random() < 0.3:
        labels["gen"] = str(rng.randint(1, 9))
    spec: JSON = {}
    taints = []
    for key, value, effect in TAINTS:
        if rng.random() < 0.1:
            taint = {"key": key, "effect": effect}
            if value:
                taint["value"] = value
            taints.append(taint)
    if taints:
        spec["taints"] = taints
    if rng.random() < 0.07:
        spec["unschedulable"] = True
    capacity = {
        "cpu": str(rng.choice((1, 2, 4))),
        "memory": rng.choice(("2Gi", "4Gi", "8Gi")),
        "pods": str(rng.choice((2, 3, 110))),
    }
    if rng.random() < 0.3:
        capacity[GPU] = str(rng.randint(0, 2))
    return _node(name, labels, spec, capacity)


def _running_pod(rng: random.Random, k: int, names: list[str], taken: set[tuple[str, int]]) -> JSON:
    node = rng.choice(names)
    container: JSON = {
        "name": "c",
        "image": "busybox",
        "resources": {
            "requests": {
                "cpu": rng.choice(("100m", "500m", "1", "2")),
                "memory": rng.choice(("128Mi", "1Gi", "2Gi")),
            }
        },
    }
    port = rng.choice((8080, 9090))
    if rng.random() < 0.25 and (node, port) not in taken:
        # one pod per host port and node, as the scheduler leaves them (kube-scheduler
        # frees a port two pods share with the first to leave: docs/differences.md)
        taken.add((node, port))
        container["ports"] = [{"containerPort": 80, "hostPort": port}]
    spec: JSON = {
        "nodeName": node,
        "priority": rng.choice((0, 10, 100, 1000)),
        "containers": [container],
    }
    if rng.random() < 0.25:
        spec["affinity"] = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [_term(rng, ("web", "db"))]
            }
        }
    pod = _pod(f"run-{k}", spec, {"app": rng.choice(("web", "db", "cache"))})
    # started, each at its own time, as running pods are: kube-scheduler ranks
    # equal-priority victims that never started by the order its cache got them,
    # which its streaming list does not fix
    pod["status"] = {"startTime": f"2026-01-01T{k:02d}:{rng.randint(0, 59):02d}:00Z"}
    return pod


def _pending_pod(rng: random.Random) -> JSON:
    requests = {
        "cpu": rng.choice(("500m", "1", "2", "3")),
        "memory": rng.choice(("256Mi", "1Gi", "3Gi")),
    }
    container: JSON = {"name": "c", "image": "busybox", "resources": {"requests": requests}}
    if rng.random() < 0.25:
        requests[GPU] = "1"
        container["resources"]["limits"] = {GPU: "1"}
    if rng.random() < 0.25:
        container["ports"] = [{"containerPort": 80, "hostPort": rng.choice((8080, 9090))}]
    spec: JSON = {"priority": rng.choice((50, 500, 500)), "containers": [container]}
    if rng.random() < 0.1:
        spec["preemptionPolicy"] = "Never"
    if rng.random() < 0.3:
        spec["nodeSelector"] = {"disk": rng.choice(("ssd", "hdd"))}
    if rng.random() < 0.3:
        spec["tolerations"] = [
            {
                "key": rng.choice(("dedicated", "team", "maint")),
                "operator": "Exists",
                "effect": rng.choice(("NoSchedule", "NoExecute")),
            }
        ]
    affinity = _pending_affinity(rng)
    if affinity:
        spec["affinity"] = affinity
    if rng.random() < 0.3:
        spec["topologySpreadConstraints"] = [
            {
                "maxSkew": 1,
                "topologyKey": rng.choice((HOSTNAME, ZONE)),
                "whenUnsatisfiable": "DoNotSchedule",
                "labelSelector": {"matchLabels": {"app": "web"}},
            }
        ]
    return _pod("p", spec, {"app": "web"})


def _pending_affinity(rng: random.Random) -> JSON:
    affinity: JSON = {}
    if rng.random() < 0.25:
        expression = {
            "key": "gen",
            "operator": rng.choice(("Gt", "Lt")),
            "values": [str(rng.randint(1, 9))],
        }
        affinity["nodeAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [{"matchExpressions": [expression]}]
            }
        }
    if rng.random() < 0.3:
        affinity["podAntiAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [_term(rng, ("web", "db", "cache"))]
        }
    if rng.random() < 0.2:
        affinity["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [_term(rng, ("web", "db", "none"))]
        }
    return affinity


def _storage_class(name: str, provisioner: str, mode: str) -> JSON:
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": name},
        "provisioner": provisioner,
        "volumeBindingMode": mode,
    }


def _claim(name: str, size: str, storage_class: str, volume: str = "") -> JSON:
    spec: JSON = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": size}},
        "storageClassName": storage_class,
    }
    if volume:
        spec["volumeName"] = volume
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name},
        "spec": spec,
    }


def _affinity(key: str, value: str) -> JSON:
    expression = {"key": key, "operator": "In", "values": [value]}
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}}


def volumes(rng: random.Random) -> list[JSON]:
    docs: list[JSON] = [
        _storage_class("local", "kubernetes.io/no-provisioner", "WaitForFirstConsumer"),
        _storage_class("imm", CSI, "Immediate"),
    ]
    zonal = _storage_class("zonal", CSI, "WaitForFirstConsumer")
    if rng.random() < 0.5:
        zonal["allowedTopologies"] = [
            {"matchLabelExpressions": [{"key": ZONE, "values": [rng.choice(ZONES[:2])]}]}
        ]
    docs.append(zonal)
    if rng.random() < 0.5:
        docs.append(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSIDriver",
                "metadata": {"name": CSI},
                "spec": {"storageCapacity": True, "attachRequired": True},
            }
        )
    names = [f"n{k}" for k in range(rng.randint(2, 4))]
    for name in names:
        docs += _volume_node(rng, name)
    for k in range(rng.randint(0, 3)):
        docs.append(_local_pv(rng, k, names))
    claims = _claims(rng, docs)
    spec: JSON = {
        "priority": 10,
        "containers": [{"name": "c", "image": "busybox"}],
        "volumes": [
            {"name": f"v{i}", "persistentVolumeClaim": {"claimName": c}}
            for i, c in enumerate(claims)
        ],
    }
    if rng.random() < 0.3:
        spec["nodeSelector"] = {ZONE: rng.choice(ZONES[:2])}
    docs.append(_pod("p", spec))
    return docs


def _volume_node(rng: random.Random, name: str) -> list[JSON]:
    """A node, maybe its CSINode (attach limit) and its CSIStorageCapacity."""
    docs = [
        _node(
            name,
            {ZONE: rng.choice(ZONES[:2]), "topology.example.com/node": name},
            {},
            {"cpu": "4", "memory": "8Gi", "pods": "110"},
        )
    ]
    if rng.random() < 0.5:
        driver = {"name": CSI, "nodeID": name, "allocatable": {"count": rng.randint(0, 2)}}
        docs.append(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSINode",
                "metadata": {"name": name},
                "spec": {"drivers": [driver]},
            }
        )
    if rng.random() < 0.5:
        capacity: JSON = {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIStorageCapacity",
            "metadata": {"name": f"zonal-{name}", "namespace": "default"},
            "storageClassName": "zonal",
            "nodeTopology": {"matchLabels": {"topology.example.com/node": name}},
            "capacity": f"{rng.choice((1, 5, 20))}Gi",
        }
        if rng.random() < 0.3:
            capacity["maximumVolumeSize"] = f"{rng.choice((1, 3))}Gi"
        docs.append(capacity)
    return docs


def _local_pv(rng: random.Random, k: int, names: list[str]) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": f"local-{k}"},
        "spec": {
            "capacity": {"storage": f"{rng.choice((1, 5, 10))}Gi"},
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "local",
            "local": {"path": f"/mnt/{k}"},
            "nodeAffinity": _affinity(HOSTNAME, rng.choice(names)),
        },
    }


def _claims(rng: random.Random, docs: list[JSON]) -> list[str]:
    """The pod's claims (their objects, and a bound claim's PV, appended to ``docs``)."""
    claims: list[str] = []
    if rng.random() < 0.5:
        zone = rng.choice(ZONES[:2])
        docs.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": "zonal-pv", "labels": {ZONE: zone}},
                "spec": {
                    "capacity": {"storage": "5Gi"},
                    "accessModes": ["ReadWriteOnce"],
                    "storageClassName": "",
                    "csi": {"driver": CSI, "volumeHandle": "zonal-pv"},
                    "nodeAffinity": _affinity(ZONE, zone),
                },
            }
        )
        docs.append(_claim("bound", "5Gi", "", volume="zonal-pv"))
        claims.append("bound")
    if rng.random() < 0.6:
        docs.append(_claim("local", f"{rng.choice((1, 4, 8))}Gi", "local"))
        claims.append("local")
    if rng.random() < 0.5:
        docs.append(_claim("dynamic", f"{rng.choice((1, 2, 4))}Gi", "zonal"))
        claims.append("dynamic")
    if rng.random() < 0.15:
        docs.append(_claim("immediate", "1Gi", "imm"))
        claims.append("immediate")
    if rng.random() < 0.1 or not claims:
        claims.append("missing")
    return claims


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
        docs.append(_node(name, {ZONE: rng.choice(ZONES), HOSTNAME: name}, {}, capacity))
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
            pod = _pod(f"run-{k}", spec, {"app": rng.choice(apps)})
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
    docs.append(_pod("p", spec))
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
                        "podAffinityTerm": _term(rng, ("web", "db", "cache")),
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
    docs.append(_pod("p", spec, {"app": "web"}))
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
        term = _term(rng, ("web",))
        if kind == "podAffinity" and rng.random() < 0.4:
            spec["affinity"] = {kind: {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
        else:
            weighted = {"weight": rng.randint(1, 100), "podAffinityTerm": term}
            spec["affinity"] = {
                kind: {"preferredDuringSchedulingIgnoredDuringExecution": [weighted]}
            }
    return _pod(f"run-{k}", spec, {"app": rng.choice(("web", "db", "cache"))})


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
    node = _node(name, labels, spec, capacity)
    if rng.random() < 0.3:
        # some of it kept for the system
        node["status"]["allocatable"] = {**capacity, "cpu": f"{int(capacity['cpu']) * 1000 - 500}m"}
    images = [
        {"names": [image], "sizeBytes": sizes[image]} for image in IMAGES if rng.random() < 0.4
    ]
    if images:
        node["status"]["images"] = images
    return node


GPU_DRIVER = "gpu.example.com"
NIC_DRIVER = "nic.example.com"
MODELS = ("a", "b")
MEMORY = ("10Gi", "20Gi", "40Gi")
SELECTORS = (
    'device.attributes["gpu.example.com"].model == "a"',
    'device.attributes["gpu.example.com"].model != "a"',
    'device.attributes["gpu.example.com"].numa == 1',
    'device.capacity["gpu.example.com"].memory.compareTo(quantity("20Gi")) >= 0',
    'device.capacity["gpu.example.com"].memory.compareTo(quantity("40Gi")) < 0',
)


def dra(rng: random.Random) -> list[JSON]:
    """Nodes publishing GPUs (attributes, capacity, maybe shared counters, taints, a pool
    of two slices of which one may be missing), maybe a NIC pool for every node or one
    zone, claims already allocated, and a pod asking one or two claims of its own."""
    docs: list[JSON] = [_device_class(GPU_DRIVER, "gpu")]
    if rng.random() < 0.3:
        docs.append(_device_class(NIC_DRIVER, "nic"))
    names = [f"n{k}" for k in range(rng.randint(2, 4))]
    devices: dict[str, list[JSON]] = {}
    for name in names:
        capacity = {"cpu": str(rng.choice((2, 4))), "memory": "8Gi", "pods": "110"}
        docs.append(_node(name, {ZONE: rng.choice(ZONES[:2])}, {}, capacity))
        devices[name] = _gpu_slices(rng, name, docs)
    if rng.random() < 0.4:
        docs.append(_nic_slice(rng))
    claims = []
    for k in range(rng.randint(1, 2)):
        claim = _device_claim(rng, f"c{k}")
        docs.append(claim)
        claims.append(claim["metadata"]["name"])
    used: set[tuple[str, str]] = set()
    held_on: dict[str, str] = {}
    for k in range(rng.randint(0, 3)):
        held = _allocated_claim(rng, f"held-{k}", devices, used)
        if held is not None:
            docs.append(held)
            term = held["status"]["allocation"]["nodeSelector"]["nodeSelectorTerms"][0]
            held_on[held["metadata"]["name"]] = term["matchFields"][0]["values"][0]
    docs += _device_users(rng, names, held_on)
    if rng.random() < 0.15:
        # the pod's own claim, allocated already: the pod must follow it
        own = _allocated_claim(rng, claims[0], devices, used)
        if own is not None:
            docs = [d for d in docs if d["metadata"]["name"] != claims[0]] + [own]
    spec: JSON = {
        "priority": 50,
        "resourceClaims": [{"name": f"r{i}", "resourceClaimName": c} for i, c in enumerate(claims)],
        "containers": [
            {
                "name": "c",
                "image": "busybox",
                "resources": {
                    "requests": {"cpu": rng.choice(("1", "3"))},
                    "claims": [{"name": f"r{i}"} for i in range(len(claims))],
                },
            }
        ],
    }
    if rng.random() < 0.2:
        spec["nodeSelector"] = {ZONE: rng.choice(ZONES[:2])}
    docs.append(_pod("p", spec))
    return docs


def _device_users(rng: random.Random, names: list[str], held_on: dict[str, str]) -> list[JSON]:
    """Running pods of lower or higher priority than the pod, taking cpu, some using an
    allocated claim on its node (preemption frees their cpu, not their devices)."""
    pods = []
    for k in range(rng.randint(0, 3)):
        spec: JSON = {
            "priority": rng.choice((0, 100)),
            "containers": [
                {
                    "name": "c",
                    "image": "busybox",
                    "resources": {"requests": {"cpu": rng.choice(("1", "2"))}},
                }
            ],
        }
        claim = rng.choice(sorted(held_on)) if held_on and rng.random() < 0.5 else ""
        if claim:
            spec["nodeName"] = held_on.pop(claim)
            spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
            spec["containers"][0]["resources"]["claims"] = [{"name": "gpu"}]
        else:
            spec["nodeName"] = rng.choice(names)
        pod = _pod(f"run-{k}", spec)
        pod["status"] = {"startTime": f"2026-01-01T{k:02d}:00:00Z"}
        pods.append(pod)
    return pods


def _device_class(driver: str, name: str) -> JSON:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
    }


def _slice(name: str, driver: str, pool: str, count: int, body: JSON) -> JSON:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "driver": driver,
            "pool": {"name": pool, "generation": 1, "resourceSliceCount": count},
            **body,
        },
    }


def _gpu_slices(rng: random.Random, node: str, docs: list[JSON]) -> list[JSON]:
    """A node's GPU slices, appended to ``docs``; its devices returned (for allocations)."""
    gpus: list[JSON] = []
    counters = rng.random() < 0.25
    for k in range(rng.randint(0, 4)):
        gpu: JSON = {
            "name": f"gpu-{k}",
            "attributes": {"model": {"string": rng.choice(MODELS)}, "numa": {"int": k % 2}},
            "capacity": {"memory": {"value": rng.choice(MEMORY)}},
        }
        if counters:
            memory = gpu["capacity"]["memory"]["value"]
            gpu["consumesCounters"] = [
                {"counterSet": "gpu-memory", "counters": {"memory": {"value": memory}}}
            ]
        if rng.random() < 0.1:
            gpu["taints"] = [{"key": "example.com/unhealthy", "effect": "NoSchedule"}]
        gpus.append(gpu)
    split = counters or (len(gpus) > 1 and rng.random() < 0.2)
    count = 2 if split else 1
    if counters:
        shared = {
            "nodeName": node,
            "sharedCounters": [
                {"name": "gpu-memory", "counters": {"memory": {"value": rng.choice(MEMORY)}}}
            ],
        }
        docs.append(_slice(f"{node}-counters", GPU_DRIVER, node, count, shared))
        docs.append(
            _slice(f"{node}-gpus", GPU_DRIVER, node, count, {"nodeName": node, "devices": gpus})
        )
    elif split:
        # the pool in two slices; sometimes the second is not published (yet)
        half = len(gpus) // 2
        docs.append(
            _slice(
                f"{node}-gpus-0", GPU_DRIVER, node, 2, {"nodeName": node, "devices": gpus[:half]}
            )
        )
        if rng.random() < 0.6:
            docs.append(
                _slice(
                    f"{node}-gpus-1",
                    GPU_DRIVER,
                    node,
                    2,
                    {"nodeName": node, "devices": gpus[half:]},
                )
            )
        else:
            gpus = gpus[:half]
    elif gpus:
        docs.append(
            _slice(f"{node}-gpus", GPU_DRIVER, node, 1, {"nodeName": node, "devices": gpus})
        )
    return gpus


def _nic_slice(rng: random.Random) -> JSON:
    """NICs of a fabric every node reaches, or only zone a's nodes."""
    body: JSON = {"devices": [{"name": f"nic-{k}"} for k in range(rng.randint(1, 2))]}
    if rng.random() < 0.5:
        body["allNodes"] = True
    else:
        expression = {"key": ZONE, "operator": "In", "values": ["a"]}
        body["nodeSelector"] = {"nodeSelectorTerms": [{"matchExpressions": [expression]}]}
    return _slice("fabric", NIC_DRIVER, "fabric", 1, body)


def _device_request(rng: random.Random, name: str) -> JSON:
    exactly: JSON = {"deviceClassName": "gpu"}
    if rng.random() < 0.06:
        exactly["deviceClassName"] = "missing"
    elif rng.random() < 0.15:
        exactly["deviceClassName"] = "nic"
    if rng.random() < 0.12:
        exactly["allocationMode"] = "All"
    elif rng.random() < 0.4:
        exactly["count"] = rng.randint(1, 3)
    if exactly["deviceClassName"] == "gpu" and rng.random() < 0.6:
        exactly["selectors"] = [{"cel": {"expression": rng.choice(SELECTORS)}}]
    if rng.random() < 0.15:
        exactly["tolerations"] = [
            {"key": "example.com/unhealthy", "operator": "Exists", "effect": "NoSchedule"}
        ]
    if rng.random() < 0.2:
        first = {"name": "one", **exactly}
        second = {"name": "two", "deviceClassName": "gpu", "count": rng.randint(1, 2)}
        return {"name": name, "firstAvailable": [first, second]}
    return {"name": name, "exactly": exactly}


def _device_claim(rng: random.Random, name: str) -> JSON:
    requests = [_device_request(rng, f"req{k}") for k in range(rng.randint(1, 2))]
    devices: JSON = {"requests": requests}
    if len(requests) > 1 and rng.random() < 0.4:
        devices["constraints"] = [{"matchAttribute": "gpu.example.com/numa"}]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": name},
        "spec": {"devices": devices},
    }


def _allocated_claim(
    rng: random.Random, name: str, devices: dict[str, list[JSON]], used: set[tuple[str, str]]
) -> JSON | None:
    """A one-GPU claim allocated to a GPU of a node no other claim has (not reserved for
    a pod)."""
    free = [(n, g) for n, gpus in devices.items() for g in gpus if (n, g["name"]) not in used]
    if not free:
        return None
    node, gpu = rng.choice(free)
    used.add((node, gpu["name"]))
    claim = _device_claim(rng, name)
    claim["spec"]["devices"] = {
        "requests": [{"name": "req0", "exactly": {"deviceClassName": "gpu"}}]
    }
    term = {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    result = {"request": "req0", "driver": GPU_DRIVER, "pool": node, "device": gpu["name"]}
    claim["status"] = {
        "allocation": {
            "devices": {"results": [result]},
            "nodeSelector": {"nodeSelectorTerms": [term]},
            # as kube-scheduler 1.37 writes it (without one, its PreBind cannot add a
            # reservation: the timestamp it adds would modify the allocation)
            "allocationTimestamp": "2026-01-01T00:00:00Z",
        }
    }
    return claim


GANG_NS = "ml"
"""The namespace of :func:`gang`'s group and pods."""


def gang(rng: random.Random) -> list[JSON]:
    """An upstream gang (Workload + PodGroup, ``scheduling.k8s.io/v1beta1``) of two to four
    alike members in ``ml``, maybe held to one rack, on two to four nodes running pods of
    priorities below and above the gang's (pod group preemption's victims)."""
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
        docs.append(_node(name, labels, {}, capacity))
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
        pod = _pod(f"run-{k}", spec)
        pod["metadata"]["namespace"] = GANG_NS
        pod["status"] = {"startTime": f"2026-01-01T{k:02d}:{rng.randint(0, 59):02d}:00Z"}
        docs.append(pod)
    size = rng.randint(2, 4)
    # all or nothing: kube-scheduler 1.37 also evicts for a spare member left over from a
    # group placed at its minCount, kubesched by design does not (docs/differences.md,
    # "Gang preemption": "Only the members still needed")
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
        member = _pod(f"train-{k}", spec)
        member["metadata"]["namespace"] = GANG_NS
        docs.append(member)
    return docs


KINDS: dict[str, Callable[[random.Random], list[JSON]]] = {
    "general": general,
    "volumes": volumes,
    "dra": dra,
    "scoring": scoring,
    "preemption": preemption,
}
