"""The scheduling queue on cluster events: which parked pods move (registered events,
queueing hints, pods in flight when the event came), the unschedulable pool's time limit,
and which pod updates count as which action.

Time is the event loop's, virtual (looptime): a 300-second wait takes no real time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from kubesched.backend.queue import SchedulingQueue
from kubesched.backend.queue_events import is_pod_updated, pod_update_actions
from kubesched.framework.interface import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
)
from kubesched.framework.types import Pod
from tests.builders import make_node, make_pod
from tests.unit.backend.queue_helpers import (
    ASSIGNED_POD_DELETE,
    EVENTS,
    NODE_ADD,
    NODE_LABEL,
    POD_DELETE,
    changed,
    fail,
    parked,
    pod,
    pop,
    queue,
    where,
)

# -- requeueing on cluster events ---------------------------------------------------------
MOVE_CASES = [
    pytest.param({"A"}, (), NODE_ADD, "backoff", id="registered-event-moves"),
    pytest.param({"A"}, (), POD_DELETE, "unschedulable", id="other-plugins-event-does-not"),
    pytest.param({"B"}, (), ASSIGNED_POD_DELETE, "backoff", id="pod-covers-assigned-pod"),
    pytest.param({"A", "B"}, (), POD_DELETE, "backoff", id="any-rejector-suffices"),
    pytest.param({"C"}, (), NODE_ADD, "unschedulable", id="unregistered-plugin"),
    pytest.param(set(), ("A",), NODE_ADD, "active", id="pending-plugin-skips-backoff"),
    pytest.param({"B"}, ("A",), NODE_ADD, "active", id="pending-wins-over-unschedulable"),
]


@pytest.mark.looptime
@pytest.mark.parametrize(("rejectors", "pending", "event", "expected"), MOVE_CASES)
async def test_move_on_registered_events_only(
    rejectors: set[str], pending: tuple[str, ...], event: ClusterEvent, expected: str
) -> None:
    q = queue()
    p = pod("p")
    parked(q, p, *rejectors, pending=pending)
    assert where(q, p) == "unschedulable"
    q.move_all_to_active_or_backoff(event)
    assert where(q, p) == expected


@pytest.mark.looptime
@pytest.mark.parametrize(
    ("pop_from_backoff", "after", "expected"),
    [
        (False, 0.5, "backoff"),
        (False, 1.0, "active"),
        # kube-scheduler 1.37: still backing off while its expiry's second lasts
        (True, 1.5, "backoff"),
        (True, 2.0, "active"),
    ],
)
async def test_moved_pod_whose_backoff_expired_goes_to_active(
    pop_from_backoff: bool, after: float, expected: str
) -> None:
    q = queue(pop_from_backoff=pop_from_backoff)
    p = pod("p")
    parked(q, p, "A")
    await asyncio.sleep(after)
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert where(q, p) == expected


@pytest.mark.looptime
async def test_only_the_matching_pods_move() -> None:
    q = queue()
    by_a, by_b = pod("by-a"), pod("by-b")
    parked(q, by_a, "A")
    parked(q, by_b, "B")
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert (where(q, by_a), where(q, by_b)) == ("backoff", "unschedulable")


def _ready_node_hint(p: Pod, old: object, new: object) -> bool:
    assert new is not None
    return bool(getattr(new, "labels", {}).get("ready") == "true")


def _broken_hint(p: Pod, old: object, new: object) -> bool:
    raise RuntimeError("hint bug")


HINT_CASES = [
    pytest.param(
        _ready_node_hint, make_node("n").label("ready", "false"), "unschedulable", id="skip"
    ),
    pytest.param(_ready_node_hint, make_node("n").label("ready", "true"), "backoff", id="queue"),
    pytest.param(_broken_hint, make_node("n"), "backoff", id="failing-hint-queues"),
]


@pytest.mark.looptime
@pytest.mark.parametrize(("hint", "node", "expected"), HINT_CASES)
async def test_queueing_hints_are_respected(
    hint: Callable[[Pod, object, object], bool], node: Any, expected: str
) -> None:
    q = queue(events={"A": [ClusterEventWithHint(NODE_LABEL, hint)]})
    p = pod("p")
    parked(q, p, "A")
    q.move_all_to_active_or_backoff(NODE_LABEL, make_node("n").node(), node.node())
    assert where(q, p) == expected


@pytest.mark.looptime
async def test_hint_sees_the_parked_pod_and_both_objects() -> None:
    seen: list[tuple[str, object, object]] = []

    def hint(p: Pod, old: object, new: object) -> bool:
        seen.append((p.name, old, new))
        return False

    q = queue(events={"A": [ClusterEventWithHint(NODE_LABEL, hint)]})
    parked(q, pod("p"), "A")
    q.move_all_to_active_or_backoff(NODE_LABEL, "old", "new")
    assert seen == [("p", "old", "new")]


@pytest.mark.looptime
async def test_assigned_pod_added_moves_pods_waiting_for_pods() -> None:
    q = queue(
        events={"Affinity": [ClusterEventWithHint(ClusterEvent(EventResource.POD, ActionType.ADD))]}
    )
    waiting, other = pod("waiting"), pod("other")
    parked(q, waiting, "Affinity")
    parked(q, other, "A")
    q.assigned_pod_added(make_pod("bound").node("n1").pod())
    assert (where(q, waiting), where(q, other)) == ("backoff", "unschedulable")


@pytest.mark.looptime
async def test_assigned_pod_updated_uses_the_kind_of_update() -> None:
    label_event = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.UPDATE_POD_LABEL)
    q = queue(events={"Spread": [ClusterEventWithHint(label_event)]})
    p = pod("p")
    parked(q, p, "Spread")
    old = make_pod("bound").node("n1").pod()
    q.assigned_pod_updated(old, changed(old, lambda r: r["status"].update(phase="Failed")))
    assert where(q, p) == "unschedulable"
    q.assigned_pod_updated(old, changed(old, lambda r: r["metadata"].update(labels={"a": "b"})))
    assert where(q, p) == "backoff"


# -- events while a pod is in flight ------------------------------------------------------
IN_FLIGHT_CASES = [
    pytest.param(True, NODE_ADD, "backoff", id="hints-relevant-event"),
    pytest.param(True, POD_DELETE, "unschedulable", id="hints-other-plugins-event"),
    pytest.param(True, None, "unschedulable", id="hints-no-event"),
    pytest.param(False, NODE_ADD, "backoff", id="legacy-relevant-event"),
    pytest.param(False, POD_DELETE, "backoff", id="legacy-any-move-request"),
    pytest.param(False, None, "unschedulable", id="legacy-no-event"),
]


@pytest.mark.looptime
@pytest.mark.parametrize(("hints", "event", "expected"), IN_FLIGHT_CASES)
async def test_event_during_the_cycle_sends_the_pod_to_backoff(
    hints: bool, event: ClusterEvent | None, expected: str
) -> None:
    q = queue(queueing_hints=hints)
    p = pod("p")
    q.add(p)
    qpi = pop(q)
    cycle = q.scheduling_cycle()
    if event is not None:
        q.move_all_to_active_or_backoff(event)
    fail(q, qpi, "A", cycle=cycle)
    assert where(q, p) == expected


@pytest.mark.looptime
async def test_event_before_the_cycle_does_not_count() -> None:
    q = queue()
    p = pod("p")
    q.add(p)
    q.move_all_to_active_or_backoff(NODE_ADD)
    qpi = pop(q)
    fail(q, qpi, "A")
    assert where(q, p) == "unschedulable"


@pytest.mark.looptime
async def test_move_request_after_done_still_counts_for_a_late_failure() -> None:
    # A binding cycle fails after done(): the move request cycle decides.
    q = queue()
    p = pod("p")
    q.add(p)
    qpi = pop(q)
    cycle = q.scheduling_cycle()
    q.done(p.uid)
    q.move_all_to_active_or_backoff(NODE_ADD)
    fail(q, qpi, "A", cycle=cycle)
    assert where(q, p) == "backoff"


@pytest.mark.looptime
async def test_pod_deleted_in_flight_is_not_requeued() -> None:
    q = queue()
    p = pod("p")
    q.add(p)
    qpi = pop(q)
    q.delete(p)
    fail(q, qpi, "A")
    assert where(q, p) is None and q.idle()


@pytest.mark.looptime
@pytest.mark.parametrize(
    ("rejector", "hints", "expected"),
    [
        # kube-scheduler 1.37: the update is one of the events seen in flight, and the
        # failed attempt's rejectors' hints are asked about it
        ("A", True, "unschedulable"),  # A registered for node adds only
        ("L", True, "backoff"),  # L registered for pod label updates
        ("A", False, "backoff"),  # without queueing hints, any update moves it
    ],
)
async def test_pod_updated_in_flight_is_requeued_in_its_new_version(
    rejector: str, hints: bool, expected: str
) -> None:
    label_update = ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_LABEL)
    q = queue(events={**EVENTS, "L": [ClusterEventWithHint(label_update)]}, queueing_hints=hints)
    p = pod("p")
    q.add(p)
    qpi = pop(q)
    newer = changed(p, lambda r: r["metadata"].update(labels={"fixed": "yes"}))
    q.update(p, newer)
    fail(q, qpi, rejector)
    assert where(q, p) == expected
    got = q.get(p.uid)
    assert got is not None and got.pod.labels == {"fixed": "yes"}


# -- the unschedulable pool's time limit --------------------------------------------------
@pytest.mark.looptime
async def test_left_over_pods_are_flushed_after_five_minutes(
    running: Callable[[SchedulingQueue], None],
) -> None:
    q = queue(max_unschedulable_duration=300.0)
    running(q)
    p = pod("p")
    parked(q, p, "A")
    await asyncio.sleep(299)
    assert where(q, p) == "unschedulable"
    # The pool is checked every 30 s: the first check past 300 s is at 330 s.
    await asyncio.sleep(31)
    assert where(q, p) == "unschedulable"
    await asyncio.sleep(1)
    assert where(q, p) == "active"


# -- helpers ------------------------------------------------------------------------------
def _relabel(r: dict[str, Any]) -> None:
    r["metadata"]["labels"] = {"x": "y"}


def _shrink(r: dict[str, Any]) -> None:
    r["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100m"}}


def _ungate(r: dict[str, Any]) -> None:
    r["spec"].pop("schedulingGates", None)


def _image(r: dict[str, Any]) -> None:
    r["spec"]["containers"][0]["image"] = "other"


def _shrink_scratch(r: dict[str, Any]) -> None:
    r["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", "ephemeral-storage": "1Gi"}}


def _tolerate(r: dict[str, Any]) -> None:
    r["spec"]["tolerations"] = [
        {"key": "a", "effect": "NoExecute", "tolerationSeconds": 60},
        {"key": "b", "operator": "Exists"},
    ]


def _toleration_seconds(r: dict[str, Any]) -> None:
    r["spec"]["tolerations"] = [{"key": "a", "effect": "NoExecute", "tolerationSeconds": 30}]


def _claim_generated(r: dict[str, Any]) -> None:
    r["status"]["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": "p-gpu-x1"}]


UPDATE_CASES = [
    pytest.param(_relabel, ActionType.UPDATE_POD_LABEL, id="labels"),
    pytest.param(_shrink, ActionType.UPDATE_POD_SCALE_DOWN, id="scale-down"),
    pytest.param(_shrink_scratch, ActionType.UPDATE_POD_SCALE_DOWN, id="scale-down-scratch"),
    pytest.param(_ungate, ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED, id="gates"),
    pytest.param(_tolerate, ActionType.UPDATE_POD_TOLERATIONS, id="toleration-added"),
    # kube-scheduler counts tolerations: a changed tolerationSeconds is no toleration event
    pytest.param(_toleration_seconds, ActionType.UPDATE_OTHER, id="toleration-seconds"),
    pytest.param(
        _claim_generated, ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM, id="generated-claim"
    ),
    pytest.param(_image, ActionType.UPDATE_OTHER, id="other"),
]


@pytest.mark.parametrize(("edit", "action"), UPDATE_CASES)
def test_pod_update_actions(edit: Callable[[dict[str, Any]], None], action: ActionType) -> None:
    old = make_pod("p").req(cpu="1", ephemeral_storage="2Gi").gate("g").pod()
    old = changed(
        old,
        lambda r: r["spec"].update(
            tolerations=[{"key": "a", "effect": "NoExecute", "tolerationSeconds": 60}]
        ),
    )
    new = changed(old, edit)
    assert pod_update_actions(old, new) == action
    assert is_pod_updated(old, new)


def _status_only(r: dict[str, Any]) -> None:
    r["metadata"]["resourceVersion"] = "9"
    r["status"]["phase"] = "Failed"


def test_status_and_resource_version_are_not_updates() -> None:
    old = make_pod("p").pod()
    assert not is_pod_updated(old, changed(old, _status_only))
