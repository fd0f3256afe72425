from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ActionType, ClusterEvent, EventResource
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.registry import NoArgs
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from kubesched.plugins import node_unschedulable
from tests.builders import make_node, make_pod
from tests.unit.plugins.fakes import FakeHandle
from tests.unit.plugins.strategies import cases

CORDONED = Status.unresolvable("node(s) were unschedulable", plugin="NodeUnschedulable")
UNKNOWN = Status.unresolvable("node(s) had unknown conditions", plugin="NodeUnschedulable")
KEY = "node.kubernetes.io/unschedulable"


@pytest.mark.parametrize(
    ("pod", "node", "expected"),
    [
        pytest.param(make_pod("p").pod(), make_node("n").info(), None, id="schedulable-node"),
        pytest.param(
            make_pod("p").pod(), make_node("n").unschedulable().info(), CORDONED, id="cordoned"
        ),
        pytest.param(
            make_pod("p").toleration(KEY, operator="Exists", effect="NoSchedule").pod(),
            make_node("n").unschedulable().info(),
            None,
            id="tolerates-unschedulable-taint",
        ),
        pytest.param(
            make_pod("p").toleration(KEY).pod(),
            make_node("n").unschedulable().info(),
            None,
            id="equal-empty-value-any-effect",
        ),
        pytest.param(
            make_pod("p").toleration(operator="Exists").pod(),
            make_node("n").unschedulable().info(),
            None,
            id="tolerates-everything",
        ),
        pytest.param(
            make_pod("p").toleration(KEY, operator="Exists", effect="NoExecute").pod(),
            make_node("n").unschedulable().info(),
            CORDONED,
            id="wrong-effect",
        ),
        pytest.param(
            make_pod("p").toleration(KEY, value="true").pod(),
            make_node("n").unschedulable().info(),
            CORDONED,
            id="wrong-value",
        ),
        pytest.param(make_pod("p").pod(), NodeInfo(name="gone"), UNKNOWN, id="no-node-object"),
    ],
)
def test_filter(pod: Pod, node: NodeInfo, expected: Status | None, handle: FakeHandle) -> None:
    plugin = node_unschedulable.new(NoArgs(), handle)
    assert plugin.filter(CycleState(), pod, node) == expected


def test_events(handle: FakeHandle) -> None:
    plugin = node_unschedulable.new(NoArgs(), handle)
    assert [e.event for e in plugin.events_to_register()] == [
        ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
        ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_TOLERATIONS),
    ]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_filter_mask_equals_filter(case: tuple[Snapshot, Pod]) -> None:
    snap, pod = case
    plugin = node_unschedulable.new(NoArgs(), FakeHandle(snap))
    state = CycleState()
    mask = plugin.filter_mask(state, pod, snap)
    expected = [plugin.filter(state, pod, ni) is None for ni in snap.node_infos]
    assert mask is not None
    np.testing.assert_array_equal(mask, expected)


def test_hints(handle: FakeHandle) -> None:
    node_hint, pod_hint = (
        r.hint for r in node_unschedulable.new(NoArgs(), handle).events_to_register()
    )
    assert node_hint is not None and pod_hint is not None
    pod = make_pod("p").uid("p").pod()
    cordoned, open_ = make_node("n").unschedulable().node(), make_node("n").node()
    assert node_hint(pod, cordoned, open_) is True, "uncordoned"
    assert node_hint(pod, open_, cordoned) is False
    assert node_hint(pod, None, open_) is True, "added schedulable"
    assert node_hint(pod, None, cordoned) is False, "added cordoned"
    tolerant = (
        make_pod("p")
        .uid("p")
        .toleration("node.kubernetes.io/unschedulable", operator="Exists")
        .pod()
    )
    assert pod_hint(pod, pod, tolerant) is True
    other = (
        make_pod("q")
        .uid("q")
        .toleration("node.kubernetes.io/unschedulable", operator="Exists")
        .pod()
    )
    assert pod_hint(pod, other, other) is False, "another pod's toleration"
    unrelated = make_pod("p").uid("p").toleration("x", operator="Exists").pod()
    assert pod_hint(pod, pod, unrelated) is False
