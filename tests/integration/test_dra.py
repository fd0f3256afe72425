"""DynamicResources in the scheduling loop, on the in-memory cluster in virtual time: claims
from templates, devices never given twice (also with binds in flight), and bad input
reported on the pod while the loop goes on."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Mapping
from typing import Any

import pytest

from kubesched.framework.cluster_port import Conflict
from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running
from tests.unit.dra.builders import device, exactly, slice_
from tests.unit.plugins.dra_builders import claim, device_class, gpus, kind, template

pytestmark = pytest.mark.looptime


def gpu_pod(name: str, template_name: str = "one-gpu") -> dict[str, Any]:
    return (
        make_pod(name)
        .uid(name)
        .spec(resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": template_name}])
        .obj()
    )


def claim_pod(name: str, claim_name: str) -> dict[str, Any]:
    return (
        make_pod(name)
        .uid(name)
        .spec(resourceClaims=[{"name": "gpu", "resourceClaimName": claim_name}])
        .obj()
    )


def nodes(h: Harness, n: int) -> None:
    for i in range(n):
        h.apply(make_node(f"n{i}").alloc(cpu="8", memory="16Gi", pods="110").obj())


def allocated_devices(h: Harness) -> list[tuple[str, str, str]]:
    """Every (pool, device, claim) allocated, one entry per claim result."""
    out = []
    for key, c in h.cluster.objects.get("ResourceClaim", {}).items():
        alloc = (c.get("status") or {}).get("allocation") or {}
        for r in (alloc.get("devices") or {}).get("results") or ():
            out.append((r["pool"], r["device"], key))
    return out


def failed_messages(h: Harness, key: str) -> list[str]:
    return [e.message for e in h.cluster.events_for(key) if e.reason == "FailedScheduling"]


async def test_pods_from_templates_get_distinct_devices_and_wait_for_a_free_one() -> None:
    h = Harness()
    nodes(h, 2)
    h.apply(device_class(), gpus(2, "n0"), gpus(2, "n1"), template())
    for i in range(5):
        h.apply(gpu_pod(f"p{i}"))
    async with running(h):
        await h.wait_for(lambda: len(h.cluster.bindings) == 4 and not h.sched._tasks)
        await asyncio.sleep(5)
        pending = [f"default/p{i}" for i in range(5) if h.node_of(f"default/p{i}") is None]
        assert len(pending) == 1
        assert failed_messages(h, pending[0])[-1] == (
            "0/2 nodes are available: 2 cannot allocate all claims. preemption: 0/2 nodes "
            "are available: 2 Preemption is not helpful for scheduling."
        )
        devices = allocated_devices(h)
        assert len(devices) == 4 and len({(p, d) for p, d, _ in devices}) == 4
        # each bound pod's device is on its node
        for pool, _, key in devices:
            c = h.cluster.objects["ResourceClaim"][key]
            (owner,) = c["metadata"]["ownerReferences"]
            assert h.node_of(f"default/{owner['name']}") == pool
        # a bound pod goes: its claim is deleted with it, and the waiting pod gets the device
        gone = next(f"p{i}" for i in range(5) if f"default/p{i}" not in pending)
        h.cluster.delete("Pod", f"default/{gone}")
        await h.wait_for(lambda: h.node_of(pending[0]) is not None)
    devices = allocated_devices(h)
    assert len(devices) == 4 and len({(p, d) for p, d, _ in devices}) == 4


@pytest.mark.parametrize("seed", range(6))
async def test_no_device_is_allocated_twice_across_concurrent_binds(seed: int) -> None:
    """Slow claim writes keep several binds in flight at once, some fail (Conflict) and
    are retried; at every step no device belongs to two claims, and in the end as many
    pods are bound as there are devices (or pods)."""
    rng = random.Random(seed)
    h = Harness()
    n_nodes, per_node, n_pods = rng.randint(1, 3), rng.randint(1, 3), rng.randint(2, 9)
    nodes(h, n_nodes)
    h.apply(device_class(), template())
    for i in range(n_nodes):
        h.apply(gpus(per_node, f"n{i}"))
    original = h.cluster.update_claim_status
    violations: list[str] = []

    def check() -> None:
        devices = allocated_devices(h)
        if len({(p, d) for p, d, _ in devices}) != len(devices):
            violations.append(repr(devices))

    async def slow_write(
        c: Mapping[str, Any], allocation: Mapping[str, Any] | None, reserved: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        await asyncio.sleep(rng.uniform(0.0, 2.0))
        if rng.random() < 0.2:
            raise Conflict("the object has been modified; please apply your changes")
        got = await original(c, allocation, reserved)
        check()
        return got

    h.cluster.update_claim_status = slow_write  # type: ignore[method-assign,assignment]
    for i in range(n_pods):
        h.apply(gpu_pod(f"p{i}"))
    expected = min(n_pods, n_nodes * per_node)
    async with running(h):
        await h.wait_for(lambda: len(h.cluster.bindings) == expected, within=600)
        await asyncio.sleep(30)
    assert not violations
    assert len(h.cluster.bindings) == expected
    assert len({k for k, _ in h.cluster.bindings}) == expected  # nobody bound twice
    devices = allocated_devices(h)
    assert len({(p, d) for p, d, _ in devices}) == len(devices)


async def test_a_claim_naming_a_missing_class_waits_for_the_class() -> None:
    h = Harness()
    nodes(h, 1)
    h.apply(gpus(1, "n0"), claim("c"), claim_pod("p", "c"))
    async with running(h):
        await h.wait_for(lambda: bool(failed_messages(h, "default/p")))
        assert failed_messages(h, "default/p")[0] == (
            "0/1 nodes are available: request req: device class gpu does not exist. "
            "preemption: 0/1 nodes are available: 1 Preemption is not helpful for scheduling."
        )
        h.apply(device_class())
        await h.wait_for(lambda: h.node_of("default/p") == "n0")


async def test_a_selector_failing_on_some_devices_is_reported_and_the_loop_goes_on() -> None:
    h = Harness()
    nodes(h, 1)
    sel = 'device.attributes["gpu.example.com"].memory >= 40'
    h.apply(
        device_class(),
        kind(
            "ResourceSlice", slice_("s", [device("gpu-0"), device("gpu-1", memory=80)], node="n0")
        ),
        claim("c", exactly(selectors=[sel])),
        claim_pod("p", "c"),
        make_pod("plain").obj(),
    )
    async with running(h):
        await h.wait_for(lambda: bool(failed_messages(h, "default/p")))
        await h.wait_for(lambda: h.node_of("default/plain") == "n0")
    msg = failed_messages(h, "default/p")[0]
    assert (
        "claim default/c: selector #0 on device gpu.example.com/n0/gpu-0: CEL runtime error" in msg
    )
    assert h.node_of("default/p") is None
    assert not allocated_devices(h)


async def test_a_selector_that_does_not_compile_is_reported() -> None:
    h = Harness()
    nodes(h, 1)
    h.apply(
        device_class(),
        gpus(1, "n0"),
        claim("c", exactly(selectors=["device.driver =="])),
        claim_pod("p", "c"),
    )
    async with running(h):
        await h.wait_for(lambda: bool(failed_messages(h, "default/p")))
    assert (
        "selector #0: CEL compile error: compilation failed" in failed_messages(h, "default/p")[0]
    )
    assert not allocated_devices(h)


async def test_a_claim_allocated_elsewhere_is_used_where_it_is_and_never_reallocated() -> None:
    h = Harness()
    nodes(h, 2)
    done = claim("c")
    done["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "req", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}
                ]
            },
            "nodeSelector": {
                "nodeSelectorTerms": [
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]}
                ]
            },
        },
        "reservedFor": [{"resource": "pods", "name": "q", "uid": "q"}],
    }
    h.apply(device_class(), gpus(1, "n0"), gpus(1, "n1"), done, claim_pod("p", "c"))
    async with running(h):
        await h.wait_for(lambda: h.node_of("default/p") is not None)
    assert h.node_of("default/p") == "n1"
    stored = h.cluster.objects["ResourceClaim"]["default/c"]
    assert [r["uid"] for r in stored["status"]["reservedFor"]] == ["q", "p"]
    assert allocated_devices(h) == [("n1", "gpu-0", "default/c")]


async def test_duplicate_device_names_leave_the_pod_pending_with_kube_reason() -> None:
    h = Harness()
    nodes(h, 1)
    a = kind("ResourceSlice", slice_("a", [device("gpu-0")], node="n0", count=2))
    b = kind("ResourceSlice", slice_("b", [device("gpu-0")], node="n0", count=2))
    h.apply(device_class(), a, b, claim("c"), claim_pod("p", "c"))
    async with running(h):
        await h.wait_for(lambda: bool(failed_messages(h, "default/p")))
    assert failed_messages(h, "default/p")[0].startswith(
        "0/1 nodes are available: 1 invalid resource pools were encountered."
    )
    assert not allocated_devices(h)


async def test_a_gang_of_gpu_pods_is_placed_all_or_nothing_with_distinct_devices() -> None:
    h = Harness()
    nodes(h, 2)
    h.apply(
        device_class(),
        gpus(1, "n0"),
        gpus(1, "n1"),
        template(),
        {
            "apiVersion": "kubesched.dev/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "train", "namespace": "default"},
            "spec": {"minMember": 3},
        },
    )
    members = []
    for i in range(3):
        pod = gpu_pod(f"m{i}")
        pod["metadata"]["labels"] = {"kubesched.dev/pod-group": "train"}
        members.append(f"default/m{i}")
        h.apply(pod)
    async with running(h):
        await h.wait_for(lambda: all(failed_messages(h, m) for m in members))
        assert not h.cluster.bindings  # two GPUs for three members: none is bound
        assert not allocated_devices(h)
        assert "2/3 members fit" in failed_messages(h, members[0])[-1]
        # a third GPU arrives: the whole gang goes, one device each (nothing was left
        # in flight by the failed attempts)
        h.apply(gpus(1, "n2"), make_node("n2").alloc(cpu="8", memory="16Gi", pods="110").obj())
        await h.wait_for(lambda: len(h.cluster.bindings) == 3, within=120)
    devices = allocated_devices(h)
    assert len(devices) == 3 and len({(p, d) for p, d, _ in devices}) == 3


async def test_a_pod_waits_for_its_template_then_schedules() -> None:
    h = Harness()
    nodes(h, 1)
    h.apply(device_class(), gpus(1, "n0"), gpu_pod("p"))
    async with running(h):
        await asyncio.sleep(10)
        assert h.node_of("default/p") is None
        assert "ResourceClaim" not in h.cluster.objects  # no template, no claim
        h.apply(template())
        await h.wait_for(lambda: h.node_of("default/p") == "n0")
    pod = h.cluster.pod("default/p")
    assert pod is not None
    (status,) = pod["status"]["resourceClaimStatuses"]
    stored = h.cluster.objects["ResourceClaim"][f"default/{status['resourceClaimName']}"]
    assert stored["metadata"]["ownerReferences"][0]["uid"] == "p"
    assert stored["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "p"}]


async def test_preemption_does_not_free_devices_as_in_kube() -> None:
    """kube-scheduler 1.37's DynamicResources rejects a node whose claims cannot be
    allocated as UnschedulableAndUnresolvable, so DefaultPreemption never evaluates it:
    a high-priority pod does not evict the low-priority holder of the only GPU."""
    h = Harness()
    nodes(h, 1)
    h.apply(
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "high"},
            "value": 1000,
        },
        device_class(),
        gpus(1, "n0"),
        template(),
        gpu_pod("low"),
    )
    async with running(h):
        await h.wait_for(lambda: h.node_of("default/low") == "n0")
        high = gpu_pod("high")
        high["spec"]["priorityClassName"] = "high"
        high["spec"]["priority"] = 1000
        h.apply(high)
        await h.wait_for(lambda: bool(failed_messages(h, "default/high")))
        await asyncio.sleep(5)
    assert failed_messages(h, "default/high")[0] == (
        "0/1 nodes are available: 1 cannot allocate all claims. preemption: 0/1 nodes are "
        "available: 1 Preemption is not helpful for scheduling."
    )
    assert h.node_of("default/low") == "n0"
    assert "Preempted" not in h.reasons("default/low")
