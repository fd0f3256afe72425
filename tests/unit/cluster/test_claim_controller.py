"""The memory cluster's resourceclaim controller: claims from templates, released with
their pod (deleted when owned, deallocated when shared and left unused)."""

from __future__ import annotations

from typing import Any

from kubesched.cluster.memory import MemoryCluster
from tests.builders import make_pod
from tests.unit.plugins.dra_builders import allocated, claim, template


def pod(name: str, **spec: Any) -> dict[str, Any]:
    return make_pod(name).uid(name).spec(**spec).obj()


def templated(name: str) -> dict[str, Any]:
    return pod(name, resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}])


def test_a_pod_gets_a_claim_from_its_template_owned_by_it() -> None:
    m = MemoryCluster()
    m.apply(template())
    stored = m.apply(templated("p"))
    (status,) = stored["status"]["resourceClaimStatuses"]
    assert status["name"] == "gpu"
    name = status["resourceClaimName"]
    assert name.startswith("p-gpu-") and len(name) == len("p-gpu-") + 5
    c = m.get("ResourceClaim", "default", name)
    assert c is not None
    assert c["metadata"]["ownerReferences"][0]["uid"] == "p"
    assert c["metadata"]["annotations"]["resource.kubernetes.io/pod-claim-name"] == "gpu"
    assert c["spec"] == template()["spec"]["spec"]
    # the same pod again (a replay, an update): no second claim
    m.apply(stored)
    assert len(m.objects["ResourceClaim"]) == 1


def test_a_template_arriving_late_serves_the_pods_waiting_for_it() -> None:
    m = MemoryCluster()
    m.apply(templated("p"))
    assert "ResourceClaim" not in m.objects
    m.apply(template())
    p = m.pod("default/p")
    assert p is not None and len(p["status"]["resourceClaimStatuses"]) == 1
    assert len(m.objects["ResourceClaim"]) == 1


def test_an_owned_claim_goes_with_its_pod() -> None:
    m = MemoryCluster()
    m.apply(template())
    m.apply(templated("p"))
    m.delete("Pod", "default/p")
    assert not m.objects["ResourceClaim"]


def test_a_shared_claim_is_deallocated_when_its_last_user_goes() -> None:
    m = MemoryCluster()
    shared = allocated(claim("c"), "n1", "gpu-0", reserved="a")
    shared["status"]["reservedFor"].append({"resource": "pods", "name": "b", "uid": "b"})
    shared["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
    m.apply(shared)
    for name in ("a", "b"):
        m.apply(pod(name, resourceClaims=[{"name": "gpu", "resourceClaimName": "c"}]))
    m.delete("Pod", "default/a")
    c = m.get("ResourceClaim", "default", "c")
    assert c is not None and [r["uid"] for r in c["status"]["reservedFor"]] == ["b"]
    assert c["status"]["allocation"]
    m.delete("Pod", "default/b")
    c = m.get("ResourceClaim", "default", "c")
    assert c is not None
    assert "allocation" not in c["status"] and "reservedFor" not in c["status"]
    assert "finalizers" not in c["metadata"]


def upstream_group(name: str = "train", **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {
            "schedulingPolicy": {"gang": {"minCount": 2}},
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
            **extra,
        },
    }


def member(name: str) -> dict[str, Any]:
    p = templated(name)
    p["spec"]["schedulingGroup"] = {"podGroupName": "train"}
    return p


def test_a_pod_group_claim_is_made_once_and_named_in_every_members_status() -> None:
    m = MemoryCluster()
    m.apply(template())
    group = m.apply(upstream_group())
    ((_, c),) = m.objects["ResourceClaim"].items()
    name = c["metadata"]["name"]
    assert name.startswith("train-gpu-") and len(name) == len("train-gpu-") + 5
    (ref,) = c["metadata"]["ownerReferences"]
    assert (ref["apiVersion"], ref["kind"], ref["uid"]) == (
        "scheduling.k8s.io/v1beta1",
        "PodGroup",
        "uid-train",
    )
    assert group["status"]["resourceClaimStatuses"] == [{"name": "gpu", "resourceClaimName": name}]
    for p in ("a", "b"):
        stored = m.apply(member(p))
        assert stored["status"]["resourceClaimStatuses"] == [
            {"name": "gpu", "resourceClaimName": name}
        ]
    assert len(m.objects["ResourceClaim"]) == 1
    # a pod outside the group (same claim entry) still gets its own claim
    m.apply(templated("loner"))
    assert len(m.objects["ResourceClaim"]) == 2


def test_members_created_before_their_pod_group_wait_then_get_its_claim() -> None:
    m = MemoryCluster()
    m.apply(template())
    m.apply(member("a"))
    assert "ResourceClaim" not in m.objects or not m.objects["ResourceClaim"]
    m.apply(upstream_group())
    ((_, c),) = m.objects["ResourceClaim"].items()
    pod_status = m.objects["Pod"]["default/a"]["status"]["resourceClaimStatuses"]
    assert pod_status == [{"name": "gpu", "resourceClaimName": c["metadata"]["name"]}]
