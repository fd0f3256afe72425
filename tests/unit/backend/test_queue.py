"""The scheduling queue: order, gates, activate, updates and deletes, run and pop,
QueueSet, the pod heap (backoff: test_queue_backoff.py; cluster events:
test_queue_events.py).

Time is the event loop's, virtual (looptime): a 300-second wait takes no real time.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from kubesched.backend.queue import SchedulingQueue
from kubesched.backend.queue_heap import PodHeap
from kubesched.backend.queue_set import QueueClosed, QueueSet
from kubesched.framework.interface import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
)
from kubesched.framework.nodeinfo import QueuedPodInfo
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from tests.builders import make_pod
from tests.unit.backend.queue_helpers import (
    EVENTS,
    NODE_ADD,
    PODGROUP_ADD,
    SORT,
    GroupGate,
    SchedulingGates,
    changed,
    fail,
    now,
    parked,
    pod,
    pop,
    queue,
    where,
)

# -- order --------------------------------------------------------------------------------
ORDER_CASES = [
    pytest.param([("a", 0), ("b", 0), ("c", 0)], ["a", "b", "c"], id="fifo-among-equals"),
    pytest.param([("low", 1), ("high", 10), ("mid", 5)], ["high", "mid", "low"], id="priority"),
    pytest.param(
        [("a", 0), ("b", 10), ("c", 5), ("d", 10), ("e", 0)],
        ["b", "d", "c", "a", "e"],
        id="priority-then-fifo",
    ),
]


@pytest.mark.looptime
@pytest.mark.parametrize("ordering", ["sort_key", "less"])
@pytest.mark.parametrize(("pods", "expected"), ORDER_CASES)
async def test_pop_order(ordering: str, pods: list[tuple[str, int]], expected: list[str]) -> None:
    q = queue(sort_key=None, less=SORT.less) if ordering == "less" else queue()
    for name, prio in pods:
        q.add(pod(name, prio))
    popped = [q.pop_nowait() for _ in pods]
    assert [qpi.pod.name for qpi in popped if qpi is not None] == expected
    assert q.pop_nowait() is None


@pytest.mark.looptime
async def test_earlier_timestamp_first_within_priority() -> None:
    q = queue()
    q.add(pod("first"))
    await asyncio.sleep(1)
    q.add(pod("urgent", 5))
    q.add(pod("second"))
    assert [pop(q).pod.name for _ in range(3)] == ["urgent", "first", "second"]


@pytest.mark.looptime
async def test_pop_counts_attempts_and_cycles() -> None:
    q = queue()
    q.add(pod("p"))
    await asyncio.sleep(3)
    qpi = pop(q)
    assert (qpi.attempts, qpi.initial_attempt_timestamp, q.scheduling_cycle()) == (1, 3.0, 1)
    assert where(q, qpi.pod) == "inFlight" and not q.idle()
    q.done(qpi.pod.uid)
    assert q.idle()


# -- gates --------------------------------------------------------------------------------
@pytest.mark.looptime
async def test_gated_pod_is_released_when_its_gates_are_removed() -> None:
    q = queue(pre_enqueue=[SchedulingGates()])
    gated = make_pod("p").gate("example.com/quota").pod()
    q.add(gated)
    qpi = q.get(gated.uid)
    assert qpi is not None and (qpi.gated, qpi.gating_plugin) == (True, "SchedulingGates")
    assert q.pending_counts()["gated"] == 1 and not q.can_pop()
    assert q.pop_nowait() is None

    status_only = changed(gated, lambda r: r["status"].update(phase="Pending", reason="x"))
    q.update(gated, status_only)
    assert where(q, gated) == "gated"

    ungated = changed(gated, lambda r: r["spec"].pop("schedulingGates"))
    q.update(status_only, ungated)
    assert where(q, gated) == "active"  # never tried: no backoff
    qpi = pop(q)
    assert (qpi.attempts, qpi.gated, qpi.gating_plugin) == (1, False, "")


@pytest.mark.looptime
async def test_gated_pod_is_released_by_an_event_its_gate_registered() -> None:
    gate = GroupGate()
    q = queue(
        pre_enqueue=[gate], events={**EVENTS, gate.name: [ClusterEventWithHint(PODGROUP_ADD)]}
    )
    p = make_pod("p").label("group", "g").pod()
    q.add(p)
    assert where(q, p) == "gated"
    q.move_all_to_active_or_backoff(NODE_ADD)  # not the gate's event
    assert where(q, p) == "gated"
    q.move_all_to_active_or_backoff(PODGROUP_ADD)  # the gate's event, but still no group
    assert where(q, p) == "gated"
    gate.groups.add("g")
    q.move_all_to_active_or_backoff(PODGROUP_ADD)
    assert where(q, p) == "active"


@pytest.mark.looptime
async def test_left_over_flush_does_not_release_gated_pods(
    running: Callable[[SchedulingQueue], None],
) -> None:
    q = queue(pre_enqueue=[SchedulingGates()])
    running(q)
    p = make_pod("p").gate("g").pod()
    q.add(p)
    await asyncio.sleep(600)
    assert where(q, p) == "gated"


# -- activate -----------------------------------------------------------------------------
@pytest.mark.looptime
async def test_activate_moves_parked_and_backing_off_pods_now() -> None:
    q = queue()
    parked_pod, backing_off, unknown = pod("parked"), pod("backing-off"), pod("unknown")
    parked(q, parked_pod, "A")
    parked(q, backing_off)
    assert (where(q, parked_pod), where(q, backing_off)) == ("unschedulable", "backoff")
    q.activate([parked_pod, backing_off, unknown])
    assert (where(q, parked_pod), where(q, backing_off)) == ("active", "active")
    assert where(q, unknown) is None


@pytest.mark.looptime
async def test_activated_in_flight_pod_backs_off_instead_of_parking() -> None:
    q = queue()
    p = pod("p")
    q.add(p)
    qpi = pop(q)
    q.activate([p])
    fail(q, qpi, "A")
    assert where(q, p) == "backoff"


# -- updates, deletes, duplicates ---------------------------------------------------------
@pytest.mark.looptime
@pytest.mark.parametrize(
    ("rejector", "hints", "after_status", "after_relabel"),
    [
        # kube-scheduler 1.37: the pod's own update asks its rejecting plugins' hints
        ("A", True, "unschedulable", "unschedulable"),  # A: node adds only; stays parked
        ("L", True, "unschedulable", "backoff"),  # L: pod label updates
        # U: any update of the pod (kube's Pod/Update, as NodeDeclaredFeatures' TargetPod
        # registration): a status-only update is a general update, which it covers
        ("U", True, "backoff", "backoff"),
        ("A", False, "unschedulable", "backoff"),  # no hints: any but a status update moves it
    ],
)
async def test_update_of_a_parked_pod(
    rejector: str, hints: bool, after_status: str, after_relabel: str
) -> None:
    label_update = ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_LABEL)
    any_update = ClusterEvent(EventResource.UNSCHEDULED_POD, ActionType.UPDATE)
    events = {
        **EVENTS,
        "L": [ClusterEventWithHint(label_update)],
        "U": [ClusterEventWithHint(any_update)],
    }
    q = queue(events=events, queueing_hints=hints)
    p = pod("p")
    parked(q, p, rejector)
    status_only = changed(p, lambda r: r["status"].update(conditions=[{"type": "PodScheduled"}]))
    q.update(p, status_only)
    assert where(q, p) == after_status
    relabelled = changed(status_only, lambda r: r["metadata"].update(labels={"x": "y"}))
    q.update(status_only, relabelled)
    assert where(q, p) == after_relabel


@pytest.mark.looptime
async def test_update_of_an_active_pod_replaces_it_in_place() -> None:
    q = queue()
    p = pod("p")
    q.add(p)
    newer = changed(p, lambda r: r["metadata"].update(labels={"v": "2"}))
    q.update(p, newer)
    assert q.pending_counts()["active"] == 1
    assert pop(q).pod is newer


@pytest.mark.looptime
async def test_adding_a_pod_twice_updates_it() -> None:
    q = queue()
    p = pod("p")
    q.add(p)
    q.add(changed(p, lambda r: r["metadata"].update(labels={"v": "2"})))
    assert q.pending_counts()["active"] == 1
    assert pop(q).pod.labels == {"v": "2"}
    assert q.pop_nowait() is None


@pytest.mark.looptime
async def test_bound_pod_update_leaves_the_queue() -> None:
    q = queue()
    p = pod("p")
    q.add(p)
    q.update(p, changed(p, lambda r: r["spec"].update(nodeName="n1")))
    assert where(q, p) is None


@pytest.mark.looptime
@pytest.mark.parametrize("place", ["active", "backoff", "unschedulable", "gated"])
async def test_delete_from_any_queue(place: str) -> None:
    q = queue(pre_enqueue=[SchedulingGates()])
    p = make_pod("p").gate("g").pod() if place == "gated" else pod("p")
    if place == "active" or place == "gated":
        q.add(p)
    else:
        parked(q, p, *(["A"] if place == "unschedulable" else []))
    assert where(q, p) == place
    q.delete(p)
    assert where(q, p) is None
    assert sum(q.pending_counts().values()) == 0


# -- run() and pop() ----------------------------------------------------------------------
@pytest.mark.looptime
async def test_pop_wakes_when_a_pod_is_added() -> None:
    qs = QueueSet()
    q = queue()
    qs.add_queue("p", q)
    waiter = asyncio.create_task(qs.pop())
    await asyncio.sleep(5)
    assert not waiter.done()
    q.add(pod("p"))
    name, qpi = await waiter
    assert (name, qpi.pod.name, now()) == ("p", "p", 5.0)


@pytest.mark.looptime
async def test_run_wakes_early_for_a_new_backoff(
    served: Callable[..., tuple[QueueSet, SchedulingQueue]],
) -> None:
    qs, q = served()
    await asyncio.sleep(7)  # run() is asleep until its 30-s flush
    parked(q, pod("p"))  # an error at 7 s: backoff to 8 s, flushed as 9 s begins
    await qs.pop()
    assert now() == 9.0


@pytest.mark.looptime
async def test_cancelled_pop_loses_no_pod() -> None:
    qs = QueueSet()
    q = queue()
    qs.add_queue("p", q)
    waiter = asyncio.create_task(qs.pop())
    await asyncio.sleep(1)
    waiter.cancel()
    await asyncio.gather(waiter, return_exceptions=True)
    q.add(pod("p"))
    assert qs.pop_nowait() is not None


@pytest.mark.looptime
async def test_close_ends_pop_and_run() -> None:
    qs = QueueSet()
    q = queue()
    qs.add_queue("p", q)
    runner = asyncio.create_task(q.run())
    waiter = asyncio.create_task(qs.pop())
    await asyncio.sleep(1)
    qs.close()
    with pytest.raises(QueueClosed):
        await waiter
    await asyncio.wait_for(runner, 1)
    q.add(pod("p"))
    assert q.pop_nowait() is None


# -- QueueSet -----------------------------------------------------------------------------
@pytest.mark.looptime
async def test_queue_set_takes_turns_among_profiles() -> None:
    qs = QueueSet()
    for name in ("one", "two", "idle"):
        qs.add_queue(name, queue())
    one, two = qs.queue("one"), qs.queue("two")
    assert one is not None and two is not None
    for i in range(3):
        one.add(pod(f"one-{i}", priority=100))
    two.add(pod("two-0"))
    popped = []
    while (got := qs.pop_nowait()) is not None:
        popped.append(got[1].pod.name)
    assert popped == ["one-0", "two-0", "one-1", "one-2"]


@pytest.mark.looptime
async def test_queue_set_pops_any_profiles_active_pod_before_a_backing_off_one() -> None:
    qs = QueueSet()
    for name in ("one", "two"):
        qs.add_queue(name, queue())
    one, two = qs.queue("one"), qs.queue("two")
    assert one is not None and two is not None
    parked(one, pod("one-rejected"), "A")
    one.move_all_to_active_or_backoff(NODE_ADD)
    two.add(pod("two-active", priority=-10))
    popped = []
    while (got := qs.pop_nowait()) is not None:
        popped.append(got[1].pod.name)
    assert popped == ["two-active", "one-rejected"]


@pytest.mark.looptime
async def test_queue_set_membership_and_broadcast() -> None:
    qs = QueueSet()
    a, b = queue(), queue()
    qs.add_queue("a", a)
    qs.add_queue("b", b)
    pa, pb = pod("pa"), pod("pb")
    parked(a, pa, "A")
    parked(b, pb, "A")
    qs.move_all_to_active_or_backoff(NODE_ADD)
    assert (where(a, pa), where(b, pb)) == ("backoff", "backoff")
    assert qs.pending_counts()["backoff"] == 2
    assert qs.remove_queue("a") is a and qs.remove_queue("a") is None
    assert set(qs.queues()) == {"b"}


@pytest.mark.looptime
async def test_queue_set_runs_queues_added_later() -> None:
    qs = QueueSet()
    runner = asyncio.create_task(qs.run())
    await asyncio.sleep(1)
    q = queue()
    qs.add_queue("late", q)
    parked(q, pod("p"))  # an error at 1 s: backoff to 2 s, flushed as 3 s begins
    _, qpi = await qs.pop()
    assert (qpi.pod.name, now()) == ("p", 3.0)
    runner.cancel()
    await asyncio.gather(runner, return_exceptions=True)


def _qpis(n: int) -> Iterator[QueuedPodInfo]:
    for i in range(n):
        yield QueuedPodInfo(pod=pod(f"p{i}", priority=i % 7), timestamp=float(i), seq=i)


@pytest.mark.parametrize("by_less", [False, True])
def test_pod_heap_survives_many_removals(by_less: bool) -> None:
    h = PodHeap(SORT.less if by_less else None)
    qpis = list(_qpis(300))
    for qpi in qpis:
        h.push(qpi, SORT.sort_key(qpi))
    for qpi in qpis[::2]:
        assert h.remove(qpi.pod.uid) is qpi
    assert len(h) == 150 and qpis[0].pod.uid not in h
    out = []
    while (got := h.pop()) is not None:
        out.append(got)
    expected = sorted(qpis[1::2], key=SORT.sort_key)
    assert out == expected


@pytest.mark.looptime
async def test_take_gathers_a_pod_from_any_pool_in_flight_as_if_popped() -> None:
    """A whole-group cycle takes a gang's other members out of the queue."""
    q = queue(pre_enqueue=[SchedulingGates()])
    active, backing_off, unsched = pod("a"), pod("b"), pod("c")
    gated = make_pod("d").gate("example.com/wait").pod()
    parked(q, unsched, "A")
    parked(q, backing_off)  # no rejecting plugin (an error): backoffQ
    q.add(active)
    q.add(gated)
    assert [where(q, p) for p in (active, backing_off, unsched, gated)] == [
        "active",
        "backoff",
        "unschedulable",
        "gated",
    ]
    taken = [q.take(p.uid) for p in (active, backing_off, unsched)]
    assert all(t is not None for t in taken)
    assert [t.attempts for t in taken if t is not None] == [1, 2, 2]
    assert [where(q, p) for p in (active, backing_off, unsched)] == ["inFlight"] * 3
    assert q.take(gated.uid) is None, "a gated pod is not taken"
    assert q.take(active.uid) is None, "already in flight"
    # Failed together, they are parked again like popped pods.
    for t in taken:
        assert t is not None
        fail(q, t, "A")
    assert [where(q, p) for p in (active, backing_off, unsched)] == ["unschedulable"] * 3
    q.close()
    assert q.take(active.uid) is None


