"""KubeCluster's ResourceClaim writes (DynamicResources' PreBind, Unreserve, PostFilter)
against a fake API server: the requests kube-scheduler 1.37 makes, retries on conflict,
and its error texts."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from kubesched.cluster.kube import KubeCluster
from kubesched.cluster.kube_claims import CONFLICT_STEPS, FINALIZER
from kubesched.framework.cluster_port import ClusterError, Conflict, NotFound
from tests.builders import make_pod
from tests.unit.cluster.test_kube import FakeAPI, fake

__all__ = ["fake"]

PATH = "/apis/resource.k8s.io/v1/namespaces/shop/resourceclaims/gpu"
ALLOCATION = {
    "devices": {
        "results": [
            {"request": "gpu", "driver": "gpu.example.com", "pool": "node-1", "device": "gpu-3"}
        ]
    },
    "nodeSelector": {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
        ]
    },
}
POD_REF = {"resource": "pods", "name": "web-1", "uid": "pod-uid"}
CONFLICT: dict[str, Any] = {
    "kind": "Status",
    "status": "Failure",
    "reason": "Conflict",
    "code": 409,
    "message": 'Operation cannot be fulfilled on resourceclaims.resource.k8s.io "gpu": the '
    "object has been modified; please apply your changes to the latest version and try again",
}


def claim(rv: str = "7", **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "gpu", "namespace": "shop", "uid": "claim-uid", "resourceVersion": rv},
        "spec": {"devices": {"requests": [{"name": "gpu"}]}},
        "status": status,
    }


def with_finalizer(obj: dict[str, Any], rv: str) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    out["metadata"]["finalizers"] = [FINALIZER]
    out["metadata"]["resourceVersion"] = rv
    return out


async def test_allocation_puts_the_finalizer_then_the_status_without_a_read(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    api, cluster = fake
    stored = claim()
    api.reply("PUT", PATH, 200, with_finalizer(stored, "8"))
    api.reply("PUT", PATH + "/status", 200, {**with_finalizer(stored, "9"), "status": {"x": 1}})
    out = await cluster.update_claim_status(stored, ALLOCATION, POD_REF)
    assert [(r.method, r.path) for r in api.requests] == [("PUT", PATH), ("PUT", PATH + "/status")]
    put, put_status = api.requests
    assert put.body["metadata"]["finalizers"] == [FINALIZER]
    assert put.body["metadata"]["resourceVersion"] == "7"  # the store's version: guarded
    assert put_status.body["metadata"]["resourceVersion"] == "8"  # what the first PUT returned
    assert put_status.body["status"] == {
        "allocation": {**ALLOCATION, "allocationTimestamp": "2025-03-04T05:06:07Z"},
        "reservedFor": [POD_REF],
    }
    assert out["status"] == {"x": 1}
    assert stored["status"] == {} and "finalizers" not in stored["metadata"]  # not mutated


async def test_a_conflict_rereads_the_claim_and_tries_again(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    api, cluster = fake
    stored = with_finalizer(claim(), "7")
    api.reply("PUT", PATH + "/status", 409, CONFLICT)
    api.reply(
        "GET",
        PATH,
        200,
        {
            **with_finalizer(claim(), "11"),
            "metadata": {**with_finalizer(claim(), "11")["metadata"], "labels": {"new": "label"}},
        },
    )
    api.reply("PUT", PATH + "/status", 200, with_finalizer(claim(), "12"))
    await cluster.update_claim_status(stored, ALLOCATION, POD_REF)
    assert [(r.method, r.path) for r in api.requests] == [
        ("PUT", PATH + "/status"),
        ("GET", PATH),
        ("PUT", PATH + "/status"),
    ]
    retry = api.requests[2].body
    assert retry["metadata"]["resourceVersion"] == "11"
    assert retry["metadata"]["labels"] == {"new": "label"}
    assert retry["status"]["reservedFor"] == [POD_REF]  # once, not once per attempt


async def test_a_claim_allocated_meanwhile_is_not_overwritten(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    api, cluster = fake
    api.reply("PUT", PATH + "/status", 409, CONFLICT)
    other = {**ALLOCATION, "devices": {"results": []}}
    api.reply("GET", PATH, 200, with_finalizer(claim("12", allocation=other), "12"))
    with pytest.raises(Conflict) as err:
        await cluster.update_claim_status(with_finalizer(claim(), "7"), ALLOCATION, POD_REF)
    assert str(err.value) == "claim shop/gpu got allocated elsewhere in the meantime"
    assert [r.method for r in api.requests] == ["PUT", "GET"]  # nothing written after


async def test_conflicts_give_up_after_five_attempts_with_kube_schedulers_words(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    api, cluster = fake
    for _ in range(CONFLICT_STEPS):
        api.reply("PUT", PATH + "/status", 409, CONFLICT)
        api.reply("GET", PATH, 200, with_finalizer(claim(), "7"))
    with pytest.raises(Conflict) as err:
        await cluster.update_claim_status(with_finalizer(claim(), "7"), ALLOCATION, POD_REF)
    assert str(err.value) == (
        "add allocation and reservation to claim shop/gpu: " + CONFLICT["message"]
    )
    assert [r.method for r in api.requests].count("PUT") == CONFLICT_STEPS == 5


async def test_a_reservation_of_an_allocated_claim_is_one_status_update(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    api, cluster = fake
    allocated = {**ALLOCATION, "allocationTimestamp": "2025-01-01T00:00:00Z"}
    first = {"resource": "pods", "name": "web-0", "uid": "first"}
    stored = with_finalizer(claim(allocation=allocated, reservedFor=[first]), "7")
    api.reply("PUT", PATH + "/status", 200, stored)
    await cluster.update_claim_status(stored, None, POD_REF)
    (put,) = api.requests
    assert put.path == PATH + "/status"
    assert put.body["status"] == {"allocation": allocated, "reservedFor": [first, POD_REF]}


async def test_reserving_a_deallocated_or_deleted_claim_is_a_conflict(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    api, cluster = fake
    with pytest.raises(Conflict, match=r"^claim shop/gpu got deallocated elsewhere in the"):
        await cluster.update_claim_status(claim(), None, POD_REF)
    deleted = claim()
    deleted["metadata"]["deletionTimestamp"] = "2025-03-04T05:00:00Z"
    with pytest.raises(Conflict, match=r"^claim shop/gpu got deleted in the meantime$"):
        await cluster.update_claim_status(deleted, ALLOCATION, POD_REF)
    assert api.requests == []


async def test_other_errors_are_not_retried_and_keep_their_class(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    api, cluster = fake
    api.reply("PUT", PATH, 404, {"kind": "Status", "message": 'resourceclaims "gpu" not found'})
    with pytest.raises(NotFound) as gone:
        await cluster.update_claim_status(claim(), ALLOCATION, POD_REF)
    assert str(gone.value) == 'add finalizer to claim shop/gpu: resourceclaims "gpu" not found'
    forbidden = (
        'ResourceClaim.resource.k8s.io "gpu" is invalid: status: Forbidden: changing '
        'status.allocation or status.reservedFor requires resource="resourceclaims/binding"'
    )
    api.reply("PUT", PATH + "/status", 422, {"kind": "Status", "message": forbidden})
    with pytest.raises(ClusterError) as refused:
        await cluster.update_claim_status(with_finalizer(claim(), "7"), ALLOCATION, POD_REF)
    assert str(refused.value) == f"add allocation and reservation to claim shop/gpu: {forbidden}"
    assert (refused.value.code, refused.value.retryable) == ("422", False)
    api.reply("PUT", PATH + "/status", 503, {"kind": "Status", "message": "etcd is down"})
    with pytest.raises(ClusterError) as busy:
        await cluster.update_claim_status(
            with_finalizer(claim(allocation=ALLOCATION), "7"), None, POD_REF
        )
    assert str(busy.value) == "add reservation to claim shop/gpu: etcd is down"
    assert busy.value.retryable
    assert len(api.requests) == 3


async def test_unreserve_patches_the_pod_out_and_deallocate_clears_the_status(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    api, cluster = fake
    stored = with_finalizer(claim(allocation=ALLOCATION, reservedFor=[POD_REF]), "7")
    await cluster.unreserve_claim(stored, "pod-uid")
    await cluster.deallocate_claim(stored)
    patch, put = api.requests
    assert (patch.method, patch.path, patch.content_type) == (
        "PATCH",
        PATH + "/status",
        "application/strategic-merge-patch+json",
    )
    assert patch.body == {
        "metadata": {"uid": "claim-uid"},
        "status": {"reservedFor": [{"$patch": "delete", "uid": "pod-uid"}]},
    }
    assert (put.method, put.path) == ("PUT", PATH + "/status")
    assert put.body["metadata"]["resourceVersion"] == "7"
    assert put.body["status"] == {}
    assert stored["status"]["reservedFor"] == [POD_REF]


# -- extended resources backed by DRA: the claim PreBind creates, and its deletion ----------------
COLLECTION = "/apis/resource.k8s.io/v1/namespaces/shop/resourceclaims"


async def test_create_posts_the_claim_and_says_what_failed(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    api, cluster = fake
    body = {"metadata": {"namespace": "shop", "generateName": "web-1-extended-resources-"}}
    api.reply("POST", COLLECTION, 201, {**body, "metadata": {**body["metadata"], "name": "x"}})
    got = await cluster.create_claim(body)
    assert got["metadata"]["name"] == "x"
    (post,) = api.requests
    assert (post.method, post.path, post.body) == ("POST", COLLECTION, body)
    denied = 'resourceclaims.resource.k8s.io is forbidden: User "s" cannot create resource'
    api.reply("POST", COLLECTION, 403, {"kind": "Status", "message": denied})
    with pytest.raises(ClusterError) as refused:
        await cluster.create_claim(body)
    assert str(refused.value) == f"create claim for extended resources shop/: {denied}"


async def test_delete_takes_the_finalizer_off_first_then_deletes(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    api, cluster = fake
    stored = with_finalizer(claim(), "7")
    api.reply("PUT", PATH, 409, CONFLICT)
    api.reply("GET", PATH, 200, with_finalizer(claim(), "8"))
    await cluster.delete_claim(stored)
    assert [(r.method, r.path) for r in api.requests] == [
        ("PUT", PATH),
        ("GET", PATH),
        ("PUT", PATH),
        ("DELETE", PATH),
    ]
    assert api.requests[2].body["metadata"]["finalizers"] == []
    assert api.requests[2].body["metadata"]["resourceVersion"] == "8"


async def test_delete_of_a_claim_without_finalizer_or_already_gone(
    fake: tuple[FakeAPI, KubeCluster],
) -> None:
    api, cluster = fake
    api.reply("DELETE", PATH, 404, {"kind": "Status", "message": 'resourceclaims "gpu" not found'})
    await cluster.delete_claim(claim())
    assert [(r.method, r.path) for r in api.requests] == [("DELETE", PATH)]


async def test_the_pod_status_patch_names_the_claim(fake: tuple[FakeAPI, KubeCluster]) -> None:
    api, cluster = fake
    pod = make_pod("web-1", "shop").pod()
    status = {
        "requestMappings": [
            {"containerName": "c", "resourceName": "example.com/gpu", "requestName": "r"}
        ],
        "resourceClaimName": "x",
    }
    await cluster.set_extended_resource_claim_status(pod, status)
    (patch,) = api.requests
    assert (patch.method, patch.path, patch.content_type) == (
        "PATCH",
        "/api/v1/namespaces/shop/pods/web-1/status",
        "application/strategic-merge-patch+json",
    )
    assert patch.body == {"status": {"extendedResourceClaimStatus": status}}
    api.reply("PATCH", "/api/v1/namespaces/shop/pods/web-1/status", 404, {"message": "gone"})
    with pytest.raises(NotFound) as gone:
        await cluster.set_extended_resource_claim_status(pod, status)
    assert str(gone.value) == "update pod shop/web-1 ExtendedResourceClaimStatus: gone"
