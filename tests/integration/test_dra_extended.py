"""Extended resources backed by DRA (DRAExtendedResource, GA in 1.37) in the scheduling
loop, on the in-memory cluster in virtual time: the implicit claim kube-scheduler creates
in PreBind, the pod's ``status.extendedResourceClaimStatus``, nodes whose device plugins
serve the resource, devices never given twice, failed writes undone."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from typing import Any

import pytest

from kubesched.framework.cluster_port import ClusterError
from kubesched.framework.dra.extended import EXTENDED_RESOURCE_CLAIM_ANNOTATION
from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running
from tests.integration.test_dra import allocated_devices, failed_messages
from tests.unit.plugins.dra_builders import gpus, kind

pytestmark = pytest.mark.looptime

GPU = "example.com/gpu"


def gpu_class(name: str = "gpu.example.com", ext: str | None = GPU) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "selectors": [{"cel": {"expression": 'device.driver == "gpu.example.com"'}}]
    }
    if ext is not None:
        spec["extendedResourceName"] = ext
    return kind("DeviceClass", {"metadata": {"name": name}, "spec": spec})


def gpu_pod(name: str, n: int = 1, resource: str = GPU) -> dict[str, Any]:
    return make_pod(name).uid(name).req(cpu="100m", **{resource: str(n)}).obj()


def node(h: Harness, name: str, **alloc: str) -> None:
    h.apply(make_node(name).alloc(cpu="8", memory="16Gi", **alloc).obj())


def extended_claims(h: Harness) -> dict[str, Mapping[str, Any]]:
    return {
        key: c
        for key, c in h.cluster.objects.get("ResourceClaim", {}).items()
        if (c["metadata"].get("annotations") or {}).get(EXTENDED_RESOURCE_CLAIM_ANNOTATION)
    }


async def test_the_implicit_claim_is_created_allocated_and_named_in_the_pod_status() -> None:
    h = Harness()
    node(h, "n0")
    h.apply(gpu_class(), gpus(2, "n0"), gpu_pod("p", 2))
    async with running(h):
        await h.wait_for(lambda: h.node_of("default/p") == "n0")
    (claim,) = extended_claims(h).values()
    meta = claim["metadata"]
    assert meta["name"].startswith("p-extended-resources-") and len(meta["name"]) == 26
    assert meta["generateName"] == "p-extended-resources-"
    assert meta["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "p", "controller": True}
    ]
    assert meta["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert claim["spec"] == {
        "devices": {
            "requests": [
                {
                    "name": "container-0-request-1",
                    "exactly": {
                        "deviceClassName": "gpu.example.com",
                        "allocationMode": "ExactCount",
                        "count": 2,
                    },
                }
            ]
        }
    }
    results = claim["status"]["allocation"]["devices"]["results"]
    assert sorted(r["device"] for r in results) == ["gpu-0", "gpu-1"]
    assert {r["request"] for r in results} == {"container-0-request-1"}
    assert claim["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "p"}]
    pod = h.cluster.pod("default/p")
    assert pod is not None
    assert pod["status"]["extendedResourceClaimStatus"] == {
        "requestMappings": [
            {"containerName": "c", "resourceName": GPU, "requestName": "container-0-request-1"}
        ],
        "resourceClaimName": meta["name"],
    }


async def test_a_node_whose_device_plugin_serves_it_needs_no_claim() -> None:
    h = Harness()
    node(h, "n0", **{GPU: "4"})
    h.apply(gpu_class(), gpu_pod("p", 2))
    async with running(h):
        await h.wait_for(lambda: h.node_of("default/p") == "n0")
    assert extended_claims(h) == {}
    pod = h.cluster.pod("default/p")
    assert pod is not None and "extendedResourceClaimStatus" not in pod["status"]


async def test_more_pods_than_devices_wait_with_kube_schedulers_message() -> None:
    h = Harness()
    node(h, "n0")
    node(h, "n1")
    implicit = "deviceclass.resource.kubernetes.io/gpu.example.com"
    h.apply(gpu_class(ext=None), gpus(1, "n0"), gpus(1, "n1"))
    for i in range(3):
        h.apply(gpu_pod(f"p{i}", resource=implicit))
    async with running(h):
        await h.wait_for(lambda: len(h.cluster.bindings) == 2)
        await asyncio.sleep(5)
        (waiting,) = [f"default/p{i}" for i in range(3) if h.node_of(f"default/p{i}") is None]
        assert failed_messages(h, waiting)[-1] == (
            "0/2 nodes are available: 2 cannot allocate all claims. preemption: 0/2 nodes "
            "are available: 2 Preemption is not helpful for scheduling."
        )
        devices = allocated_devices(h)
        assert len(devices) == 2 and len({(p, d) for p, d, _ in devices}) == 2
        # a bound pod goes: its claim goes with it (owned by the pod), the device is free
        gone = next(f"p{i}" for i in range(3) if f"default/p{i}" != waiting)
        freed = h.node_of(f"default/{gone}")
        h.cluster.delete("Pod", f"default/{gone}")
        await h.wait_for(lambda: h.node_of(waiting) == freed)
    assert len(extended_claims(h)) == 2


async def test_no_class_serves_it_then_fit_says_insufficient() -> None:
    h = Harness()
    node(h, "n0")
    h.apply(gpus(1, "n0"), gpu_pod("p"))
    async with running(h):
        await h.wait_for(lambda: bool(failed_messages(h, "default/p")))
        assert failed_messages(h, "default/p")[-1].startswith(
            f"0/1 nodes are available: 1 Insufficient {GPU}."
        )
        h.apply(gpu_class())  # the DeviceClass event requeues it
        await h.wait_for(lambda: h.node_of("default/p") == "n0")


@pytest.mark.parametrize("seed", range(4))
async def test_no_device_is_allocated_twice_across_slow_creates(seed: int) -> None:
    rng = random.Random(seed)
    h = Harness()
    n_nodes, per_node, n_pods = rng.randint(1, 2), rng.randint(1, 3), rng.randint(2, 7)
    for i in range(n_nodes):
        node(h, f"n{i}")
        h.apply(gpus(per_node, f"n{i}"))
    h.apply(gpu_class())
    original = h.cluster.create_claim
    violations: list[str] = []

    async def slow_create(c: Mapping[str, Any]) -> Mapping[str, Any]:
        await asyncio.sleep(rng.uniform(0.0, 2.0))
        got = await original(c)
        devices = allocated_devices(h)
        if len({(p, d) for p, d, _ in devices}) != len(devices):
            violations.append(repr(devices))
        return got

    h.cluster.create_claim = slow_create  # type: ignore[method-assign,assignment]
    for i in range(n_pods):
        h.apply(gpu_pod(f"p{i}"))
    want = min(n_pods, n_nodes * per_node)
    async with running(h):
        await h.wait_for(lambda: len(h.cluster.bindings) == want, within=120)
        await asyncio.sleep(10)
    assert violations == []
    assert len(h.cluster.bindings) == want
    devices = allocated_devices(h)
    assert len(devices) == want == len({(p, d) for p, d, _ in devices})


async def test_a_failed_status_patch_deletes_the_claim_and_the_retry_binds() -> None:
    h = Harness()
    node(h, "n0")
    h.apply(gpu_class(), gpus(1, "n0"), gpu_pod("p"))
    h.cluster.fail_next("set_extended_resource_claim_status", ClusterError("boom"))
    async with running(h):
        await h.wait_for(lambda: h.node_of("default/p") == "n0", within=60)
    assert failed_messages(h, "default/p") == [
        'running PreBind plugin "DynamicResources": '
        "update pod default/p ExtendedResourceClaimStatus: boom"
    ]
    assert len(extended_claims(h)) == 1, "the first claim was deleted, the retry made one"


async def test_a_stale_claim_of_the_pod_is_deleted_and_the_pod_retried() -> None:
    h = Harness()
    node(h, "n0")
    stale = kind(
        "ResourceClaim",
        {
            "metadata": {
                "name": "p-extended-resources-old",
                "namespace": "default",
                "uid": "old",
                "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "p", "controller": True}
                ],
            },
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "container-0-request-1",
                            "exactly": {"deviceClassName": "gpu.example.com", "count": 1},
                        }
                    ]
                }
            },
        },
    )
    h.apply(gpu_class(), gpus(1, "n0"), stale, gpu_pod("p"))
    async with running(h):
        # its deletion (no allocation) requeues nothing, as in kube: the pod waits for
        # the unschedulable pool's flush (5 minutes)
        await h.wait_for(lambda: h.node_of("default/p") == "n0", within=400, step=1.0)
    assert failed_messages(h, "default/p")[0] == (
        "0/1 nodes are available: 1 cannot schedule extended resource claim. "
        "deletion of ResourceClaim completed, preemption: 0/1 nodes are available: "
        "1 Preemption is not helpful for scheduling."
    )
    assert "default/p-extended-resources-old" not in h.cluster.objects["ResourceClaim"]
    assert len(extended_claims(h)) == 1