@dataclass
class CountingGate(GroupGate):
    """GroupGate that counts its PreEnqueue calls."""

    calls: int = 0

    def pre_enqueue(self, pod: Pod) -> Status | None:
        self.calls += 1
        return super().pre_enqueue(pod)


@pytest.mark.parametrize("ungates", [True, False])
async def test_an_event_registered_only_for_rejected_pods_leaves_gated_pods_alone(
    ungates: bool,
) -> None:
    """A gang plugin registers node additions for the gangs its cycle rejected (room may
    come), not for the ones it holds at PreEnqueue (their group or members are missing):
    with ``ungates=False`` a node added walks none of the held pods (a start-up listing of
    1000 nodes over 3000 held gang members stalled the loop for a minute)."""
    gate = CountingGate()
    regs = [ClusterEventWithHint(NODE_ADD, ungates=ungates), ClusterEventWithHint(PODGROUP_ADD)]
    q = queue(pre_enqueue=[gate], events={**EVENTS, gate.name: regs})
    pods = [make_pod(f"p{i}").label("group", "g").pod() for i in range(3)]
    for p in pods:
        q.add(p)
    gate.calls = 0
    for _ in range(5):
        q.move_all_to_active_or_backoff(NODE_ADD)
    assert gate.calls == (15 if ungates else 0)
    gate.groups.add("g")
    q.move_all_to_active_or_backoff(PODGROUP_ADD)  # what does ungate them still does
    assert [where(q, p) for p in pods] == ["active"] * 3


