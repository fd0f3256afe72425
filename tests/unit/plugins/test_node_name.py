from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ActionType, ClusterEvent, EventResource, PreFilterResult
from kubesched.framework.registry import NoArgs
from kubesched.framework.runtime import FrameworkServices
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from kubesched.plugins import node_name
from kubesched.profiles import compile_profile, default_profile_spec
from kubesched.scheduler.algorithm import Algorithm, FitError
from tests.builders import make_node, make_pod
from tests.unit.plugins.fakes import FakeHandle
from tests.unit.plugins.strategies import cases

MISMATCH = Status.unresolvable("node(s) didn't match the requested node name", plugin="NodeName")


@pytest.mark.parametrize(
    ("pod", "node", "expected"),
    [
        pytest.param(make_pod("p").pod(), "n1", None, id="no-node-name-fits-any"),
        pytest.param(make_pod("p").spec(nodeName="n1").pod(), "n1", None, id="matching-name"),
        pytest.param(make_pod("p").spec(nodeName="n2").pod(), "n1", MISMATCH, id="other-name"),
    ],
)
def test_filter(pod: Pod, node: str, expected: Status | None, handle: FakeHandle) -> None:
    plugin = node_name.new(NoArgs(), handle)
    assert plugin.filter(CycleState(), pod, make_node(node).info()) == expected


def test_filter_mask_selects_the_named_row(handle: FakeHandle) -> None:
    plugin = node_name.new(NoArgs(), handle)
    snap = Snapshot([make_node(n).info() for n in ("a", "b", "c")])
    mask = plugin.filter_mask(CycleState(), make_pod("p").spec(nodeName="b").pod(), snap)
    assert mask is not None
    assert mask.tolist() == [False, True, False]
    gone = plugin.filter_mask(CycleState(), make_pod("p").spec(nodeName="zz").pod(), snap)
    assert gone is not None
    assert not gone.any()


def test_events(handle: FakeHandle) -> None:
    plugin = node_name.new(NoArgs(), handle)
    assert [e.event for e in plugin.events_to_register()] == [
        ClusterEvent(EventResource.NODE, ActionType.ADD)
    ]


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_filter_mask_equals_filter(case: tuple[Snapshot, Pod]) -> None:
    snap, pod = case
    plugin = node_name.new(NoArgs(), FakeHandle(snap))
    state = CycleState()
    mask = plugin.filter_mask(state, pod, snap)
    expected = [plugin.filter(state, pod, ni) is None for ni in snap.node_infos]
    assert mask is not None
    np.testing.assert_array_equal(mask, expected)


# -- v1.37: PreFilter narrows to the named node ----------------------------------------------------
def test_pre_filter_narrows_to_the_named_node(handle: FakeHandle) -> None:
    plugin = node_name.new(NoArgs(), handle)
    result, status = plugin.pre_filter(CycleState(), make_pod("p").spec(nodeName="b").pod(), [])
    assert status is None
    assert result == PreFilterResult({"b"})
    assert plugin.pre_filter(CycleState(), make_pod("p").pod(), []) == (None, None)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        pytest.param(
            "b",
            "0/3 nodes are available: 1 node(s) were unschedulable, "
            "2 node(s) didn't satisfy plugin(s) [NodeName].",
            id="named-node-cordoned",
        ),
        pytest.param(
            "zz",
            "0/3 nodes are available: 3 node(s) didn't satisfy plugin(s) [NodeName].",
            id="named-node-missing",
        ),
    ],
)
def test_default_profile_fit_error(target: str, message: str) -> None:
    snap = Snapshot([make_node(n).unschedulable(n == "b").info() for n in ("a", "b", "c")])
    fwk = compile_profile(default_profile_spec(), FrameworkServices(snapshot=lambda: snap))
    pod = make_pod("p").spec(nodeName=target).pod()
    with pytest.raises(FitError) as exc:
        Algorithm().schedule_pod(fwk.framework, CycleState(), pod, snap)
    assert str(exc.value) == message
