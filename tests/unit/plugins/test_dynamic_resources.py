"""DynamicResources at each extension point, with kube-scheduler 1.37's reasons."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesched.cluster.memory import MemoryCluster
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ActionType, EventResource
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.plugins import dynamic_resources as dr
from tests.builders import make_node, make_pod
from tests.unit.dra.builders import device, exactly, slice_
from tests.unit.plugins.dra_builders import (
    DraHandle,
    allocated,
    claim,
    device_class,
    gpus,
    kind,
    pod_with,
    template,
)

NODES = [make_node("n1").info(), make_node("n2").info()]


def plugin(*objs: dict[str, Any]) -> tuple[dr.DynamicResources, MemoryCluster]:
    memory = MemoryCluster()
    for o in objs:
        memory.apply(o)
    return dr.new(dr.Args(), DraHandle(Snapshot(NODES), memory)), memory


def unresolvable(msg: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, msg, plugin=dr.NAME)


def run_filter(
    pl: dr.DynamicResources, pod: Pod
) -> tuple[CycleState, Status | None, dict[str, Status | None]]:
    state = CycleState()
    _, s = pl.pre_filter(state, pod, NODES)
    if s is not None:
        return state, s, {}
    return state, None, {ni.name: pl.filter(state, pod, ni) for ni in NODES}


OWNED_BY_OTHER = {
    **claim("p-gpu-x"),
    "metadata": {
        "name": "p-gpu-x",
        "namespace": "default",
        "uid": "c1",
        "ownerReferences": [{"kind": "Pod", "name": "q", "uid": "q", "controller": True}],
    },
}


def _template_pod_with_status(claim_name: str) -> Pod:
    return Pod(
        {
            **pod_with(templates=("one-gpu",)).raw,
            "status": {
                "resourceClaimStatuses": [{"name": "t-one-gpu", "resourceClaimName": claim_name}]
            },
        }
    )


@pytest.mark.parametrize(
    ("objs", "pod", "reason"),
    [
        pytest.param(
            [],
            pod_with(templates=("one-gpu",)),
            'pod "default/p": ResourceClaim not created yet',
            id="template-claim-not-created",
        ),
        pytest.param(
            [], pod_with("c"), 'could not find ResourceClaim "default/c"', id="claim-missing"
        ),
        pytest.param(
            [{**claim("c"), "metadata": {**claim("c")["metadata"], "deletionTimestamp": "x"}}],
            pod_with("c"),
            'resourceclaim "c" is being deleted',
            id="claim-being-deleted",
        ),
        pytest.param(
            [OWNED_BY_OTHER],
            _template_pod_with_status("p-gpu-x"),
            "ResourceClaim default/p-gpu-x was not created for Pod default/p (Pod is not owner)",
            id="template-claim-of-another-pod",
        ),
    ],
)
def test_pre_enqueue_and_pre_filter_wait_for_the_claims(
    objs: list[dict[str, Any]], pod: Pod, reason: str
) -> None:
    pl, _ = plugin(*objs)
    assert pl.pre_enqueue(pod) == unresolvable(reason)
    assert run_filter(pl, pod)[1] == unresolvable(reason)


def test_pods_without_claims_pass_everything() -> None:
    pl, _ = plugin()
    pod = make_pod("plain").pod()
    state = CycleState()
    assert pl.pre_enqueue(pod) is None
    assert pl.pre_filter(state, pod, NODES)[1] == Status.skip()
    assert pl.post_filter(state, pod, {}) == (None, Status.unschedulable())
    assert pl.reserve(state, pod, "n1") is None
    assert pl.sign_pod(pod) == ([], None)


def test_a_template_claim_created_by_the_controller_is_found() -> None:
    pl, memory = plugin(device_class(), gpus(1, "n1"), template())
    raw = (
        make_pod("p")
        .uid("p")
        .spec(resourceClaims=[{"name": "g", "resourceClaimTemplateName": "one-gpu"}])
    )
    stored = memory.apply(raw.obj())
    pod = Pod(stored)
    assert pod.raw["status"]["resourceClaimStatuses"][0]["name"] == "g"
    assert pl.pre_enqueue(pod) is None
    _, status, by_node = run_filter(pl, pod)
    assert status is None
    assert by_node == {"n1": None, "n2": unresolvable("cannot allocate all claims")}


@pytest.mark.parametrize(
    ("objs", "expected"),
    [
        pytest.param(
            [gpus(1, "n1"), claim("c")],
            unresolvable("request req: device class gpu does not exist"),
            id="missing-class",
        ),
        pytest.param(
            [device_class(), gpus(1, "n1"), claim("c", exactly(cls=""))],
            Status.as_error(
                "resourceclaim default/c: spec.devices.requests[0].exactly.deviceClassName: "
                "required",
                plugin=dr.NAME,
            ),
            id="malformed-claim-names-the-field",
        ),
    ],
)
def test_pre_filter_refuses_claims_it_cannot_allocate(
    objs: list[dict[str, Any]], expected: Status
) -> None:
    pl, _ = plugin(*objs)
    assert run_filter(pl, pod_with("c"))[1] == expected


def test_filter_per_node() -> None:
    pl, _ = plugin(device_class(), gpus(2, "n1"), claim("c", exactly(count=2)))
    assert run_filter(pl, pod_with("c"))[2] == {
        "n1": None,
        "n2": unresolvable("cannot allocate all claims"),
    }


def test_a_selector_failing_at_runtime_is_an_error_naming_the_cel_problem() -> None:
    # gpu-0 has no "memory" attribute: evaluating the selector on it fails
    sl = kind(
        "ResourceSlice",
        slice_("s", [device("gpu-0"), device("gpu-1", memory=80)], node="n1"),
    )
    sel = 'device.attributes["gpu.example.com"].memory >= 40'
    pl, _ = plugin(device_class(), sl, claim("c", exactly(selectors=[sel])))
    status = run_filter(pl, pod_with("c"))[2]["n1"]
    assert status is not None and status.code == Code.ERROR
    assert "memory" in status.message() and "claim default/c" in status.message()


def test_a_selector_that_does_not_compile_is_an_error_on_every_node_with_devices() -> None:
    pl, _ = plugin(
        device_class(), gpus(1, "n1"), claim("c", exactly(selectors=["device.driver =="]))
    )
    status = run_filter(pl, pod_with("c"))[2]["n1"]
    assert status is not None and status.code == Code.ERROR
    assert "compilation failed" in status.message()


def test_duplicate_device_names_make_the_pool_invalid() -> None:
    a = kind("ResourceSlice", slice_("a", [device("gpu-0")], node="n1", count=2))
    b2 = kind("ResourceSlice", slice_("b", [device("gpu-0")], node="n1", count=2))
    pl, _ = plugin(device_class(), a, b2, claim("c"))
    assert run_filter(pl, pod_with("c"))[2]["n1"] == unresolvable(
        "invalid resource pools were encountered"
    )


def test_an_allocated_claim_is_available_only_where_it_was_allocated() -> None:
    c = allocated(claim("c"), "n1", "gpu-0")
    pl, _ = plugin(device_class(), gpus(1, "n1"), c)
    _, status, by_node = run_filter(pl, pod_with("c"))
    assert status is None
    assert by_node == {"n1": None, "n2": unresolvable(dr.ERR_NOT_AVAILABLE)}


def test_a_device_allocated_to_another_claim_is_not_allocated_again() -> None:
    other = allocated(claim("other"), "n1", "gpu-0", reserved="q")
    pl, _ = plugin(device_class(), gpus(1, "n1"), other, claim("c"))
    assert run_filter(pl, pod_with("c"))[2]["n1"] == unresolvable("cannot allocate all claims")


async def test_reserve_holds_the_devices_until_unreserve() -> None:
    pl, _ = plugin(device_class(), gpus(1, "n1"), claim("a"), claim("b"))
    first, second = pod_with("a", name="p1"), pod_with("b", name="p2")
    state, _, by_node = run_filter(pl, first)
    assert by_node["n1"] is None
    assert pl.reserve(state, first, "n1") is None
    assert run_filter(pl, second)[2]["n1"] == unresolvable("cannot allocate all claims")
    # a claim being allocated for one pod is not allocated again for another
    assert run_filter(pl, pod_with("a", name="p3"))[1] == unresolvable(
        "resource claim default/a is in the process of being allocated"
    )
    pl.unreserve(state, first, "n1")
    assert run_filter(pl, second)[2]["n1"] is None


async def test_pre_bind_writes_allocation_and_reservation() -> None:
    pl, memory = plugin(device_class(), gpus(1, "n1"), claim("c"))
    pod = pod_with("c")
    state, _, _ = run_filter(pl, pod)
    assert pl.reserve(state, pod, "n1") is None
    assert await pl.pre_bind(state, pod, "n1") is None
    stored = memory.get("ResourceClaim", "default", "c")
    assert stored is not None
    assert stored["status"]["allocation"]["devices"]["results"] == [
        {"request": "req", "driver": "gpu.example.com", "pool": "n1", "device": "gpu-0"}
    ]
    assert stored["status"]["reservedFor"] == [{"resource": "pods", "name": "p", "uid": "p"}]
    assert stored["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
    assert not pl.tracker.pending
    # the allocation is now the claim's: a second claim finds no device
    memory.apply(claim("c2"))
    assert run_filter(pl, pod_with("c2", name="p2"))[2]["n1"] == unresolvable(
        "cannot allocate all claims"
    )


def test_pre_bind_pre_flight_says_prebind_has_work_for_a_pod_with_claims() -> None:
    # kube's PreBindPreFlight: Success with claims (their status is written at PreBind),
    # Skip without (the binding cycle then sets no nominatedNodeName for it)
    pl, _ = plugin(device_class(), gpus(1, "n1"), claim("c"))
    pod = pod_with("c")
    state, _, _ = run_filter(pl, pod)
    assert pl.pre_bind_pre_flight(state, pod, "n1") is None
    plain = make_pod("plain").pod()
    st = pl.pre_bind_pre_flight(CycleState(), plain, "n1")
    assert st is not None and st.code == Code.SKIP


async def test_pre_bind_of_a_claim_allocated_elsewhere_meanwhile_is_an_error() -> None:
    pl, memory = plugin(device_class(), gpus(2, "n1"), claim("c"))
    pod = pod_with("c")
    state, _, _ = run_filter(pl, pod)
    assert pl.reserve(state, pod, "n1") is None
    memory.apply(allocated(claim("c"), "n1", "gpu-1", reserved="q"))
    status = await pl.pre_bind(state, pod, "n1")
    assert status is not None and status.code == Code.ERROR
    assert status.message() == "claim default/c got allocated elsewhere in the meantime"
    pl.unreserve(state, pod, "n1")
    assert not pl.tracker.pending
    stored = memory.get("ResourceClaim", "default", "c")
    assert stored is not None
    assert stored["status"]["allocation"]["devices"]["results"][0]["device"] == "gpu-1"


async def test_post_filter_deallocates_a_claim_reserved_for_nobody() -> None:
    c = allocated(claim("c"), "n2", "gpu-0")
    pl, memory = plugin(device_class(), gpus(1, "n2"), c)
    pod = pod_with("c")
    only_n1 = [NODES[0]]
    state = CycleState()
    assert pl.pre_filter(state, pod, only_n1)[1] is None
    assert pl.filter(state, pod, NODES[0]) == unresolvable(dr.ERR_NOT_AVAILABLE)
    assert pl.post_filter(state, pod, {}) == (
        None,
        Status.unschedulable("deallocation of ResourceClaim completed", plugin=dr.NAME),
    )
    await asyncio.sleep(0)
    stored = memory.get("ResourceClaim", "default", "c")
    assert stored is not None and "allocation" not in stored["status"]


async def test_post_filter_keeps_a_claim_another_pod_uses() -> None:
    c = allocated(claim("c"), "n2", "gpu-0", reserved="q")
    pl, memory = plugin(device_class(), gpus(1, "n2"), c)
    pod = pod_with("c")
    state = CycleState()
    pl.pre_filter(state, pod, NODES)
    pl.filter(state, pod, NODES[0])
    assert pl.post_filter(state, pod, {}) == (None, Status.unschedulable())
    await asyncio.sleep(0)
    stored = memory.get("ResourceClaim", "default", "c")
    assert stored is not None and stored["status"]["allocation"]


def test_score_prefers_the_first_available_subrequest() -> None:
    big = kind("ResourceSlice", slice_("big", [device("g", size=2)], node="n1"))
    small = kind("ResourceSlice", slice_("small", [device("g", size=1)], node="n2"))
    req = {
        "name": "req",
        "firstAvailable": [
            {
                "name": "large",
                "deviceClassName": "gpu",
                "selectors": [
                    {"cel": {"expression": 'device.attributes["gpu.example.com"].size == 2'}}
                ],
            },
            {"name": "any", "deviceClassName": "gpu"},
        ],
    }
    pl, _ = plugin(device_class(), big, small, claim("c", req))
    pod = pod_with("c")
    state, _, by_node = run_filter(pl, pod)
    assert by_node == {"n1": None, "n2": None}
    assert pl.score(state, pod, NODES[0]) == (8, None)
    assert pl.score(state, pod, NODES[1]) == (7, None)


def test_claim_events_requeue_only_the_pods_they_concern() -> None:
    pl, _ = plugin(claim("c"))
    pod = pod_with("c")
    c = claim("c")
    unrelated = claim("other")
    assert pl._claim_changed(pod, None, c) is True  # created
    assert pl._claim_changed(pod, None, unrelated) is False
    assert pl._claim_changed(pod, c, c) is False  # nothing in status changed
    freed = allocated(claim("other"), "n1", "gpu-0")
    assert pl._claim_changed(pod, freed, unrelated) is True  # deallocated: devices freed
    assert pl._claim_changed(pod, freed, None) is True
    assert pl._claim_changed(pod, unrelated, None) is False


def test_pods_with_claims_are_not_batched() -> None:
    pl, _ = plugin()
    assert pl.sign_pod(pod_with("c")) == (
        [],
        Status.unschedulable("pods with dra resource claims are not signable"),
    )


def test_explain_says_which_request_a_node_cannot_satisfy_and_why() -> None:
    other = allocated(claim("other"), "n1", "gpu-0", reserved="q")
    pl, _ = plugin(device_class(), gpus(2, "n1"), other, claim("c", exactly(count=2)))
    pod = pod_with("c")
    state, _, by_node = run_filter(pl, pod)
    assert by_node["n1"] == unresolvable("cannot allocate all claims")
    assert pl.explain_filter(state, pod, NODES[0]) == [
        "claim default/c, request req: wants 2 of class gpu; the node has 2 device(s): "
        "0 not selected, 1 in use, 0 with a taint not tolerated, 1 free"
    ]
    assert pl.explain_filter(state, pod, NODES[1]) == [
        "claim default/c, request req: wants 2 of class gpu; the node has 0 device(s): "
        "0 not selected, 0 in use, 0 with a taint not tolerated, 0 free"
    ]


def test_explain_points_at_constraints_when_each_request_fits_alone() -> None:
    sl = kind("ResourceSlice", slice_("s", [device("a", numa=0), device("b", numa=1)], node="n1"))
    c = claim(
        "c",
        exactly("x"),
        exactly("y"),
        constraints=[{"matchAttribute": "gpu.example.com/numa"}],
    )
    pl, _ = plugin(device_class(), sl, c)
    pod = pod_with("c")
    state, _, by_node = run_filter(pl, pod)
    assert by_node["n1"] == unresolvable("cannot allocate all claims")
    assert pl.explain_filter(state, pod, NODES[0]) == [
        "claim default/c: its requests fit one by one but not together (constraints or too "
        "few devices for all of them)"
    ]


def test_profiles_reading_one_store_share_the_in_flight_allocations() -> None:
    memory = MemoryCluster()
    for o in (device_class(), gpus(1, "n1"), claim("a"), claim("b")):
        memory.apply(o)
    one = dr.new(dr.Args(), DraHandle(Snapshot(NODES), memory))
    other = dr.new(dr.Args(), DraHandle(Snapshot(NODES), memory))
    first = pod_with("a", name="p1")
    state, _, by_node = run_filter(one, first)
    assert by_node["n1"] is None
    assert one.reserve(state, first, "n1") is None
    assert run_filter(other, pod_with("b", name="p2"))[2]["n1"] == unresolvable(
        "cannot allocate all claims"
    )


def test_post_filter_without_pre_filter_state_ends_the_phase_as_kube_does() -> None:
    pl, _ = plugin()
    # kube's getStateData error, an Error status: it ends PostFilter (preemption is not
    # tried) and its text joins the pod's message; the attempt stays Unschedulable
    assert pl.post_filter(CycleState(), make_pod("p").pod(), {}) == (
        None,
        Status.as_error("not found", plugin="DynamicResources"),
    )


async def test_a_bound_claim_deleted_later_frees_its_device() -> None:
    pl, memory = plugin(device_class(), gpus(1, "n1"), claim("c"), claim("d"))
    pod = pod_with("c")
    state, _, _ = run_filter(pl, pod)
    assert pl.reserve(state, pod, "n1") is None
    assert await pl.pre_bind(state, pod, "n1") is None
    # a watch lagging behind our write: the tracker serves the claim as written
    written = memory.get("ResourceClaim", "default", "c")
    assert written is not None
    pl.tracker.assume({**written, "metadata": {**written["metadata"], "resourceVersion": "99999"}})
    other = pod_with("d", name="p2")
    assert run_filter(pl, other)[2]["n1"] == unresolvable("cannot allocate all claims")
    memory.delete("ResourceClaim", "default/c")
    assert run_filter(pl, other)[2]["n1"] is None


def test_the_pods_own_update_requeues_it_once_its_generated_claims_can_be_found() -> None:
    """kube's TargetPod hint: the pod's status names the claim made from its template, and
    that claim, made for this pod, is in the store."""
    pl, memory = plugin()
    waiting = pod_with(templates=("one-gpu",))
    raw = dict(waiting.raw)
    named = Pod(
        {
            **raw,
            "status": {"resourceClaimStatuses": [{"name": "t-one-gpu", "resourceClaimName": "g"}]},
        }
    )
    assert pl._own_claims_named(named, waiting, named) is False  # the claim is not made yet
    made = claim("g")
    made["metadata"]["ownerReferences"] = [
        {"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "p", "controller": True}
    ]
    memory.apply(made)
    assert pl._own_claims_named(waiting, waiting, waiting) is False  # its status names none
    assert pl._own_claims_named(named, waiting, named) is True
    (reg,) = [
        r for r in pl.events_to_register() if r.event.resource is EventResource.UNSCHEDULED_POD
    ]
    assert reg.event.action == ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM
