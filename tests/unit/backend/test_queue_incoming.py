"""What the queue tells ``scheduler_queue_incoming_pods_total``: the queue a pod entered and
kube-scheduler's label of the event that moved it (``SchedulingQueue.on_incoming``)."""

from __future__ import annotations

from typing import Any

from kubesched.backend.queue import SchedulingQueue
from kubesched.framework.interface import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
)
from kubesched.framework.types import Node
from tests.builders import make_node
from tests.unit.backend.queue_helpers import (
    EVENTS,
    NODE_ADD,
    SchedulingGates,
    changed,
    fail,
    parked,
    pod,
    pop,
    queue,
)

NODE_TAINT = ClusterEvent(EventResource.NODE, ActionType.UPDATE_NODE_TAINT)
NODE_LABEL_AND_TAINT = ClusterEvent(
    EventResource.NODE, ActionType.UPDATE_NODE_LABEL | ActionType.UPDATE_NODE_TAINT
)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def counted(**kw: Any) -> tuple[SchedulingQueue, list[tuple[str, str]], Clock]:
    clock = Clock()
    q = queue(clock=clock, **kw)
    seen: list[tuple[str, str]] = []
    q.on_incoming = lambda where, event: seen.append((where, event))
    return q, seen, clock


def test_a_new_pod_enters_activeq_and_a_gated_one_the_unschedulable_pool() -> None:
    q, seen, _ = counted(pre_enqueue=[SchedulingGates()])
    q.add(pod("p"))
    gated = pod("g")
    gated = changed(gated, lambda r: r["spec"].update(schedulingGates=[{"name": "wait"}]))
    q.add(gated)
    assert seen == [("active", "UnscheduledPodAdd"), ("unschedulable", "UnscheduledPodAdd")]
    # still gated after an update: it stays where it was, and is not counted again
    q.update(gated, changed(gated, lambda r: r["metadata"].update(labels={"x": "1"})))
    assert len(seen) == 2
    # its gates removed: it enters activeQ on its own update, kube's TargetPod event
    ungated = changed(gated, lambda r: r["spec"].pop("schedulingGates"))
    q.update(gated, ungated)
    assert seen[2:] == [("active", "TargetPodUpdatePodSchedulingGatesEliminated")]


def test_a_failed_attempt_is_counted_where_it_goes() -> None:
    q, seen, _ = counted()
    parked(q, pod("rejected"), "A")
    q.add(pod("errored"))
    fail(q, pop(q))  # no rejecting plugin: an error, to backoffQ
    assert seen == [
        ("active", "UnscheduledPodAdd"),
        ("unschedulable", "ScheduleAttemptFailure"),
        ("active", "UnscheduledPodAdd"),
        ("backoff", "ScheduleAttemptFailure"),
    ]


def test_an_event_counts_the_pods_it_moves_and_only_those() -> None:
    q, seen, clock = counted()
    parked(q, pod("nodes"), "A")  # A registered for NodeAdd
    parked(q, pod("pods"), "B")  # B for pod deletes
    del seen[:]
    q.move_all_to_active_or_backoff(NODE_ADD, None, make_node("n").node())
    assert seen == [("backoff", "NodeAdd")]  # only the pod A rejected; backing off
    clock.t += 60  # past every backoff
    q.flush_unschedulable_left_over()  # "pods" has not waited 5 minutes: stays
    assert seen == [("backoff", "NodeAdd")]
    clock.t += 300
    q.flush_unschedulable_left_over()
    assert seen[1:] == [("active", "UnschedulableTimeout")]


def test_backoff_completed_popped_early_and_activated_pods_are_named_as_kubes() -> None:
    q, seen, clock = counted()
    for name in ("early", "complete", "activated"):
        q.add(pod(name))
        fail(q, pop(q), "A")
        q.move_all_to_active_or_backoff(NODE_ADD, None, make_node(name).node())
    del seen[:]
    q.activate([next(qpi.pod for qpi, _ in q.pending_pods() if qpi.pod.name == "activated")])
    assert seen == [("active", "ForceActivate")]
    pop(q)  # the activated pod, from activeQ
    pop(q)  # activeQ empty: the head of backoffQ, backoff or not
    assert seen[1:] == [("active", "PopFromBackoffQ")]
    clock.t += 60
    q.flush_backoff_completed()
    assert seen[2:] == [("active", "BackoffComplete")]


def test_an_update_of_several_kinds_is_named_by_the_first_kind_that_moves_the_pod() -> None:
    """kube-scheduler delivers a node update of several kinds as one event per kind, in
    its order (allocatable, label, taint, ...; ``spec.unschedulable`` first of all), and
    the first that moves a pod names it in the metric."""
    events: dict[str, list[ClusterEventWithHint]] = {
        **EVENTS,
        "Taints": [ClusterEventWithHint(NODE_TAINT)],
        "Both": [ClusterEventWithHint(NODE_LABEL_AND_TAINT)],
    }
    q, seen, _ = counted(events=events)
    parked(q, pod("taints"), "Taints")
    parked(q, pod("both"), "Both")
    del seen[:]
    old = make_node("n").node()
    new = Node({**old.raw, "spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}})
    new = Node({**new.raw, "metadata": {**new.raw["metadata"], "labels": {"zone": "b"}}})
    q.move_all_to_active_or_backoff(NODE_LABEL_AND_TAINT, old, new)
    assert sorted(seen) == [("backoff", "NodeUpdateNodeLabel"), ("backoff", "NodeUpdateNodeTaint")]
    # spec.unschedulable: kube's first event, a taint change, ahead of the label's
    parked(q, pod("both2"), "Both")
    del seen[:]
    cordoned = Node({**new.raw, "spec": {**new.raw["spec"], "unschedulable": True}})
    relabelled = Node(
        {**cordoned.raw, "metadata": {**cordoned.raw["metadata"], "labels": {"zone": "c"}}}
    )
    q.move_all_to_active_or_backoff(NODE_LABEL_AND_TAINT, new, relabelled)
    assert seen == [("backoff", "NodeUpdateNodeTaint")]


def test_the_hints_are_asked_again_to_name_a_multi_kind_update_only_when_counted() -> None:
    asked: list[str] = []

    def hint(p: Any, old: object, new: object) -> bool:
        asked.append(p.name)
        return True

    events = {**EVENTS, "Both": [ClusterEventWithHint(NODE_LABEL_AND_TAINT, hint)]}
    old = make_node("n").node()
    new = Node({**old.raw, "metadata": {**old.raw["metadata"], "labels": {"zone": "b"}}})
    for counting, expected in ((False, ["p"]), (True, ["p", "p"])):
        asked.clear()
        q, seen, _ = counted(events=events)
        if not counting:
            q.on_incoming = None
        parked(q, pod("p"), "Both")
        q.move_all_to_active_or_backoff(NODE_LABEL_AND_TAINT, old, new)
        assert asked == expected
        assert seen[-1:] == ([("backoff", "NodeUpdateNodeLabel")] if counting else [])
