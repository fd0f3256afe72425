"""Random small clusters, each with one pod to schedule (``default/p``), for
``test_random_differential.py``: scenarios nobody wrote by hand, played to kube-scheduler
and to kubesched.

Eight kinds, each a function of a ``random.Random`` (preemption and scoring in
:mod:`tests.e2e.random_workloads`, dra in :mod:`tests.e2e.random_devices`, spread in
:mod:`tests.e2e.random_spread`, affinity in :mod:`tests.e2e.random_affinity`, admission
in :mod:`tests.e2e.random_admission`, the shared builders in
:mod:`tests.e2e.random_builders`):

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
* :func:`spread`: three to seven nodes in zones and racks (some lacking a label, some
  tainted), running pods of two apps and versions (some in another namespace, some
  terminating), and a pod with one or two spread constraints over zone, host or rack
  (maxSkew, DoNotSchedule or ScheduleAnyway, ``minDomains``, the node inclusion
  policies, ``matchLabelKeys``, selectors by label or expression), sometimes a node
  selector, a required zone, a toleration, or a priority that may evict for its spread.
* :func:`affinity`: three to six nodes in zones and racks running pods of three apps in
  three namespaces, some with (anti-)affinity terms of their own that the pod may match,
  and a pod with required and preferred terms over host, zone or rack (selectors by
  labels or expressions, ``namespaces``, ``namespaceSelector``, ``matchLabelKeys``,
  ``mismatchLabelKeys``), sometimes with a priority that may evict for its terms.
* :func:`admission`: two to five nodes (some labelled and tainted for a sandbox
  runtime), maybe a LimitRange with default limits and requests, maybe a RuntimeClass
  with an overhead, a node selector and a toleration, and a pod stating some, all or none
  of its resources, maybe naming the class: what the API server's admission writes into
  it decides where it fits.

The objects are scenario documents (``kubesched.simulator.scenario`` defaults them as it
defaults a file).
"""

from __future__ import annotations

import random
from collections.abc import Callable

from tests.e2e.random_admission import admission
from tests.e2e.random_affinity import affinity
from tests.e2e.random_builders import (
    HOSTNAME,
    JSON,
    POD,
    ZONE,
    ZONES,
    affinity_term,
    node_doc,
    pod_doc,
)
from tests.e2e.random_devices import dra
from tests.e2e.random_spread import spread
from tests.e2e.random_workloads import preemption, scoring

__all__ = ["KINDS", "POD"]

TAINTS = (
    ("dedicated", "gpu", "NoSchedule"),
    ("spot", "true", "PreferNoSchedule"),
    ("maint", "", "NoExecute"),
    ("team", "x", "NoSchedule"),
)
GPU = "example.com/gpu"
CSI = "disk.csi.example.com"


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
    return node_doc(name, labels, spec, capacity)


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
                "requiredDuringSchedulingIgnoredDuringExecution": [
                    affinity_term(rng, ("web", "db"))
                ]
            }
        }
    pod = pod_doc(f"run-{k}", spec, {"app": rng.choice(("web", "db", "cache"))})
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
    return pod_doc("p", spec, {"app": "web"})


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
            "requiredDuringSchedulingIgnoredDuringExecution": [
                affinity_term(rng, ("web", "db", "cache"))
            ]
        }
    if rng.random() < 0.2:
        affinity["podAffinity"] = {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                affinity_term(rng, ("web", "db", "none"))
            ]
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
    docs.append(pod_doc("p", spec))
    return docs


def _volume_node(rng: random.Random, name: str) -> list[JSON]:
    """A node, maybe its CSINode (attach limit) and its CSIStorageCapacity."""
    docs = [
        node_doc(
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


KINDS: dict[str, Callable[[random.Random], list[JSON]]] = {
    "general": general,
    "volumes": volumes,
    "dra": dra,
    "scoring": scoring,
    "preemption": preemption,
    "spread": spread,
    "affinity": affinity,
    "admission": admission,
}
