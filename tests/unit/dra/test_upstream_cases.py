"""Cases of kube's structured allocator tests (allocatortesting, v0.37.2) whose answers
we must reproduce: the same devices where the search order decides, the same errors."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.framework.dra import AllocationError, NodeAllocationError
from tests.unit.dra.builders import DRIVER, claim, device, exactly, slice_
from tests.unit.dra.test_allocator import allocate, picked


def mem(name: str, size: str, **attrs: Any) -> dict[str, Any]:
    d = device(name, **attrs)
    d["capacity"] = {"memory": {"value": size}}
    return d


def at_least(size: str) -> str:
    return f'device.capacity["{DRIVER}"].memory.compareTo(quantity("{size}")) >= 0'


def versioned(name: str, version: str, s: str) -> dict[str, Any]:
    d = device(name, stringAttribute=s)
    d["attributes"]["driverVersion"] = {"version": version}
    return d


def test_small_and_large_backtrack_claims() -> None:
    got = allocate(
        [slice_(devices=[mem("device-2", "2Gi"), mem("device-1", "1Gi")])],
        [
            claim("claim-0", exactly("req-0", selectors=[at_least("1Gi")])),
            claim("claim-1", exactly("req-1", selectors=[at_least("2Gi")])),
        ],
    )
    assert picked(got) == [["req-0=device-1"], ["req-1=device-2"]]


def test_prioritized_list_with_backtracking() -> None:
    got = allocate(
        [
            slice_("slice-1", [mem("device-1", "8Gi")], pool="pool-1"),
            slice_("slice-2", [mem("device-2", "4Gi")], pool="pool-2"),
        ],
        [
            claim(
                "claim-0",
                {
                    "name": "req-0",
                    "firstAvailable": [
                        {
                            "name": "subReq-0",
                            "deviceClassName": "gpu",
                            "selectors": [{"cel": {"expression": at_least("8Gi")}}],
                        },
                        {
                            "name": "subReq-1",
                            "deviceClassName": "gpu",
                            "selectors": [{"cel": {"expression": at_least("4Gi")}}],
                        },
                    ],
                },
                exactly("req-1", selectors=[at_least("8Gi")]),
            )
        ],
    )
    assert picked(got) == [["req-0/subReq-1=device-2", "req-1=device-1"]]
    assert got is not None and [d.pool for d in got[0].devices] == ["pool-2", "pool-1"]


def test_with_constraint_for_request_retry() -> None:
    got = allocate(
        [
            slice_(
                devices=[
                    versioned("device-1", "1.0.0", "a"),
                    versioned("device-2", "2.0.0", "b"),
                    versioned("device-3", "3.0.0", "b"),
                ]
            )
        ],
        [
            claim(
                "claim-0",
                exactly("req-0"),
                exactly("req-1"),
                constraints=[
                    {"requests": ["req-0"], "matchAttribute": f"{DRIVER}/driverVersion"},
                    {"matchAttribute": f"{DRIVER}/stringAttribute"},
                ],
            )
        ],
    )
    assert picked(got) == [["req-0=device-2", "req-1=device-3"]]


def test_partitionable_devices_taint_releases_counter() -> None:
    def consuming(name: str) -> dict[str, Any]:
        d = device(name)
        d["consumesCounters"] = [{"counterSet": "counter-set-1", "counters": {"c": {"value": "1"}}}]
        return d

    d1 = consuming("device-1")
    d1["taints"] = [{"key": "taint-key", "value": "taint-value", "effect": "NoSchedule"}]
    got = allocate(
        [
            slice_("slice-1", [d1, consuming("device-2")], pool="pool-1", count=2),
            slice_(
                "slice-2",
                [],
                pool="pool-1",
                count=2,
                sharedCounters=[{"name": "counter-set-1", "counters": {"c": {"value": "1"}}}],
            ),
        ],
        [claim("claim-0", exactly("req-0"))],
    )
    assert picked(got) == [["req-0=device-2"]]


def test_duplicate_slice_makes_the_pool_invalid() -> None:
    s = slice_("slice-1", [device("device-1")], count=2)
    twin = {**s, "metadata": {"name": "slice-1-2"}}
    with pytest.raises(NodeAllocationError, match="invalid resource pools were encountered"):
        allocate([s, twin], [claim("claim-0")])


def test_constraint_unmet_by_all_devices_is_an_error() -> None:
    with pytest.raises(AllocationError) as e:
        allocate(
            [slice_(devices=[device("device-1", numa=1), device("device-2", numa=2)])],
            [
                claim(
                    "claim-0",
                    exactly("req-0", allocationMode="All"),
                    constraints=[{"matchAttribute": f"{DRIVER}/numa"}],
                )
            ],
        )
    assert str(e.value) == (
        f"claim default/claim-0, request req-0: cannot add device {DRIVER}/node-1/device-2 "
        "because a claim constraint would not be satisfied"
    )


def test_tainted_admin_access_is_not_exempt_from_taints() -> None:
    d = device("device-1")
    d["taints"] = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    got = allocate(
        [slice_(devices=[d])],
        [claim("claim-0", exactly("req-0", adminAccess=True))],
        in_use=["device-1", "device-2"],
    )
    assert got is None


def test_all_devices_some_allocated_admin_access() -> None:
    got = allocate(
        [slice_(devices=[device("device-1"), device("device-2")])],
        [claim("claim-0", exactly("req-0", allocationMode="All", adminAccess=True))],
        in_use=["device-1"],
    )
    assert picked(got) == [["req-0=device-1", "req-0=device-2"]]
    assert got is not None and all(d.admin_access for d in got[0].devices)
