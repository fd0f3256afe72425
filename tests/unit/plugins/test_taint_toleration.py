from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ActionType, ClusterEvent, EventResource
from kubesched.framework.registry import NoArgs
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from kubesched.plugins import taint_toleration
from tests.builders import NodeBuilder, make_node, make_pod
from tests.unit.plugins.fakes import FakeHandle
from tests.unit.plugins.strategies import cases, draw_rows


def untolerated(key: str, value: str) -> Status:
    # kube-scheduler 1.37 names no taint (kubernetes#134740); key and value say which
    # taint the case means
    return Status.unresolvable("node(s) had untolerated taint(s)", plugin="TaintToleration")


@pytest.mark.parametrize(
    ("pod", "node", "expected"),
    [
        pytest.param(make_pod("p").pod(), make_node("n"), None, id="no-taints"),
        pytest.param(
            make_pod("p").pod(),
            make_node("n").taint("dedicated", "gpu", "NoSchedule"),
            untolerated("dedicated", "gpu"),
            id="noschedule-untolerated",
        ),
        pytest.param(
            make_pod("p").pod(),
            make_node("n").taint("dedicated", "", "NoExecute"),
            untolerated("dedicated", ""),
            id="noexecute-untolerated-empty-value",
        ),
        pytest.param(
            make_pod("p").pod(),
            make_node("n").taint("soft", "x", "PreferNoSchedule"),
            None,
            id="prefer-no-schedule-not-filtered",
        ),
        pytest.param(
            make_pod("p").toleration("dedicated", "gpu", "NoSchedule").pod(),
            make_node("n").taint("dedicated", "gpu", "NoSchedule"),
            None,
            id="equal-toleration",
        ),
        pytest.param(
            make_pod("p").toleration("dedicated", "cpu", "NoSchedule").pod(),
            make_node("n").taint("dedicated", "gpu", "NoSchedule"),
            untolerated("dedicated", "gpu"),
            id="value-mismatch",
        ),
        pytest.param(
            make_pod("p").toleration("dedicated", operator="Exists").pod(),
            make_node("n")
            .taint("dedicated", "gpu", "NoSchedule")
            .taint("dedicated", "x", "NoExecute"),
            None,
            id="exists-any-value-any-effect",
        ),
        pytest.param(
            make_pod("p").toleration("dedicated", "gpu", "NoExecute").pod(),
            make_node("n").taint("dedicated", "gpu", "NoSchedule"),
            untolerated("dedicated", "gpu"),
            id="effect-mismatch",
        ),
        pytest.param(
            make_pod("p").toleration("a", "1").pod(),
            make_node("n").taint("a", "1").taint("b", "2").taint("c", "3"),
            untolerated("b", "2"),
            id="first-untolerated-in-node-order",
        ),
        pytest.param(
            make_pod("p").toleration(operator="Exists").pod(),
            make_node("n").taint("a", "1").taint("b", "2", "NoExecute"),
            None,
            id="tolerate-everything",
        ),
    ],
)
def test_filter(pod: Pod, node: NodeBuilder, expected: Status | None, handle: FakeHandle) -> None:
    plugin = taint_toleration.new(NoArgs(), handle)
    assert plugin.filter(CycleState(), pod, node.info()) == expected


