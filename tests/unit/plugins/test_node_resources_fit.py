from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ActionType, ClusterEvent, EventResource
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.plugins import node_resources_fit as fit
from tests.builders import make_node, make_pod
from tests.unit.plugins.fakes import FakeHandle
from tests.unit.plugins.strategies import SCALARS, cases, draw_rows

GPU = "example.com/gpu"


def plugin(handle: FakeHandle | None = None, **raw: Any) -> fit.NodeResourcesFit:
    return fit.new(fit.Args.model_validate(raw), handle or FakeHandle())


def node(*pods: Pod, **alloc: str) -> NodeInfo:
    """A node with 4 cpu, 8Gi, 20Gi ephemeral-storage, 110 pods unless overridden."""
    full = {"cpu": "4", "memory": "8Gi", "ephemeral_storage": "20Gi", "pods": "110"}
    full.update(alloc)
    return make_node("n").alloc(**full).info(*pods)


def running(**req: str) -> Pod:
    return make_pod("running").req(**req).node("n").pod()


def unschedulable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE, *reasons, plugin="NodeResourcesFit")


def unresolvable(*reasons: str) -> Status:
    return Status(Code.UNSCHEDULABLE_AND_UNRESOLVABLE, *reasons, plugin="NodeResourcesFit")


# -- Filter ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "pod", "node_info", "expected"),
    [
        pytest.param({}, make_pod("p").req(cpu="1").pod(), node(), None, id="fits"),
        pytest.param(
            {},
            make_pod("p").req(cpu="1", memory="1Gi").pod(),
            node(running(cpu="3", memory="7Gi")),
            None,
            id="exact-fit",
        ),
        pytest.param(
            {},
            make_pod("p").pod(),
            node(running(cpu="1"), pods="1"),
            unschedulable("Too many pods"),
            id="too-many-pods",
        ),
        pytest.param(
            {},
            make_pod("p").req(cpu="2").pod(),
            node(running(cpu="3")),
            unschedulable("Insufficient cpu"),
            id="insufficient-cpu",
        ),
        pytest.param(
            {},
            make_pod("p").req(memory="2Gi").pod(),
            node(running(memory="7Gi")),
            unschedulable("Insufficient memory"),
            id="insufficient-memory",
        ),
        pytest.param(
            {},
            make_pod("p").req(ephemeral_storage="11Gi").pod(),
            node(running(ephemeral_storage="10Gi")),
            unschedulable("Insufficient ephemeral-storage"),
            id="insufficient-ephemeral-storage",
        ),
        pytest.param(
            {},
            make_pod("p").req(cpu="5").pod(),
            node(),
            unresolvable("Insufficient cpu"),
            id="larger-than-the-node-is-unresolvable",
        ),
        pytest.param(
            {},
            make_pod("p").req(cpu="2", memory="9Gi").pod(),
            node(running(cpu="3")),
            unresolvable("Insufficient cpu", "Insufficient memory"),
            id="one-unresolvable-makes-all-unresolvable",
        ),
        pytest.param(
            {},
            make_pod("p").req(cpu="2", memory="2Gi", ephemeral_storage="15Gi", **{GPU: "1"}).pod(),
            node(
                running(cpu="3", memory="7Gi", ephemeral_storage="10Gi", **{GPU: "1"}),
                pods="1",
                **{GPU: "1"},
            ),
            unschedulable(
                "Too many pods",
                "Insufficient cpu",
                "Insufficient memory",
                "Insufficient ephemeral-storage",
                "Insufficient example.com/gpu",
            ),
            id="all-reasons-in-order",
        ),
        pytest.param(
            {},
            make_pod("p").req(**{GPU: "2"}).pod(),
            node(running(**{GPU: "1"}), **{GPU: "2"}),
            unschedulable("Insufficient example.com/gpu"),
            id="insufficient-extended",
        ),
        pytest.param(
            {},
            make_pod("p").req(**{GPU: "1"}).pod(),
            node(),
            unresolvable("Insufficient example.com/gpu"),
            id="node-without-extended",
        ),
        pytest.param(
            {"ignoredResources": [GPU]},
            make_pod("p").req(**{GPU: "1"}).pod(),
            node(),
            None,
            id="ignored-resource",
        ),
        pytest.param(
            {"ignoredResourceGroups": ["example.com"]},
            make_pod("p").req(**{GPU: "1"}).pod(),
            node(),
            None,
            id="ignored-resource-group",
        ),
        pytest.param(
            {"ignoredResourceGroups": ["example"]},
            make_pod("p").req(**{GPU: "1"}).pod(),
            node(),
            unresolvable("Insufficient example.com/gpu"),
            id="group-is-the-whole-prefix",
        ),
        pytest.param(
            {"ignoredResources": ["hugepages-2Mi"]},
            make_pod("p").req(hugepages_2Mi="2Mi").pod(),
            node(),
            unresolvable("Insufficient hugepages-2Mi"),
            id="only-extended-can-be-ignored",
        ),
        pytest.param(
            {},
            make_pod("p").req(**{GPU: "0"}).pod(),
            node(),
            None,
            id="zero-scalar-request",
        ),
        pytest.param(
            {},
            make_pod("p").pod(),
            node(running(cpu="4", memory="8Gi")),
            None,
            id="best-effort-fits-a-full-node",
        ),
        pytest.param(
            {},
            make_pod("p").init_container(cpu="5").pod(),
            node(),
            unresolvable("Insufficient cpu"),
            id="init-container-request",
        ),
    ],
)
def test_filter(
    args: dict[str, Any], pod: Pod, node_info: NodeInfo, expected: Status | None
) -> None:
    pl = plugin(**args)
    state = CycleState()
    assert pl.pre_filter(state, pod, [node_info]) == (None, None)
    assert pl.filter(state, pod, node_info) == expected
    assert pl.filter(CycleState(), pod, node_info) == expected, "without PreFilter state"


# -- Score -------------------------------------------------------------------------------------
LEAST: dict[str, Any] = {}
MOST = {"scoringStrategy": {"type": "MostAllocated"}}
BIN_PACK_SHAPE = [{"utilization": 0, "score": 0}, {"utilization": 100, "score": 10}]


def rtcr(
    shape: list[dict[str, int]], resources: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    s: dict[str, Any] = {
        "type": "RequestedToCapacityRatio",
        "requestedToCapacityRatio": {"shape": shape},
    }
    if resources:
        s["resources"] = resources
    return {"scoringStrategy": s}


@pytest.mark.parametrize(
    ("args", "pod", "node_info", "expected"),
    [
        # LeastAllocated: (capacity - requested) * 100 / capacity, weighted mean, truncated.
        pytest.param(
            LEAST,
            make_pod("p").req(cpu="1", memory="2Gi").pod(),
            node(running(cpu="2", memory="4Gi")),
            25,
            id="least-cpu-3000/4000-mem-6Gi/8Gi",
        ),
        pytest.param(
            LEAST,
            make_pod("p").pod(),
            node(),
            97,
            id="least-best-effort-counts-100m-200Mi",  # cpu 3900*100/4000=97, mem 7992/8192 -> 97
        ),
        pytest.param(
            {"scoringStrategy": {"resources": [{"name": "cpu", "weight": 3}, {"name": "memory"}]}},
            make_pod("p").req(cpu="3", memory="2Gi").pod(),
            node(),
            37,
            id="least-weights-(25*3+75)/4",
        ),
        pytest.param(
            LEAST,
            make_pod("p").req(cpu="5", memory="2Gi").pod(),
            node(),
            37,
            id="least-over-capacity-scores-0-(0+75)/2",
        ),
        pytest.param(
            LEAST,
            make_pod("p").req(cpu="1", memory="2Gi").pod(),
            node(make_pod("be").node("n").pod()),
            72,
            id="least-node-non-zero-requests",  # cpu 1100 -> 72; mem 2248Mi/8192Mi -> 72
        ),
        pytest.param(
            {
                "scoringStrategy": {
                    "resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}]
                }
            },
            make_pod("p").req(cpu="1", memory="2Gi").pod(),
            node(**{GPU: "4"}),
            75,
            id="least-extended-not-requested-is-skipped",
        ),
        pytest.param(
            {
                "scoringStrategy": {
                    "resources": [{"name": "cpu"}, {"name": "memory"}, {"name": GPU}]
                }
            },
            make_pod("p").req(cpu="1", memory="2Gi", **{GPU: "1"}).pod(),
            node(running(cpu="0", memory="0", **{GPU: "1"}), **{GPU: "4"}),
            66,
            id="least-extended-requested-(75+75+50)/3",
        ),
        pytest.param(
            {"scoringStrategy": {"resources": [{"name": GPU}]}},
            make_pod("p").req(**{GPU: "1"}).pod(),
            node(),
            0,
            id="least-node-without-resource",
        ),
        pytest.param(
            {"scoringStrategy": {"resources": [{"name": "ephemeral-storage"}]}},
            make_pod("p").req(ephemeral_storage="5Gi").pod(),
            node(),
            75,
            id="least-ephemeral",
        ),
        # MostAllocated: requested * 100 / capacity, requested capped at capacity.
        pytest.param(
            MOST,
            make_pod("p").req(cpu="1", memory="2Gi").pod(),
            node(running(cpu="2", memory="4Gi")),
            75,
            id="most-75",
        ),
        pytest.param(MOST, make_pod("p").pod(), node(), 2, id="most-best-effort-100m-200Mi"),
        pytest.param(
            MOST,
            make_pod("p").req(cpu="5", memory="4Gi").pod(),
            node(),
            75,
            id="most-over-capacity-capped-(100+50)/2",
        ),
        # RequestedToCapacityRatio: shape 0..10 scaled to 0..100, interpolated; mean rounded.
        pytest.param(
            rtcr(BIN_PACK_SHAPE),
            make_pod("p").req(cpu="3", memory="6Gi").pod(),
            node(),
            75,
            id="rtcr-bin-pack",
        ),
        pytest.param(
            rtcr([{"utilization": 0, "score": 10}, {"utilization": 100, "score": 0}]),
            make_pod("p").req(cpu="3", memory="6Gi").pod(),
            node(),
            25,
            id="rtcr-spread",
        ),
        pytest.param(
            rtcr(BIN_PACK_SHAPE),
            make_pod("p").req(cpu="1", memory="4Gi").pod(),
            node(),
            38,
            id="rtcr-rounds-half-up-(25+50)/2",
        ),
        pytest.param(
            rtcr(BIN_PACK_SHAPE),
            make_pod("p").req(cpu="0", memory="4Gi").pod(),
            node(),
            50,
            id="rtcr-zero-resource-score-left-out",
        ),
        pytest.param(
            rtcr(
                [{"utilization": 0, "score": 10}, {"utilization": 100, "score": 3}],
                [{"name": "cpu"}],
            ),
            make_pod("p").req(cpu="100m").pod(),
            node(cpu="10"),
            100,
            id="rtcr-interpolation-truncates-toward-zero",  # 100 + (-70*1)/100 = 100
        ),
        pytest.param(
            rtcr([{"utilization": 20, "score": 2}, {"utilization": 60, "score": 8}]),
            make_pod("p").req(cpu="400m", memory="6Gi").pod(),
            node(),
            50,
            id="rtcr-flat-outside-shape",  # cpu util 10 -> 20; mem util 75 -> 80
        ),
        pytest.param(
            rtcr(BIN_PACK_SHAPE),
            make_pod("p").req(cpu="5", memory="8Gi").pod(),
            node(),
            100,
            id="rtcr-over-capacity-is-full-utilization",
        ),
    ],
)
def test_score(args: dict[str, Any], pod: Pod, node_info: NodeInfo, expected: int) -> None:
    pl = plugin(**args)
    state = CycleState()
    assert pl.pre_score(state, pod, [node_info]) is None
    assert pl.score(state, pod, node_info) == (expected, None)
    assert pl.score(CycleState(), pod, node_info) == (expected, None), "without PreScore state"
    snap = Snapshot([node_info])
    got = pl.score_vector(state, pod, snap, np.array([0], dtype=np.intp))
    assert got is not None
    assert got.tolist() == [expected]


def test_normalize_is_identity() -> None:
    scores = np.array([3, 99], dtype=np.int64)
    assert plugin().normalize_score(CycleState(), make_pod("p").pod(), scores) is None
    assert scores.tolist() == [3, 99]


def test_events() -> None:
    assert [e.event for e in plugin().events_to_register()] == [
        ClusterEvent(EventResource.POD, ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN),
        ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE),
        ClusterEvent(EventResource.DEVICE_CLASS, ActionType.ADD | ActionType.UPDATE),
    ]


# -- vector == scalar ------------------------------------------------------------------------------
RESOURCE_NAMES = ("cpu", "memory", "ephemeral-storage", "pods", *SCALARS)


@st.composite
def fit_args(draw: st.DrawFn) -> fit.Args:
    names = draw(st.lists(st.sampled_from(RESOURCE_NAMES), min_size=1, max_size=4, unique=True))
    strategy: dict[str, Any] = {
        "type": draw(st.sampled_from([t.value for t in fit.ScoringStrategyType])),
        "resources": [{"name": n, "weight": draw(st.integers(1, 5))} for n in names],
    }
    if strategy["type"] == "RequestedToCapacityRatio":
        xs = sorted(draw(st.sets(st.integers(0, 100), min_size=1, max_size=4)))
        strategy["requestedToCapacityRatio"] = {
            "shape": [{"utilization": x, "score": draw(st.integers(0, 10))} for x in xs]
        }
    return fit.Args.model_validate(
        {
            "ignoredResources": draw(st.lists(st.sampled_from(SCALARS), max_size=2, unique=True)),
            "ignoredResourceGroups": draw(
                st.lists(st.sampled_from(["vendor.io", "x"]), max_size=1)
            ),
            "scoringStrategy": strategy,
        }
    )


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), fit_args())
def test_filter_mask_equals_filter(case: tuple[Snapshot, Pod], args: fit.Args) -> None:
    snap, pod = case
    pl = fit.new(args, FakeHandle(snap))
    state = CycleState()
    pl.pre_filter(state, pod, snap.node_infos)
    mask = pl.filter_mask(state, pod, snap)
    expected = [pl.filter(state, pod, ni) is None for ni in snap.node_infos]
    assert mask is not None
    np.testing.assert_array_equal(mask, expected)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), fit_args(), st.data())
