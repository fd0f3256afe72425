"""The random cluster kind about devices (see :mod:`tests.e2e.random_clusters`):
:func:`dra`."""

from __future__ import annotations

import random

from tests.e2e.random_builders import (
    JSON,
    ZONE,
    ZONES,
    node_doc,
    pod_doc,
)

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
        docs.append(node_doc(name, {ZONE: rng.choice(ZONES[:2])}, {}, capacity))
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
    docs.append(pod_doc("p", spec))
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
        pod = pod_doc(f"run-{k}", spec)
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
