"""The structured allocator against kube-scheduler 1.37's choices and messages."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kubesched.framework.dra import (
    AllocatedState,
    AllocationError,
    Allocator,
    CelCache,
    DeviceClass,
    NodeAllocationError,
    ResourceClaim,
    ResourceSlice,
)
from kubesched.framework.dra.types import AllocationResult
from tests.unit.dra.builders import (
    DRIVER,
    Node,
    claim,
    device,
    device_class,
    exactly,
    gpus,
    slice_,
)


def allocate(
    slices: list[dict[str, Any]],
    claims: list[dict[str, Any]],
    classes: list[dict[str, Any]] | None = None,
    in_use: list[str] = (),  # type: ignore[assignment]
    node: Node | None = None,
) -> list[AllocationResult] | None:
    cls = [DeviceClass.from_dict(c) for c in (classes or [device_class()])]
    state = AllocatedState(devices={(DRIVER, "node-1", d) for d in in_use})
    a = Allocator(
        {c.name: c for c in cls},
        [ResourceSlice.from_dict(s) for s in slices],
        state,
        CelCache(),
    )
    return a.allocate(node or Node(), [ResourceClaim.from_dict(c) for c in claims])


def picked(res: list[AllocationResult] | None) -> list[list[str]] | None:
    if res is None:
        return None
    return [[f"{d.request}={d.device}" for d in r.devices] for r in res]


@dataclass
class Case:
    id: str
    slices: list[dict[str, Any]]
    claims: list[dict[str, Any]]
    want: list[list[str]] | None
    classes: list[dict[str, Any]] | None = None
    in_use: list[str] = field(default_factory=list)
    node: Node | None = None


NUMA = [device("gpu-0", numa=0), device("gpu-1", numa=1), device("gpu-2", numa=0)]


def partitioned(*devices: dict[str, Any]) -> list[dict[str, Any]]:
    """A pool of two slices: the counter set, and the partitions consuming it (since
    1.35 a slice holds either shared counters or devices)."""
    counters = [{"name": "gpu-0-counters", "counters": {"memory": {"value": "80Gi"}}}]
    return [
        slice_("counters", [], count=2, sharedCounters=counters),
        slice_("partitions", list(devices), count=2),
    ]


def part(name: str, mem: str, **attrs: Any) -> dict[str, Any]:
    d = device(name, **attrs)
    d["consumesCounters"] = [
        {"counterSet": "gpu-0-counters", "counters": {"memory": {"value": mem}}}
    ]
    return d


def tainted(name: str, effect: str) -> dict[str, Any]:
    d = device(name)
    d["taints"] = [{"key": "broken", "value": "yes", "effect": effect}]
    return d


CASES = [
    Case("first device of eight", [gpus(8)], [claim()], [["req=gpu-0"]]),
    Case(
        "devices in use are skipped",
        [gpus(8)],
        [claim()],
        [["req=gpu-2"]],
        in_use=["gpu-0", "gpu-1"],
    ),
    Case(
        "exact count",
        [gpus(8)],
        [claim("c", exactly(count=3))],
        [["req=gpu-0", "req=gpu-1", "req=gpu-2"]],
    ),
    Case("count beyond the node", [gpus(2)], [claim("c", exactly(count=3))], None),
    Case(
        "two claims get different devices",
        [gpus(2)],
        [claim("a"), claim("b")],
        [["req=gpu-0"], ["req=gpu-1"]],
    ),
    Case(
        "all devices",
        [gpus(3)],
        [claim("c", exactly(allocationMode="All"))],
        [["req=gpu-0", "req=gpu-1", "req=gpu-2"]],
    ),
    Case(
        "all devices, one in use",
        [gpus(3)],
        [claim("c", exactly(allocationMode="All"))],
        None,
        in_use=["gpu-1"],
    ),
    Case(
        "class selector",
        [slice_(devices=[device("gpu-0", model="T4"), device("gpu-1", model="A100")])],
        [claim()],
        [["req=gpu-1"]],
        classes=[device_class("gpu", 'device.attributes["gpu.example.com"].model == "A100"')],
    ),
    Case(
        "request selector, unqualified name in the driver's domain",
        [slice_(devices=[device("gpu-0", model="T4"), device("gpu-1", model="A100")])],
        [claim("c", exactly(selectors=['device.attributes["gpu.example.com"].model == "T4"']))],
        [["req=gpu-0"]],
    ),
    Case(
        "matchAttribute backtracks to a matching pair",
        [slice_(devices=NUMA)],
        [claim("c", exactly(count=2), constraints=[{"matchAttribute": "gpu.example.com/numa"}])],
        [["req=gpu-0", "req=gpu-2"]],
    ),
    Case(
        "matchAttribute across requests",
        [slice_(devices=NUMA)],
        [
            claim(
                "c",
                exactly("a"),
                exactly("b"),
                constraints=[{"requests": ["a", "b"], "matchAttribute": "gpu.example.com/numa"}],
            )
        ],
        [["a=gpu-0", "b=gpu-2"]],
    ),
    Case(
        "matchAttribute unsatisfiable",
        [slice_(devices=NUMA)],
        [claim("c", exactly(count=3), constraints=[{"matchAttribute": "gpu.example.com/numa"}])],
        None,
    ),
    Case(
        "distinctAttribute",
        [slice_(devices=NUMA)],
        [claim("c", exactly(count=2), constraints=[{"distinctAttribute": "gpu.example.com/numa"}])],
        [["req=gpu-0", "req=gpu-1"]],
    ),
    Case(
        "firstAvailable falls back to the second subrequest",
        [gpus(2)],
        [
            claim(
                "c",
                {
                    "name": "req",
                    "firstAvailable": [
                        {"name": "big", "deviceClassName": "gpu", "count": 4},
                        {"name": "small", "deviceClassName": "gpu", "count": 2},
                    ],
                },
            )
        ],
        [["req/small=gpu-0", "req/small=gpu-1"]],
    ),
    Case(
        "NoSchedule taint not tolerated",
        [slice_(devices=[tainted("gpu-0", "NoSchedule"), device("gpu-1")])],
        [claim()],
        [["req=gpu-1"]],
    ),
    Case(
        "NoExecute taint not tolerated",
        [slice_(devices=[tainted("gpu-0", "NoExecute")])],
        [claim()],
        None,
    ),
    Case(
        "None taint ignored",
        [slice_(devices=[tainted("gpu-0", "None")])],
        [claim()],
        [["req=gpu-0"]],
    ),
    Case(
        "taint tolerated",
        [slice_(devices=[tainted("gpu-0", "NoSchedule")])],
        [claim("c", exactly(tolerations=[{"key": "broken", "operator": "Exists"}]))],
        [["req=gpu-0"]],
    ),
    Case(
        "shared counters: the whole excludes the halves, two halves fit",
        partitioned(part("whole", "80Gi"), part("half-0", "40Gi"), part("half-1", "40Gi")),
        [claim("a", exactly(count=2))],
        [["req=half-0", "req=half-1"]],
    ),
    Case(
        "shared counters: a whole then nothing",
        partitioned(part("whole", "80Gi"), part("half-0", "40Gi")),
        [claim("a"), claim("b")],
        None,
    ),
    Case(
        "shared counters: the halves when the whole is not wanted",
        partitioned(
            part("whole", "80Gi", kind="whole"),
            part("half-0", "40Gi", kind="half"),
            part("half-1", "40Gi", kind="half"),
        ),
        [
            claim(
                "c",
                exactly(count=2, selectors=['device.attributes["gpu.example.com"].kind == "half"']),
            )
        ],
        [["req=half-0", "req=half-1"]],
    ),
    Case(
        "shared counters: what allocated partitions consume is gone",
        partitioned(part("half-0", "40Gi"), part("whole", "80Gi")),
        [claim()],
        None,
        in_use=["half-0"],
    ),
    Case("slice of another node", [gpus(2, node="node-2")], [claim()], None),
    Case(
        "incomplete pool is not used",
        [slice_("s1", [device("gpu-0")], count=2)],
        [claim()],
        None,
    ),
    Case(
        "complete pool of two slices, sorted by slice name",
        [slice_("s2", [device("gpu-b")], count=2), slice_("s1", [device("gpu-a")], count=2)],
        [claim()],
        [["req=gpu-a"]],
    ),
    Case(
        "older generation ignored",
        [
            slice_("old", [device("gpu-old")], generation=1),
            slice_("new", [device("gpu-new")], generation=2),
        ],
        [claim()],
        [["req=gpu-new"]],
    ),
    Case(
        "pools in driver then pool order",
        [slice_("z", [device("gpu-z")], pool="zz"), slice_("a", [device("gpu-a")], pool="aa")],
        [claim()],
        [["req=gpu-a"]],
    ),
    Case(
        "allNodes slice",
        [slice_("net", [device("nic-0")], node=None, pool="net", allNodes=True)],
        [claim()],
        [["req=nic-0"]],
    ),
    Case(
        "nodeSelector slice, label matches",
        [
            slice_(
                "rack",
                [device("nic-0")],
                node=None,
                pool="rack",
                nodeSelector={
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}
                    ]
                },
            )
        ],
        [claim()],
        [["req=nic-0"]],
        node=Node("node-1", {"rack": "r1"}),
    ),
    Case(
        "nodeSelector slice, label differs",
        [
            slice_(
                "rack",
                [device("nic-0")],
                node=None,
                pool="rack",
                nodeSelector={
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}
                    ]
                },
            )
        ],
        [claim()],
        None,
        node=Node("node-1", {"rack": "r2"}),
    ),
    Case(
        "admin access takes a device in use",
        [gpus(1)],
        [claim("c", exactly(adminAccess=True))],
        [["req=gpu-0"]],
        in_use=["gpu-0"],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_allocation(case: Case) -> None:
    got = allocate(case.slices, case.claims, case.classes, case.in_use, case.node)
    assert picked(got) == case.want


def test_result_pins_node_local_devices_to_the_node() -> None:
    (res,) = allocate([gpus(1)], [claim()]) or []
    assert res.node_selector == {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["node-1"]}]}
        ]
    }
    assert (res.devices[0].driver, res.devices[0].pool) == (DRIVER, "node-1")


def test_result_of_an_all_nodes_device_has_no_node_selector() -> None:
    (res,) = (
        allocate(
            [slice_("net", [device("nic-0")], node=None, pool="net", allNodes=True)], [claim()]
        )
        or []
    )
    assert res.node_selector is None


def test_class_config_is_copied_for_its_requests() -> None:
    opaque = {"opaque": {"driver": DRIVER, "parameters": {"mode": "fast"}}}
    (res,) = allocate([gpus(2)], [claim()], [device_class("gpu", config=[opaque])]) or []
    assert res.config == [{"source": "FromClass", **opaque}]


def test_consumable_capacity_shares_a_device_until_it_is_full() -> None:
    d = device("gpu-0")
    d["allowMultipleAllocations"] = True
    d["capacity"] = {"memory": {"value": "40Gi"}}
    req = exactly(capacity={"requests": {"memory": "16Gi"}})
    res = allocate([slice_(devices=[d])], [claim("a", req), claim("b", req)])
    assert picked(res) == [["req=gpu-0"], ["req=gpu-0"]]
    assert res is not None
    shares = {r.devices[0].share_id for r in res}
    assert len(shares) == 2 and None not in shares
    assert (
        allocate([slice_(devices=[d])], [claim("a", req), claim("b", req), claim("c", req)]) is None
    )


def test_duplicate_device_names_make_the_pool_invalid_on_this_node() -> None:
    with pytest.raises(NodeAllocationError, match=r"^invalid resource pools were encountered$"):
        allocate([slice_(devices=[device("gpu-0"), device("gpu-0")])], [claim()])


def test_missing_class_is_an_error() -> None:
    with pytest.raises(AllocationError) as e:
        allocate([gpus(1)], [claim("c", exactly(cls="tpu"))])
    assert str(e.value) == (
        "claim default/c, request req: could not retrieve device class tpu: "
        'deviceclass.resource.k8s.io "tpu" not found'
    )


def test_selector_failing_at_runtime_is_an_error_naming_the_device() -> None:
    sel = 'device.attributes["gpu.example.com"].model == "A100"'
    with pytest.raises(AllocationError) as e:
        allocate([gpus(1)], [claim("c", exactly(selectors=[sel]))])
    assert str(e.value) == (
        "claim default/c: selector #0 on device gpu.example.com/node-1/gpu-0: CEL runtime error: "
        "no such key: model. consider using CEL optional chaining (.? followed by orValue()) "
        "or guarding the check with has() for optional fields"
    )


def test_class_selector_that_does_not_compile_is_an_error() -> None:
    with pytest.raises(AllocationError) as e:
        allocate([gpus(1)], [claim()], [device_class("gpu", "device.driver ==")])
    assert str(e.value).startswith(
        "class gpu: selector #0: CEL compile error: compilation failed: ERROR: <input>:1:"
    )


def test_all_mode_over_an_incomplete_pool_is_an_error() -> None:
    with pytest.raises(
        AllocationError, match=r"resource pool gpu\.example\.com/node-1 is currently being updated"
    ):
        allocate(
            [slice_("s1", [device("gpu-0")], count=2)], [claim("c", exactly(allocationMode="All"))]
        )


def test_result_of_node_selector_slices_merges_their_requirements() -> None:
    rack = {"key": "rack", "operator": "In", "values": ["r1"]}
    zone = {"key": "zone", "operator": "In", "values": ["z1"]}
    sel_a = {"nodeSelectorTerms": [{"matchExpressions": [rack]}]}
    sel_b = {"nodeSelectorTerms": [{"matchExpressions": [rack, zone]}]}
    got = allocate(
        [
            slice_("a", [device("nic-0")], node=None, pool="a", nodeSelector=sel_a),
            slice_("b", [device("nic-1")], node=None, pool="b", nodeSelector=sel_b),
        ],
        [claim("c", exactly(count=2))],
        node=Node("node-1", {"rack": "r1", "zone": "z1"}),
    )
    assert got is not None
    assert got[0].node_selector == {"nodeSelectorTerms": [{"matchExpressions": [rack, zone]}]}


def test_allocated_state_from_claims() -> None:
    raw = claim("c")
    raw["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {"request": "req", "driver": DRIVER, "pool": "p", "device": "excl"},
                    {
                        "request": "req",
                        "driver": DRIVER,
                        "pool": "p",
                        "device": "adm",
                        "adminAccess": True,
                    },
                    {
                        "request": "req",
                        "driver": DRIVER,
                        "pool": "p",
                        "device": "shared",
                        "shareID": "s1",
                        "consumedCapacity": {"memory": "1Gi"},
                    },
                ]
            }
        }
    }
    st = AllocatedState.from_claims([ResourceClaim.from_dict(raw)])
    assert st.devices == {(DRIVER, "p", "excl")}
    assert st.is_allocated((DRIVER, "p", "shared")) and not st.is_allocated((DRIVER, "p", "adm"))
    assert st.aggregated_capacity == {(DRIVER, "p", "shared"): {"memory": 2**30}}


def test_slices_using_compatibility_groups_leave_their_pool_incomplete() -> None:
    """DRADeviceCompatibilityGroups is alpha (off) in 1.37: such a slice is ignored."""
    d = device("gpu-0")
    d["consumesCounters"] = [
        {"counterSet": "cs", "counters": {"c": {"value": "1"}}, "compatibilityGroups": ["g"]}
    ]
    counters = [{"name": "cs", "counters": {"c": {"value": "1"}}}]
    slices = [slice_("c", [], count=2, sharedCounters=counters), slice_("d", [d], count=2)]
    assert allocate(slices, [claim()]) is None
    d.pop("consumesCounters")
    d["consumesCounters"] = [{"counterSet": "cs", "counters": {"c": {"value": "1"}}}]
    assert picked(allocate(slices, [claim()])) == [["req=gpu-0"]]


def test_the_pool_cache_follows_node_and_slice_changes() -> None:
    """Allocators of successive pods share one PoolCache: a node relabelled (a new node
    object) or a new slice list is seen by the next allocation, never a stale pool."""
    from kubesched.framework.dra.node_cache import PoolCache

    rack = slice_(
        "rack",
        [device("nic-0")],
        node=None,
        pool="rack",
        nodeSelector={
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "rack", "operator": "In", "values": ["r1"]}]}
            ]
        },
    )
    cache = PoolCache()
    cls = {"gpu": DeviceClass.from_dict(device_class())}
    one = [ResourceSlice.from_dict(rack)]

    def run(slices: list[ResourceSlice], node: Node) -> list[list[str]] | None:
        a = Allocator(cls, slices, AllocatedState(), CelCache(), cache)
        return picked(a.allocate(node, [ResourceClaim.from_dict(claim())]))

    away = Node("node-1", {"rack": "r2"})
    assert run(one, away) is None
    assert run(one, away) is None  # served from the cache
    assert run(one, Node("node-1", {"rack": "r1"})) == [["req=nic-0"]]  # relabelled
    local = [*one, ResourceSlice.from_dict(gpus(1, "node-1"))]
    assert run(local, away) == [["req=gpu-0"]]  # a slice added


def test_try_allocate_defers_the_results_but_not_the_errors() -> None:
    """Filter's variant: the same devices as ``allocate`` when asked, and a node selector
    that cannot be made (a slice selecting nodes with two terms) fails at once."""
    cls = {"gpu": DeviceClass.from_dict(device_class())}
    terms = [
        {"matchExpressions": [{"key": "rack", "operator": "In", "values": [r]}]}
        for r in ("r1", "r2")
    ]
    two_terms = slice_(
        "rack", [device("nic-0")], node=None, pool="rack", nodeSelector={"nodeSelectorTerms": terms}
    )
    node = Node("node-1", {"rack": "r1"})
    c = [ResourceClaim.from_dict(claim())]
    a = Allocator(cls, [ResourceSlice.from_dict(two_terms)], AllocatedState(), CelCache())
    message = (
        "create NodeSelector for claim claim: unsupported ResourceSlice.NodeSelector with 2 terms"
    )
    with pytest.raises(AllocationError, match=message):
        a.allocate(node, c)
    with pytest.raises(AllocationError, match=message):
        a.try_allocate(node, c)
    local = Allocator(cls, [ResourceSlice.from_dict(gpus(2))], AllocatedState(), CelCache())
    later = local.try_allocate(node, c)
    assert later is not None
    assert picked(later()) == picked(local.allocate(node, c)) == [["req=gpu-0"]]
    assert later()[0].node_selector == local.allocate(node, c)[0].node_selector  # type: ignore[index]
    assert local.try_allocate(node, [ResourceClaim.from_dict(claim("c", exactly(count=3)))]) is None
