"""Parsing resource.k8s.io/v1 objects: defaults, and errors that name the field."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from kubesched.framework.dra import DeviceClass, ResourceClaim, ResourceSlice
from kubesched.framework.types import ObjectError
from tests.unit.dra.builders import claim, device, exactly, slice_


def test_claim_defaults_exact_count_of_one() -> None:
    c = ResourceClaim.from_dict(claim("c", exactly()))
    r = c.requests[0].exactly
    assert r is not None and (r.allocation_mode, r.count) == ("ExactCount", 1)
    assert c.key == "default/c" and c.allocation is None


def test_claim_with_first_available_and_status() -> None:
    raw = claim(
        "c",
        {"name": "r", "firstAvailable": [{"name": "a", "deviceClassName": "gpu", "count": 2}]},
    )
    raw["status"] = {
        "allocation": {
            "devices": {
                "results": [
                    {
                        "request": "r/a",
                        "driver": "d",
                        "pool": "p",
                        "device": "x",
                        "shareID": "u1",
                        "consumedCapacity": {"memory": "1Gi"},
                    }
                ]
            }
        },
        "reservedFor": [{"resource": "pods", "name": "p", "uid": "1"}],
    }
    c = ResourceClaim.from_dict(raw)
    assert c.requests[0].first_available[0].count == 2
    assert c.allocation is not None
    (res,) = c.allocation.devices
    assert (res.request, res.device, res.share_id) == ("r/a", "x", "u1")
    assert res.consumed_capacity == {"memory": Fraction(2**30)}
    assert len(c.reserved_for) == 1


def test_slice_parses_devices_capacity_and_counters() -> None:
    d = device("gpu-0", model="A100", numa=1)
    d["capacity"] = {
        "memory": {"value": "40Gi", "requestPolicy": {"validRange": {"min": "1Gi", "step": "1Gi"}}}
    }
    d["consumesCounters"] = [{"counterSet": "cs", "counters": {"mem": {"value": "10Gi"}}}]
    s = ResourceSlice.from_dict(slice_(devices=[d]))
    dev = s.devices[0]
    assert dev.attributes["numa"].kind == "int" and dev.attributes["model"].value == "A100"
    assert dev.capacity["memory"].value == 40 * 2**30
    assert dev.capacity["memory"].policy is not None and dev.capacity["memory"].policy.step == 2**30
    assert dev.consumes_counters == (("cs", {"mem": Fraction(10 * 2**30)}),)


def _claim_without(field: str) -> dict[str, Any]:
    raw = claim("c", exactly())
    del raw["spec"]["devices"]["requests"][0]["exactly"][field]
    return raw


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: ResourceSlice.from_dict(slice_(node=None)), "spec: exactly one of nodeName"),
        (
            lambda: ResourceSlice.from_dict(slice_(devices=[{"attributes": {}}])),
            "spec.devices[0].name: required",
        ),
        (
            lambda: ResourceSlice.from_dict(
                slice_(devices=[{"name": "x", "attributes": {"a": {"int": 1, "string": "s"}}}])
            ),
            "spec.devices[0].attributes[a]: exactly one of int, bool, string, version",
        ),
        (
            lambda: ResourceSlice.from_dict(
                slice_(devices=[{"name": "x", "capacity": {"m": {"value": "lots"}}}])
            ),
            "spec.devices[0].capacity[m].value:",
        ),
        (lambda: ResourceSlice.from_dict(slice_(count=0)), "spec.pool.resourceSliceCount"),
        (
            lambda: ResourceClaim.from_dict(_claim_without("deviceClassName")),
            "spec.devices.requests[0].exactly.deviceClassName: required",
        ),
        (
            lambda: ResourceClaim.from_dict(claim("c", exactly("a"), exactly("a"))),
            "spec.devices.requests[1].name: duplicate request name 'a'",
        ),
        (
            lambda: ResourceClaim.from_dict(claim("c", {"name": "r"})),
            "spec.devices.requests[0]: exactly one of exactly, firstAvailable",
        ),
        (
            lambda: ResourceClaim.from_dict(claim("c", exactly(allocationMode="Some"))),
            "spec.devices.requests[0].exactly.allocationMode: must be ExactCount or All",
        ),
        (
            lambda: DeviceClass.from_dict({"metadata": {"name": "g"}, "spec": {"selectors": [{}]}}),
            "spec.selectors[0]: CEL expression empty",
        ),
    ],
)
def test_malformed_objects_name_the_field(make: Any, message: str) -> None:
    with pytest.raises(ObjectError) as e:
        make()
    assert str(e.value).startswith(message)


def test_duplicate_device_names_parse_but_are_kept_for_the_allocator_to_refuse() -> None:
    s = ResourceSlice.from_dict(slice_(devices=[device("x"), device("x")]))
    assert [d.name for d in s.devices] == ["x", "x"]
