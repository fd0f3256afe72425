"""Property: allocation never hands out a device twice, nor one already in use, and a
pod is refused only when no assignment exists (checked by brute force)."""

from __future__ import annotations

import itertools
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kubesched.framework.dra import (
    AllocatedState,
    Allocator,
    CelCache,
    DeviceClass,
    ResourceClaim,
    ResourceSlice,
)
from tests.unit.dra.builders import DRIVER, Node, claim, device, device_class, exactly, slice_

CLASSES = [
    DeviceClass.from_dict(device_class("gpu")),
    DeviceClass.from_dict(device_class("even", 'device.attributes["gpu.example.com"].numa == 0')),
]
CACHE = CelCache()


@st.composite
def scenario(
    draw: st.DrawFn,
) -> tuple[list[dict[str, Any]], set[tuple[str, str, str]], list[dict[str, Any]], bool]:
    slices = []
    for p in range(draw(st.integers(1, 3))):
        n = draw(st.integers(0, 5))
        slices.append(
            slice_(
                f"s{p}",
                [device(f"d{i}", numa=draw(st.integers(0, 1))) for i in range(n)],
                pool=f"p{p}",
            )
        )
    all_ids = [
        (DRIVER, s["spec"]["pool"]["name"], d["name"]) for s in slices for d in s["spec"]["devices"]
    ]
    in_use = set(draw(st.lists(st.sampled_from(all_ids), unique=True))) if all_ids else set()
    constrained = draw(st.booleans())
    claims = []
    for c in range(draw(st.integers(1, 3))):
        reqs = [
            exactly(f"r{r}", draw(st.sampled_from(["gpu", "even"])), count=draw(st.integers(1, 3)))
            for r in range(draw(st.integers(1, 2)))
        ]
        extra: dict[str, Any] = {}
        if constrained and draw(st.booleans()):
            extra["constraints"] = [{"matchAttribute": "gpu.example.com/numa"}]
        claims.append(claim(f"c{c}", *reqs, **extra))
    return slices, in_use, claims, constrained


def _exists(slices: list[ResourceSlice], in_use: set[Any], claims: list[ResourceClaim]) -> bool:
    """Brute force over device choices, each request in turn."""
    devs = {(s.driver, s.pool, d.name): d for s in slices for d in s.devices}
    slots = []
    for c in claims:
        for r in c.requests:
            assert r.exactly is not None
            slots.append((c, r.exactly))

    def ok(d: Any, cls: str) -> bool:
        return cls == "gpu" or d.attributes["numa"].value == 0

    def go(i: int, used: set[Any], picks: dict[str, list[Any]]) -> bool:
        if i == len(slots):
            return all(
                len({devs[x].attributes["numa"].value for x in picks.get(c.key, [])}) <= 1
                for c in claims
                if c.constraints
            )
        c, r = slots[i]
        free = [x for x in devs if x not in used and ok(devs[x], r.device_class_name)]
        for combo in itertools.combinations(free, r.count):
            p = dict(picks)
            p[c.key] = [*p.get(c.key, []), *combo]
            if go(i + 1, used | set(combo), p):
                return True
        return False

    return go(0, set(in_use), {})


@settings(max_examples=150, deadline=None)
@given(scenario())
def test_no_device_is_handed_out_twice(sc: Any) -> None:
    raw_slices, in_use, raw_claims, _ = sc
    slices = [ResourceSlice.from_dict(s) for s in raw_slices]
    claims = [ResourceClaim.from_dict(c) for c in raw_claims]
    a = Allocator({c.name: c for c in CLASSES}, slices, AllocatedState(devices=set(in_use)), CACHE)
    res = a.allocate(Node(), claims)
    assert (res is not None) == _exists(slices, in_use, claims)
    if res is None:
        return
    handed = [(d.driver, d.pool, d.device) for r in res for d in r.devices]
    assert len(handed) == len(set(handed))
    assert not set(handed) & in_use
    for c, r in zip(claims, res, strict=True):
        assert len(r.devices) == sum(q.exactly.count for q in c.requests if q.exactly)


@settings(max_examples=100, deadline=None)
@given(scenario())
def test_pods_one_after_another_never_share_a_device(sc: Any) -> None:
    """Each pod's result becomes in-flight state for the next (as Reserve will do)."""
    raw_slices, in_use, raw_claims, _ = sc
    slices = [ResourceSlice.from_dict(s) for s in raw_slices]
    state = AllocatedState(devices=set(in_use))
    a = Allocator({c.name: c for c in CLASSES}, slices, state, CACHE)
    handed: list[tuple[str, str, str]] = []
    for raw in raw_claims:
        res = a.allocate(Node(), [ResourceClaim.from_dict(raw)])
        for r in res or []:
            for d in r.devices:
                handed.append((d.driver, d.pool, d.device))
                state.add_result(d)
    assert len(handed) == len(set(handed))
    assert not set(handed) & in_use
