"""The DRA workload on a real API server: where its objects go, and on a cluster the
bench does not own, slices tied to the run's own nodes."""

from __future__ import annotations

from kubesched.bench import dra
from kubesched.bench.cluster import ClusterDriver
from kubesched.simulator.workloads import plan

WORKLOAD = "SchedulingWithResourceClaimTemplate"


def _by_kind(objects: list[dict[str, object]]) -> dict[str, dict[str, object]]:
    return {str(o["kind"]): o for o in objects}


def test_objects_go_to_resource_k8s_io_v1_cluster_scoped_or_in_the_run_namespace() -> None:
    driver = ClusterDriver(None, "bench-ns", "kubesched-bench", None)  # type: ignore[arg-type]
    p = plan(WORKLOAD, 2, 4)
    paths = {o["kind"]: driver._path(driver.localize(o)) for o in p.setup}
    assert paths == {
        "DeviceClass": "/apis/resource.k8s.io/v1/deviceclasses",
        "ResourceClaimTemplate": "/apis/resource.k8s.io/v1/namespaces/bench-ns/resourceclaimtemplates",
        "ResourceSlice": "/apis/resource.k8s.io/v1/resourceslices",
    }
    slice_ = driver.localize(p.setup[-1])
    assert "namespace" not in slice_["metadata"]
    assert slice_["spec"]["nodeName"] == "scheduler-perf-1"
    assert driver.localize(p.setup[1])["metadata"]["namespace"] == "bench-ns"
    assert dra.needs_claim_controller(p.setup)
    assert not dra.needs_claim_controller(plan("SchedulingBasic", 2, 4).setup)


def test_on_a_shared_cluster_slices_belong_to_the_runs_nodes_and_pools() -> None:
    driver = ClusterDriver(None, "bench-ns", "kubesched-bench", "r1")  # type: ignore[arg-type]
    p = plan(WORKLOAD, 2, 4)
    (first_slice,) = [o for o in p.setup if o["metadata"]["name"] == "resourceslice-0"]
    local = driver.localize(first_slice)
    node = driver.localize(p.nodes[0])
    assert local["spec"]["nodeName"] == node["metadata"]["name"] == "scheduler-perf-0-r1"
    assert local["metadata"]["name"] == "resourceslice-0-r1"
    assert local["spec"]["pool"]["name"] == "resourceslice-0-r1"
    assert first_slice["spec"]["nodeName"] == "scheduler-perf-0"  # the plan is not changed
    assert driver.localize(_by_kind(p.setup)["DeviceClass"])["metadata"] == {"name": "test-class"}
