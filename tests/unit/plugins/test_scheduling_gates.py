from __future__ import annotations

import copy

import pytest

from kubesched.backend.queue import SchedulingQueue
from kubesched.framework.interface import ActionType, ClusterEvent, EventResource
from kubesched.framework.registry import NoArgs
from kubesched.framework.status import Code
from kubesched.framework.types import Pod
from kubesched.plugins import scheduling_gates
from tests.builders import make_pod
from tests.unit.plugins.fakes import FakeHandle


def plugin() -> scheduling_gates.SchedulingGates:
    return scheduling_gates.new(NoArgs(), FakeHandle())


@pytest.mark.parametrize(
    ("pod", "message"),
    [
        pytest.param(make_pod("p").pod(), None, id="no-gates"),
        pytest.param(
            make_pod("p").gate("example.com/quota").pod(),
            "waiting for scheduling gates: [example.com/quota]",
            id="one-gate",
        ),
        pytest.param(
            make_pod("p").gate("gate1").gate("gate2").pod(),
            "waiting for scheduling gates: [gate1 gate2]",
            id="two-gates-in-spec-order",
        ),
    ],
)
def test_pre_enqueue(pod: Pod, message: str | None) -> None:
    st = plugin().pre_enqueue(pod)
    if message is None:
        assert st is None
    else:
        assert st is not None
        assert st.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
        assert st.reasons == (message,)
        assert st.plugin == "SchedulingGates"


def _without_gates(pod: Pod) -> Pod:
    raw = copy.deepcopy(dict(pod.raw))
    raw["spec"].pop("schedulingGates", None)
    return Pod(raw)


def test_registers_gates_eliminated_with_a_hint_for_this_pod_only() -> None:
    (reg,) = plugin().events_to_register()
    assert reg.event == ClusterEvent(
        EventResource.POD, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED
    )
    gated = make_pod("p").gate("g").pod()
    other = make_pod("q").gate("g").pod()
    assert reg.hint is not None
    assert reg.hint(gated, gated, _without_gates(gated)) is True
    assert reg.hint(gated, other, _without_gates(other)) is False
    assert reg.hint(gated, gated, gated) is False


def test_queue_holds_a_gated_pod_until_its_gates_are_removed() -> None:
    pl = plugin()
    q = SchedulingQueue(
        pre_enqueue=[pl], events={pl.name: pl.events_to_register()}, clock=lambda: 0.0
    )
    gated = make_pod("p").gate("a").gate("b").pod()
    q.add(gated)
    qpi = q.get(gated.uid)
    assert qpi is not None and qpi.gated
    assert qpi.message == "waiting for scheduling gates: [a b]"
    assert q.pop_nowait() is None

    raw = copy.deepcopy(dict(gated.raw))
    raw["spec"]["schedulingGates"] = [{"name": "b"}]
    one_left = Pod(raw)
    q.update(gated, one_left)
    qpi = q.get(gated.uid)
    assert qpi is not None and qpi.gated
    assert qpi.message == "waiting for scheduling gates: [b]"

    q.update(one_left, _without_gates(one_left))
    popped = q.pop_nowait()
    assert popped is not None and popped.pod.uid == gated.uid