def test_filter_statuses_equal_filter(
    case: tuple[Snapshot, Pod], args: fit.Args, data: st.DataObject
) -> None:
    snap, pod = case
    rows = draw_rows(data, len(snap))
    pl = fit.new(args, FakeHandle(snap))
    state = CycleState()
    pl.pre_filter(state, pod, snap.node_infos)
    got = pl.filter_statuses(state, pod, snap, rows)
    assert got is not None
    said = [None if s is None else (s.code, s.reasons, s.plugin) for s in got]
    expected = []
    for i in rows.tolist():
        s = pl.filter(state, pod, snap.node_infos[i])
        expected.append(None if s is None else (s.code, s.reasons, s.plugin))
    assert said == expected


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), fit_args(), st.data())
def test_score_vector_equals_score(
    case: tuple[Snapshot, Pod], args: fit.Args, data: st.DataObject
) -> None:
    snap, pod = case
    rows = draw_rows(data, len(snap))
    pl = fit.new(args, FakeHandle(snap))
    state = CycleState()
    assert pl.pre_score(state, pod, snap.node_infos) is None
    got = pl.score_vector(state, pod, snap, rows)
    expected = [pl.score(state, pod, snap.node_infos[int(i)])[0] for i in rows]
    assert got is not None
    np.testing.assert_array_equal(got, expected)