async def test_events_held_during_the_initial_listing_are_looked_at_once() -> None:
    """While the queues hold moves (``kubesched run``'s initial listing, before any cycle),
    each PodGroup listed does not re-run PreEnqueue for every member held so far; at the
    release every held pod is looked at once, and those whose group came go to activeQ."""
    gate = CountingGate()
    qs = QueueSet()
    q = queue(
        pre_enqueue=[gate], events={**EVENTS, gate.name: [ClusterEventWithHint(PODGROUP_ADD)]}
    )
    qs.add_queue("kubesched", q)
    qs.hold_moves()
    pods = [make_pod(f"p{i}").label("group", "g" if i % 2 else "h").pod() for i in range(6)]
    for p in pods:
        q.add(p)
    gate.calls = 0
    gate.groups.add("g")
    for _ in range(10):  # ten groups listed
        qs.move_all_to_active_or_backoff(PODGROUP_ADD)
    assert gate.calls == 0
    assert [where(q, p) for p in pods] == ["gated"] * 6
    qs.release_moves()
    assert gate.calls == 6
    assert [where(q, p) for p in pods] == ["gated", "active"] * 3
    qs.release_moves()  # nothing came since: nothing is walked
    qs.move_all_to_active_or_backoff(PODGROUP_ADD)  # not held any more
    assert gate.calls == 6 + 3
