"""Slices alike share their parsed devices, and nodes alike get one answer per pod: the
answers stay those of a search on each node."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.framework.dra import (
    AllocatedState,
    Allocator,
    CelCache,
    DeviceClass,
    ResourceClaim,
    ResourceSlice,
)
from kubesched.framework.dra.node_cache import PoolCache
from kubesched.framework.dra.slice_bodies import SliceBodies
from kubesched.framework.dra.types import DeviceResult
from kubesched.framework.types import ObjectError
from tests.unit.dra.builders import DRIVER, Node, claim, device, device_class, exactly, gpus, slice_

NODES = [Node(f"n{i}") for i in range(4)]


def parsed(*raws: dict[str, Any]) -> list[ResourceSlice]:
    bodies = SliceBodies()
    return [bodies.parse(r) for r in raws]


def test_slices_alike_but_for_node_and_pool_share_their_parsed_devices() -> None:
    a, b, other = parsed(gpus(2, "n1"), gpus(2, "n2"), gpus(2, "n3", model="A100"))
    assert a.devices is b.devices
    assert (b.name, b.node_name, b.pool) == ("n2-gpus", "n2", "n2")
    assert other.devices is not a.devices
    assert [d.name for d in other.devices] == ["gpu-0", "gpu-1"]
    assert other.devices[0].attributes["model"].value == "A100"


def test_a_slice_alike_is_still_checked_for_its_own_fields() -> None:
    bodies = SliceBodies()
    bodies.parse(gpus(1, "n1"))
    broken = gpus(1, "n2")
    broken["spec"]["pool"] = {"generation": 1, "resourceSliceCount": 1}
    with pytest.raises(ObjectError, match=r"^spec\.pool\.name: required$"):
        bodies.parse(broken)
    broken["spec"]["pool"] = {"name": "n2", "resourceSliceCount": 0}
    with pytest.raises(ObjectError, match="resourceSliceCount: must be greater than zero"):
        bodies.parse(broken)


def test_bodies_no_slice_uses_are_forgotten() -> None:
    bodies = SliceBodies()
    a = bodies.parse(gpus(1, "n1"))
    b = bodies.parse(gpus(1, "n2"))
    c = bodies.parse(gpus(1, "n3", model="A100"))
    bodies.keep_only([a, b, c])
    assert len(bodies) == 2
    bodies.keep_only([b])  # a's body lives on in b
    assert len(bodies) == 1
    assert bodies.parse(gpus(1, "n4")).devices is b.devices
    bodies.keep_only([])
    assert len(bodies) == 0


def used(node: str, *devices: str) -> AllocatedState:
    st = AllocatedState()
    for d in devices:
        st.add_result(DeviceResult(request="req", driver=DRIVER, pool=node, device=d))
    return st


def feasible(
    a: Allocator, claims: list[dict[str, Any]], nodes: list[Node] = NODES
) -> dict[str, list[list[str]] | None]:
    """Filter's question on each node, then the devices of each feasible node."""
    parsed_claims = [ResourceClaim.from_dict(c) for c in claims]
    out: dict[str, list[list[str]] | None] = {}
    for n in nodes:
        later = a.try_allocate(n, parsed_claims)
        out[n.name] = None if later is None else [[d.device for d in r.devices] for r in later()]
    return out


def allocator(slices: list[ResourceSlice], state: AllocatedState) -> Allocator:
    cls = {"gpu": DeviceClass.from_dict(device_class())}
    return Allocator(cls, slices, state, CelCache(), PoolCache())


def test_nodes_alike_differ_by_the_devices_in_use_on_them() -> None:
    slices = parsed(*(gpus(2, n.name) for n in NODES))
    state = used("n1", "gpu-0", "gpu-1")
    for _ in range(2):  # a fresh search each time, then its answer
        assert feasible(allocator(slices, state), [claim("c")]) == {
            "n0": [["gpu-0"]],
            "n1": None,  # both in use
            "n2": [["gpu-0"]],
            "n3": [["gpu-0"]],
        }
    state = used("n2", "gpu-0")
    assert feasible(allocator(slices, state), [claim("c", exactly(count=2))]) == {
        "n0": [["gpu-0", "gpu-1"]],
        "n1": [["gpu-0", "gpu-1"]],
        "n2": None,
        "n3": [["gpu-0", "gpu-1"]],
    }
    # The same allocator (one pod), other claims: their own answers.
    a = allocator(slices, used("n3", "gpu-1"))
    assert feasible(a, [claim("c")])["n3"] == [["gpu-0"]]
    assert feasible(a, [claim("c", exactly(count=2))]) == {
        "n0": [["gpu-0", "gpu-1"]],
        "n1": [["gpu-0", "gpu-1"]],
        "n2": [["gpu-0", "gpu-1"]],
        "n3": None,
    }


def test_slices_not_alike_are_searched_each() -> None:
    # n2's devices are another model: the class selects A100s only.
    slices = parsed(
        gpus(1, "n0", model="T4"),
        gpus(1, "n1", model="T4"),
        gpus(1, "n2", model="A100"),
        gpus(1, "n3", model="T4"),
    )
    cls = {
        "gpu": DeviceClass.from_dict(
            device_class("gpu", 'device.attributes["gpu.example.com"].model == "A100"')
        )
    }
    a = Allocator(cls, slices, AllocatedState(), CelCache(), PoolCache())
    assert feasible(a, [claim("c")]) == {"n0": None, "n1": None, "n2": [["gpu-0"]], "n3": None}


def test_a_changed_slice_list_is_never_answered_from_the_old_one() -> None:
    """The PoolCache is shared by the allocators of successive pods: a new slice list
    (one node's slice replaced) drops its shapes, so the nodes alike before are told
    apart."""
    cache = PoolCache()
    cls = {
        "gpu": DeviceClass.from_dict(device_class("gpu", 'device.attributes["gpu.example.com"].ok'))
    }
    bodies = SliceBodies()
    before = [bodies.parse(gpus(1, n.name, ok=True)) for n in NODES]
    a = Allocator(cls, before, AllocatedState(), CelCache(), cache)
    assert feasible(a, [claim("c")]) == {n.name: [["gpu-0"]] for n in NODES}
    after = [*before[:2], bodies.parse(gpus(1, "n2", ok=False)), before[3]]
    a = Allocator(cls, after, AllocatedState(), CelCache(), cache)
    assert feasible(a, [claim("c")]) == {
        "n0": [["gpu-0"]],
        "n1": [["gpu-0"]],
        "n2": None,
        "n3": [["gpu-0"]],
    }


def test_per_device_node_selection_is_searched_per_node() -> None:
    # One slice for all nodes; each device names its node: n1 has none of its own.
    devices = [device("d0"), device("d1")]
    devices[0]["nodeName"] = "n0"
    devices[1]["nodeName"] = "n2"
    shared = slice_("all", devices, node=None, pool="all", perDeviceNodeSelection=True)
    a = allocator(parsed(shared), AllocatedState())
    assert feasible(a, [claim("c")], NODES[:3]) == {"n0": [["d0"]], "n1": None, "n2": [["d1"]]}