@pytest.mark.parametrize(
    ("pod", "node", "expected"),
    [
        pytest.param(make_pod("p").pod(), make_node("n"), 0, id="no-taints"),
        pytest.param(
            make_pod("p").pod(),
            make_node("n").taint("a", "1", "PreferNoSchedule").taint("b", "", "PreferNoSchedule"),
            2,
            id="two-untolerated",
        ),
        pytest.param(
            make_pod("p").pod(),
            make_node("n").taint("a", "1", "NoSchedule").taint("b", "", "PreferNoSchedule"),
            1,
            id="hard-taints-not-counted",
        ),
        pytest.param(
            make_pod("p").toleration("a", "1", "PreferNoSchedule").pod(),
            make_node("n").taint("a", "1", "PreferNoSchedule").taint("b", "", "PreferNoSchedule"),
            1,
            id="prefer-toleration",
        ),
        pytest.param(
            make_pod("p").toleration("a", "1").pod(),
            make_node("n").taint("a", "1", "PreferNoSchedule"),
            0,
            id="empty-effect-toleration-counts",
        ),
        pytest.param(
            make_pod("p").toleration("a", "1", "NoSchedule").pod(),
            make_node("n").taint("a", "1", "PreferNoSchedule"),
            1,
            id="noschedule-toleration-ignored-for-score",
        ),
    ],
)
def test_score(pod: Pod, node: NodeBuilder, expected: int, handle: FakeHandle) -> None:
    plugin = taint_toleration.new(NoArgs(), handle)
    state = CycleState()
    assert plugin.pre_score(state, pod, []) is None
    assert plugin.score(state, pod, node.info()) == (expected, None)
    # Without PreScore (e.g. preemption's what-if), the same answer.
    assert plugin.score(CycleState(), pod, node.info()) == (expected, None)


@pytest.mark.parametrize(
    ("raw", "normalized"),
    [
        pytest.param([0, 1, 2], [100, 50, 0], id="fewer-untolerated-is-better"),
        pytest.param([0, 0, 0], [100, 100, 100], id="all-zero"),
        pytest.param([3, 3], [0, 0], id="all-equal"),
        pytest.param([1, 3, 0], [67, 0, 100], id="truncation"),
        pytest.param([], [], id="empty"),
    ],
)
def test_normalize_score(raw: list[int], normalized: list[int], handle: FakeHandle) -> None:
    plugin = taint_toleration.new(NoArgs(), handle)
    scores = np.array(raw, dtype=np.int64)
    assert plugin.normalize_score(CycleState(), make_pod("p").pod(), scores) is None
    assert scores.tolist() == normalized


def test_events(handle: FakeHandle) -> None:
    plugin = taint_toleration.new(NoArgs(), handle)
    assert [e.event for e in plugin.events_to_register()] == [
        ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
        ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_TOLERATIONS),
    ]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_filter_mask_equals_filter(case: tuple[Snapshot, Pod]) -> None:
    snap, pod = case
    plugin = taint_toleration.new(NoArgs(), FakeHandle(snap))
    state = CycleState()
    mask = plugin.filter_mask(state, pod, snap)
    expected = [plugin.filter(state, pod, ni) is None for ni in snap.node_infos]
    assert mask is not None
    np.testing.assert_array_equal(mask, expected)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.data())
def test_score_vector_equals_score(case: tuple[Snapshot, Pod], data: st.DataObject) -> None:
    snap, pod = case
    rows = draw_rows(data, len(snap))
    plugin = taint_toleration.new(NoArgs(), FakeHandle(snap))
    state = CycleState()
    plugin.pre_score(state, pod, snap.node_infos)
    got = plugin.score_vector(state, pod, snap, rows)
    expected = [plugin.score(state, pod, snap.node_infos[int(i)])[0] for i in rows]
    assert got is not None
    np.testing.assert_array_equal(got, expected)


def test_hints(handle: FakeHandle) -> None:
    node_hint, pod_hint = (
        r.hint for r in taint_toleration.new(NoArgs(), handle).events_to_register()
    )
    assert node_hint is not None and pod_hint is not None
    pod = make_pod("p").uid("p").pod()
    tainted, clean = make_node("n").taint("k").node(), make_node("n").node()
    assert node_hint(pod, tainted, clean) is True, "the taint went away"
    assert node_hint(pod, clean, tainted) is False
    assert node_hint(pod, None, clean) is True
    assert node_hint(pod, None, tainted) is False
    soft = make_node("n").taint("k", effect="PreferNoSchedule").node()
    assert node_hint(pod, clean, soft) is False, "was tolerated already"
    assert pod_hint(pod, pod, make_pod("p").uid("p").toleration("k").pod()) is True
    other = make_pod("q").uid("q").toleration("k").pod()
    assert pod_hint(pod, other, other) is False, "another pod's toleration"
