"""The scheduling queue's backoff: doubling, the two counts, a gang's cap, backoffQ popped
early (kube-scheduler 1.37's SchedulerPopFromBackoffQ), PreEnqueue at its door, and the
5-minute flush of parked and gated pods. The rest of the queue: test_queue.py.

Time is the event loop's, virtual (looptime).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass

import pytest

from kubesched.backend.queue import SchedulingQueue
from kubesched.backend.queue_set import QueueSet
from kubesched.framework.nodeinfo import QueuedPodInfo
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from tests.unit.backend.queue_helpers import (
    NODE_ADD,
    SORT,
    fail,
    now,
    parked,
    pod,
    pop,
    queue,
    where,
)


# -- backoff ------------------------------------------------------------------------------
@pytest.mark.looptime
@pytest.mark.parametrize(
    ("pop_from_backoff", "fail_after", "expected"),
    [
        pytest.param(False, 0.0, [1, 2, 4, 8, 10, 10], id="to-the-instant"),
        # kube-scheduler 1.37 (SchedulerPopFromBackoffQ): the expiry is rounded down to
        # a whole second, and backoffQ is flushed when the next second begins
        pytest.param(True, 0.25, [1.75, 2.75, 4.75, 8.75, 10.75, 10.75], id="windows"),
        pytest.param(True, 0.0, [2, 3, 5, 9, 11, 11], id="windows-failing-on-the-second"),
    ],
)
async def test_backoff_doubles_up_to_the_cap(
    served: Callable[..., tuple[QueueSet, SchedulingQueue]],
    pop_from_backoff: bool,
    fail_after: float,
    expected: list[float],
) -> None:
    qs, q = served(initial_backoff=1.0, max_backoff=10.0, pop_from_backoff=pop_from_backoff)
    q.add(pod("p"))
    waits = []
    _, qpi = await qs.pop()
    for _ in range(6):
        await asyncio.sleep(fail_after)
        failed_at = now()
        fail(q, qpi)  # an error: never popped before its backoff is over
        _, qpi = await qs.pop()
        waits.append(now() - failed_at)
    assert waits == expected


@pytest.mark.looptime
@pytest.mark.parametrize(
    ("failures", "expected_wait"),
    [
        # kube-scheduler 1.37 counts rejections and errors apart: an error after five
        # rejections backs off as a first error (1 s), not as a sixth failure (10 s)
        (["A", "A", "A", "A", "A", None], 1),
        (["A", "A", "A", None, None], 2),  # the second error in a row
        # a rejection after errors: the errors' count starts over, the rejections' goes on
        ([None, None, None, "A"], 1),
        (["A", "A", None, "A"], 4),
    ],
)
async def test_backoff_counts_errors_and_rejections_apart(
    served: Callable[..., tuple[QueueSet, SchedulingQueue]],
    failures: list[str | None],
    expected_wait: int,
) -> None:
    # waits to the instant, and no rejected pod popped before its backoff is over
    qs, q = served(initial_backoff=1.0, max_backoff=10.0, pop_from_backoff=False)
    q.add(pod("p"))
    _, qpi = await qs.pop()
    for i, rejector in enumerate(failures):
        failed_at = now()
        fail(q, qpi, *([rejector] if rejector else []))
        if rejector is not None:  # parked: A's event sends it back after its backoff
            q.move_all_to_active_or_backoff(NODE_ADD)
        _, qpi = await qs.pop()
        if i == len(failures) - 1:
            assert now() - failed_at == expected_wait


@pytest.mark.looptime
@pytest.mark.parametrize(("pop_from_backoff", "over"), [(False, 6.0), (True, 7.0)])
async def test_backoff_is_counted_from_the_failure(pop_from_backoff: bool, over: float) -> None:
    q = queue(pop_from_backoff=pop_from_backoff)
    q.add(pod("p"))
    qpi = pop(q)
    await asyncio.sleep(5)  # a long cycle does not eat into the backoff
    fail(q, qpi)
    assert q.next_wakeup() == over
    await asyncio.sleep(over - 5 - 0.5)
    q.flush_backoff_completed()
    assert q.pending_counts()["backoff"] == 1
    await asyncio.sleep(0.5)
    q.flush_backoff_completed()
    assert q.pending_counts() == {"active": 1, "backoff": 0, "unschedulable": 0, "gated": 0}
    assert q.next_wakeup() is None


@pytest.mark.looptime
async def test_error_goes_to_backoff_not_the_unschedulable_pool() -> None:
    q = queue()
    p = pod("p")
    parked(q, p)  # no rejecting plugin: an error
    assert where(q, p) == "backoff"


@pytest.mark.parametrize(
    ("group_size", "rejections", "expected"),
    [
        (1, 10, 10.0),
        (4, 10, 20.0),  # kube-scheduler 1.37: a pod group's cap is 10 s * sqrt(size)
        (2, 10, 10.0 * 2**0.5),
        (4, 3, 4.0),  # below the cap, the same doubling
    ],
)
def test_a_gang_that_failed_as_a_whole_backs_off_longer(
    group_size: int, rejections: int, expected: float
) -> None:
    q = queue()
    qpi = QueuedPodInfo(pod=pod("p"), timestamp=0.0, unschedulable_count=rejections)
    qpi.group_size = group_size
    assert q.backoff_duration(qpi) == pytest.approx(expected)


# -- popping from backoffQ (kube-scheduler 1.37's SchedulerPopFromBackoffQ) ---------------
@pytest.mark.looptime
@pytest.mark.parametrize("pop_from_backoff", [True, False])
async def test_a_rejected_pod_backing_off_is_popped_when_activeq_is_empty(
    pop_from_backoff: bool,
) -> None:
    q = queue(pop_from_backoff=pop_from_backoff)
    rejected, errored, other = pod("rejected"), pod("errored"), pod("other", priority=-5)
    parked(q, rejected, "A")
    parked(q, errored)  # an error: it waits out its backoff in any case
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert (where(q, rejected), where(q, errored)) == ("backoff", "backoff")
    assert q.can_pop() is pop_from_backoff
    q.add(other)
    assert pop(q).pod.name == "other", "activeQ first, whatever the priority"
    got = q.pop_nowait()
    if pop_from_backoff:
        assert got is not None and (got.pod.name, got.attempts) == ("rejected", 2)
        assert where(q, rejected) == "inFlight"
    else:
        assert got is None and where(q, rejected) == "backoff"
    assert q.pop_nowait() is None and where(q, errored) == "backoff"


@pytest.mark.looptime
async def test_a_pod_entering_backoff_wakes_a_waiting_pop(
    served: Callable[..., tuple[QueueSet, SchedulingQueue]],
) -> None:
    qs, q = served()
    parked(q, pod("p"), "A")
    waiter = asyncio.create_task(qs.pop())
    await asyncio.sleep(0.25)
    assert not waiter.done()
    q.move_all_to_active_or_backoff(NODE_ADD)  # backoff until 1 s, flushed at 2 s
    _, qpi = await waiter
    assert (qpi.pod.name, now()) == ("p", 0.25)


@pytest.mark.looptime
@pytest.mark.parametrize("ordering", ["sort_key", "less"])
async def test_backoff_pops_by_expiry_second_then_as_activeq_orders(ordering: str) -> None:
    q = queue(sort_key=None, less=SORT.less) if ordering == "less" else queue()
    parked(q, pod("first-low", 1), "A")  # fails at 0: backoff to 1
    await asyncio.sleep(0.5)
    parked(q, pod("second-high", 9), "A")  # fails at 0.5: backoff to 1.5, in second 1
    parked(q, pod("third-high", 9), "A")
    await asyncio.sleep(0.75)
    parked(q, pod("last-top", 100), "A")  # fails at 1.25: backoff to 2.25, in second 2
    q.move_all_to_active_or_backoff(NODE_ADD)
    assert q.pending_counts()["backoff"] == 4
    popped = [pop(q).pod.name for _ in range(4)]
    assert popped == ["second-high", "third-high", "first-low", "last-top"]


@dataclass
class _Switch:
    """PreEnqueue: holds every pod while ``closed``; counts its calls."""

    closed: bool = False
    calls: int = 0
    name: str = "Switch"

    def pre_enqueue(self, pod: Pod) -> Status | None:
        self.calls += 1
        return Status.unresolvable("switched off") if self.closed else None


@pytest.mark.looptime
@pytest.mark.parametrize("pop_from_backoff", [True, False])
async def test_pre_enqueue_runs_as_a_pod_enters_backoff_not_as_it_leaves(
    pop_from_backoff: bool,
) -> None:
    switch = _Switch()
    q = queue(pre_enqueue=[switch], pop_from_backoff=pop_from_backoff)
    held, passed = pod("held"), pod("passed")
    parked(q, held, "A")
    parked(q, passed, "A")
    switch.closed = True
    q.move_all_to_active_or_backoff(NODE_ADD, pre_check=lambda p: p.name == "held")
    switch.closed = False
    q.move_all_to_active_or_backoff(NODE_ADD, pre_check=lambda p: p.name == "passed")
    switch.closed = True
    calls = switch.calls
    await asyncio.sleep(2)
    q.flush_backoff_completed()
    if pop_from_backoff:  # held at backoffQ's door; the other one not asked again
        assert (where(q, held), where(q, passed), switch.calls) == ("gated", "active", calls)
    else:  # both asked as they leave backoffQ
        assert (where(q, held), where(q, passed), switch.calls) == ("gated", "gated", calls + 2)


@pytest.mark.looptime
async def test_a_gated_pod_runs_pre_enqueue_again_every_five_minutes(
    running: Callable[[SchedulingQueue], None],
) -> None:
    # kube-scheduler 1.37's flush of the unschedulable pool takes its gated pods too:
    # a gate whose plugin registered no event that opens it is not held for ever.
    switch = _Switch(closed=True)
    q = queue(pre_enqueue=[switch], max_unschedulable_duration=300.0)
    running(q)
    p = pod("p")
    q.add(p)
    assert (where(q, p), switch.calls) == ("gated", 1)
    await asyncio.sleep(331)  # the pool is checked every 30 s: flushed at 330 s
    assert (where(q, p), switch.calls) == ("gated", 2)
    await asyncio.sleep(60)  # not again at 360 or 390 s: it was flushed at 330
    assert switch.calls == 2
    switch.closed = False
    await asyncio.sleep(300)  # flushed again at 660 s
    assert (where(q, p), switch.calls) == ("active", 3)
