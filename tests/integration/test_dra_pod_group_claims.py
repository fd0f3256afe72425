"""PodGroup-level ResourceClaims (``scheduling.k8s.io/v1beta1`` PodGroup
``spec.resourceClaims``) on the in-memory cluster in virtual time: the controller makes
one claim for the PodGroup and the members use it; the gang is placed all-or-nothing with
the claim allocated once, reserved for the PodGroup."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from kubesched.api.gangs import STORE_KINDS, GangAPI
from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running
from tests.unit.dra.builders import device, slice_
from tests.unit.plugins.dra_builders import device_class, gpus, kind, template

pytestmark = pytest.mark.looptime

PG_KIND = STORE_KINDS[GangAPI.UPSTREAM]
CLAIM = {"name": "fabric", "resourceClaimTemplateName": "one-gpu"}


def pod_group(name: str, n: int, *claims: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {"schedulingPolicy": {"gang": {"minCount": n}}}
    if claims:
        spec["resourceClaims"] = list(claims)
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": spec,
    }


def member(name: str, group: str, cpu: str = "3", claim: Mapping[str, Any] = CLAIM) -> Any:
    pod = make_pod(name).uid(name).req(cpu=cpu).spec(resourceClaims=[dict(claim)]).obj()
    pod["spec"]["schedulingGroup"] = {"podGroupName": group}
    return pod


def shared_device(*nodes: str) -> dict[str, Any]:
    """One device reachable from ``nodes`` (a slice with a node selector)."""
    selector = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": list(nodes)}]}
        ]
    }
    return kind(
        "ResourceSlice",
        slice_("fabric", [device("gpu-0")], node=None, pool="fabric", nodeSelector=selector),
    )


def claims(h: Harness) -> dict[str, Mapping[str, Any]]:
    return dict(h.cluster.objects.get("ResourceClaim", {}))


def failed(h: Harness, key: str) -> list[str]:
    return [e.message for e in h.cluster.events_for(key) if e.reason == "FailedScheduling"]


def setup(h: Harness, n_nodes: int) -> None:
    for i in range(n_nodes):
        h.apply(make_node(f"n{i}").alloc(cpu="4", memory="16Gi", pods="110").obj())
    h.apply(device_class(), template())


async def test_members_share_the_pod_group_claim_allocated_once() -> None:
    h = Harness()
    setup(h, 3)
    h.apply(shared_device("n1", "n2"), pod_group("train", 2, CLAIM))
    h.apply(member("train-0", "train"), member("train-1", "train"))
    (name,) = claims(h)
    claim = claims(h)[name]
    assert name.startswith("default/train-fabric-")
    (owner,) = claim["metadata"]["ownerReferences"]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("PodGroup", "train", "uid-train")
    group = h.cluster.objects[PG_KIND]["default/train"]
    short = name.partition("/")[2]
    assert group["status"]["resourceClaimStatuses"] == [
        {"name": "fabric", "resourceClaimName": short}
    ]
    for pod in ("train-0", "train-1"):
        assert h.cluster.objects["Pod"][f"default/{pod}"]["status"]["resourceClaimStatuses"] == [
            {"name": "fabric", "resourceClaimName": short}
        ]
    async with running(h):
        await h.wait_for(lambda: len(h.cluster.bindings) == 2 and not h.sched._tasks)
    # both members on the device's nodes (one each: 3 CPU of 4), sharing its one device
    assert {h.node_of("default/train-0"), h.node_of("default/train-1")} == {"n1", "n2"}
    claim = claims(h)[name]
    assert [r["device"] for r in claim["status"]["allocation"]["devices"]["results"]] == ["gpu-0"]
    assert claim["status"]["reservedFor"] == [
        {
            "apiGroup": "scheduling.k8s.io",
            "resource": "podgroups",
            "name": "train",
            "uid": "uid-train",
        }
    ]
    # the pods going does not release the PodGroup's claim; the PodGroup going deletes it
    h.cluster.delete("Pod", "default/train-0")
    assert name in claims(h)
    h.cluster.delete(PG_KIND, "default/train")
    assert name not in claims(h)


async def test_a_gang_that_does_not_fit_allocates_nothing() -> None:
    """The device reaches one node only, which holds one member: no member is bound and
    the PodGroup's claim stays unallocated (the sibling's in-flight allocation is
    reverted with the gang)."""
    h = Harness()
    setup(h, 3)
    h.apply(shared_device("n1"), pod_group("train", 2, CLAIM))
    h.apply(member("train-0", "train"), member("train-1", "train"))
    async with running(h):
        await h.wait_for(lambda: bool(failed(h, "default/train-1")))
        await asyncio.sleep(1)
    assert h.cluster.bindings == []
    ((_, claim),) = claims(h).items()
    assert not (claim.get("status") or {}).get("allocation")
    # the second member was tried with the first one's allocation: on n1 (taken by the
    # first one) it lacks CPU, the other nodes cannot reach the device
    assert failed(h, "default/train-0")[-1].startswith(
        'pod group "scheduling.k8s.io/default/train": 1/2 members fit; 1 pod: 0/3 nodes are '
        "available: 1 Insufficient cpu, 2 resourceclaim not available on the node."
    )


async def test_pods_without_the_group_claim_keep_their_own() -> None:
    """A member whose claim differs from the PodGroup's (another name) gets a claim of its
    own, reserved for the pod, as before."""
    h = Harness()
    setup(h, 2)
    h.apply(gpus(1, "n0"), gpus(1, "n1"), pod_group("train", 2, CLAIM))
    own = {"name": "gpu", "resourceClaimTemplateName": "one-gpu"}
    h.apply(member("train-0", "train", claim=own), member("train-1", "train", claim=own))
    async with running(h):
        await h.wait_for(lambda: len(h.cluster.bindings) == 2 and not h.sched._tasks)
    owned = sorted(
        (c["metadata"]["ownerReferences"][0]["kind"], c["status"]["reservedFor"][0]["resource"])
        for c in claims(h).values()
        if (c.get("status") or {}).get("allocation")
    )
    assert owned == [("Pod", "pods"), ("Pod", "pods")]


async def test_members_wait_for_the_group_claim_until_its_template_exists() -> None:
    h = Harness()
    for i in range(2):
        h.apply(make_node(f"n{i}").alloc(cpu="4", memory="16Gi", pods="110").obj())
    h.apply(device_class(), shared_device("n0", "n1"), pod_group("train", 2, CLAIM))
    h.apply(member("train-0", "train"), member("train-1", "train"))
    assert claims(h) == {}
    async with running(h):
        await asyncio.sleep(2)
        assert h.cluster.bindings == []
        h.apply(template())
        await h.wait_for(lambda: len(h.cluster.bindings) == 2 and not h.sched._tasks)
    ((_, claim),) = claims(h).items()
    assert [r["name"] for r in claim["status"]["reservedFor"]] == ["train"]


async def test_concurrent_binds_write_the_group_claim_once() -> None:
    """Slow claim writes keep the members' PreBinds in flight together: the allocation is
    written by one, the others find it (no "allocated elsewhere" conflict, no retry)."""
    h = Harness()
    setup(h, 4)
    h.apply(shared_device("n0", "n1", "n2", "n3"), pod_group("train", 3, CLAIM))
    h.apply(*(member(f"train-{i}", "train", cpu="1") for i in range(3)))
    original = h.cluster.update_claim_status
    writes: list[bool] = []

    async def slow_write(
        c: Mapping[str, Any], allocation: Mapping[str, Any] | None, reserved: Mapping[str, Any]
    ) -> Mapping[str, Any]:
        writes.append(allocation is not None)
        await asyncio.sleep(1.0)
        return await original(c, allocation, reserved)

    h.cluster.update_claim_status = slow_write  # type: ignore[method-assign,assignment]
    async with running(h):
        await h.wait_for(lambda: len(h.cluster.bindings) == 3 and not h.sched._tasks)
    assert writes == [True]
    assert all(not failed(h, f"default/train-{i}") for i in range(3))
