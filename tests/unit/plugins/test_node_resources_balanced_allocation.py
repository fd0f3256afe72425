from __future__ import annotations

from typing import Any

import numpy as np
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from kubesched.plugins import node_resources_balanced_allocation as balanced
from tests.builders import make_node, make_pod
from tests.unit.plugins.fakes import FakeHandle
from tests.unit.plugins.strategies import SCALARS, cases, draw_rows

GPU = "example.com/gpu"
THREE = {"resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}]}


def plugin(**raw: Any) -> balanced.NodeResourcesBalancedAllocation:
    return balanced.new(balanced.Args.model_validate(raw), FakeHandle())


def node(*pods: Pod, **alloc: str) -> NodeInfo:
    full = {"cpu": "4", "memory": "8Gi", "pods": "110"}
    full.update(alloc)
    return make_node("n").alloc(**full).info(*pods)


def running(**req: str) -> Pod:
    b = make_pod("running").node("n")
    if req:
        b.req(**req)
    return b.pod()


# kube-scheduler v1.37: 50 + (50 + balance with the pod - balance without it) / 2, where a
# balance is int((1 - std) * 100) of the requested/allocatable fractions (capped at 1).
@pytest.mark.parametrize(
    ("args", "pod", "node_info", "expected"),
    [
        pytest.param(
            {},
            make_pod("p").req(cpu="1", memory="4Gi").pod(),
            node(),
            68,
            id="fractions-0.25-0.5-std-0.125",
        ),
        pytest.param(
            {},
            make_pod("p").req(cpu="2", memory="4Gi").pod(),
            node(),
            75,
            id="perfectly-balanced",
        ),
        pytest.param(
            {},
            make_pod("p").req(cpu="1", memory="2Gi").pod(),
            node(running(cpu="1")),
            75,
            id="node-requests-count-0.5-0.25",
        ),
        pytest.param(
            {},
            make_pod("p").req(cpu="2", memory="4Gi").pod(),
            node(running()),
            75,
            id="plain-requests-not-non-zero",
        ),
        pytest.param(
            {},
            make_pod("p").req(cpu="8", memory="4Gi").pod(),
            node(),
            62,
            id="fraction-capped-at-1",
        ),
        pytest.param(
            {},
            make_pod("p").req(cpu="1").pod(),
            node(),
            68,
            id="memory-zero-fraction-0.25-0",
        ),
        pytest.param(
            THREE,
            make_pod("p").req(cpu="1", memory="4Gi", **{GPU: "2"}).pod(),
            node(**{GPU: "2"}),
            59,
            id="three-resources-std-0.3118",
        ),
        pytest.param(
            THREE,
            make_pod("p").req(cpu="1", memory="4Gi").pod(),
            node(**{GPU: "2"}),
            68,
            id="extended-not-requested-skipped",
        ),
        pytest.param(
            {},
            make_pod("p").req(cpu="1", memory="4Gi").pod(),
            node(memory="0"),
            75,
            id="single-fraction-std-0",
        ),
        pytest.param(
            {},
            make_pod("p").req(memory="4Gi").pod(),
            node(running(cpu="2")),
            87,  # without 75 (0.5, 0), with 100 (0.5, 0.5): 50 + (50 + 100 - 75) / 2
            id="pod-evens-out-the-node",
        ),
        pytest.param(
            {},
            make_pod("p").req(cpu="2").pod(),
            node(running(cpu="2", memory="4Gi")),
            62,  # without 100 (0.5, 0.5), with 75 (1, 0.5): 50 + (50 + 75 - 100) / 2
            id="pod-skews-a-balanced-node",
        ),
    ],
)
def test_score(args: dict[str, Any], pod: Pod, node_info: NodeInfo, expected: int) -> None:
    pl = plugin(**args)
    state = CycleState()
    assert pl.pre_score(state, pod, [node_info]) is None
    assert pl.score(state, pod, node_info) == (expected, None)
    assert pl.score(CycleState(), pod, node_info) == (expected, None), "without PreScore state"
    got = pl.score_vector(state, pod, Snapshot([node_info]), np.array([0], dtype=np.intp))
    assert got is not None
    assert got.tolist() == [expected]


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(make_pod("p").pod(), id="best-effort"),
        pytest.param(make_pod("p").req(**{GPU: "1"}).pod(), id="requests-only-unscored-resources"),
    ],
)
def test_pre_score_skips_pods_requesting_none_of_the_resources(pod: Pod) -> None:
    pl = plugin()
    assert pl.pre_score(CycleState(), pod, [node()]) == Status.skip()
    assert pl.score(CycleState(), pod, node()) == (0, None)


def test_default_args() -> None:
    assert [(r.name, r.weight) for r in balanced.Args().resources] == [("cpu", 1), ("memory", 1)]
    assert [r.name for r in balanced.Args.model_validate({"resources": []}).resources] == [
        "cpu",
        "memory",
    ]


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        pytest.param({"resources": [{"name": "cpu", "weight": 2}]}, "must be 1", id="weight-not-1"),
        pytest.param(
            {"resources": [{"name": "cpu"}, {"name": "cpu"}]}, "duplicate", id="duplicate"
        ),
        pytest.param({"resource": []}, "resource", id="unknown-field"),
    ],
)
def test_invalid_args(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(pydantic.ValidationError, match=field):
        balanced.Args.model_validate(raw)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cases(),
    st.lists(
        st.sampled_from(("cpu", "memory", "ephemeral-storage", "pods", *SCALARS)),
        min_size=1,
        max_size=5,
        unique=True,
    ),
    st.data(),
)
def test_score_vector_equals_score(
    case: tuple[Snapshot, Pod], names: list[str], data: st.DataObject
) -> None:
    snap, pod = case
    rows = draw_rows(data, len(snap))
    pl = balanced.new(
        balanced.Args.model_validate({"resources": [{"name": n} for n in names]}), FakeHandle(snap)
    )
    state = CycleState()
    pl.pre_score(state, pod, snap.node_infos)
    got = pl.score_vector(state, pod, snap, rows)
    expected = [pl.score(state, pod, snap.node_infos[int(i)])[0] for i in rows]
    assert got is not None
    np.testing.assert_array_equal(got, expected)