def _hints() -> tuple[Any, Any]:
    pod_hint, node_hint, _ = (r.hint for r in plugin().events_to_register())
    assert pod_hint is not None and node_hint is not None
    return pod_hint, node_hint


def test_pod_hint() -> None:
    pod_hint, _ = _hints()
    want = make_pod("w").uid("w").req(cpu="1").pod()
    placed = make_pod("x").node("n1").req(cpu="2", memory="1Gi").pod()
    assert pod_hint(want, placed, None) is True, "a placed pod deleted frees room"
    assert pod_hint(want, make_pod("x").nominated("n1").pod(), None) is True, "nominated"
    assert pod_hint(want, make_pod("x").req(cpu="2").pod(), None) is False, "never placed"
    less_cpu = make_pod("x").node("n1").req(cpu="1", memory="1Gi").pod()
    less_mem = make_pod("x").node("n1").req(cpu="2", memory="512Mi").pod()
    assert pod_hint(want, placed, less_cpu) is True
    assert pod_hint(want, placed, less_mem) is False, "freed memory, the pod wants cpu"
    unplaced = make_pod("x").req(cpu="2").pod()
    assert pod_hint(want, unplaced, make_pod("x").req(cpu="1").pod()) is False
    assert pod_hint(want, want, make_pod("w").uid("w").req(cpu="500m").pod()) is True, "itself"


def test_node_hint() -> None:
    _, node_hint = _hints()
    want = make_pod("w").req(cpu="3").pod()
    small = make_node("n").alloc(cpu="2", memory="8Gi").node()
    big = make_node("n").alloc(cpu="4", memory="8Gi").node()
    assert node_hint(want, None, big) is True, "a new node it fits on"
    assert node_hint(want, None, small) is False, "a new node too small even empty"
    assert node_hint(want, small, big) is True, "cpu grew"
    more_mem = make_node("n").alloc(cpu="4", memory="16Gi").node()
    assert node_hint(want, big, more_mem) is False, "grew in memory; the pod wants cpu"
    more_pods = make_node("n").alloc(cpu="4", memory="8Gi", pods="200").node()
    assert node_hint(want, big, more_pods) is True, "room for more pods"


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        # Two nodes of 4 cpu / 8Gi; 3 cpu and 2Gi requested over both (a gang's members
        # included): cpu 3/8 used, memory 2/16 used.
        ("LeastAllocated", ((8 - 3) * 100 // 8 + (16 - 2) * 100 // 16) // 2),
        ("MostAllocated", (3 * 100 // 8 + 2 * 100 // 16) // 2),
    ],
)
def test_score_placement_applies_the_strategy_to_the_domain_summed(
    strategy: str, expected: int
) -> None:
    """kube-scheduler 1.37's ScorePlacement: one score for a topology domain, from its
    nodes' allocatable and requested resources added up."""
    pl = plugin(scoringStrategy={"type": strategy})
    a = (
        make_node("a")
        .alloc(cpu="4", memory="8Gi")
        .info(make_pod("m0").req(cpu="2", memory="1Gi").node("a").pod())
    )
    b = (
        make_node("b")
        .alloc(cpu="4", memory="8Gi")
        .info(make_pod("m1").req(cpu="1", memory="1Gi").node("b").pod())
    )
    assert pl.score_placement([a, b]) == expected
    empty = make_node("c").alloc(cpu="4", memory="8Gi").info()
    assert pl.score_placement([empty]) == (100 if strategy == "LeastAllocated" else 0)
