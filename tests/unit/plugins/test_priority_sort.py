from __future__ import annotations

import itertools

import pytest

from kubesched.framework.nodeinfo import QueuedPodInfo
from kubesched.framework.registry import NoArgs
from kubesched.plugins import priority_sort
from tests.builders import make_pod
from tests.unit.plugins.fakes import FakeHandle


def qpi(priority: int, timestamp: float, seq: int = 0) -> QueuedPodInfo:
    return QueuedPodInfo(
        make_pod(f"p{priority}-{timestamp}-{seq}").priority(priority).pod(), timestamp, seq
    )


@pytest.mark.parametrize(
    ("a", "b", "expected"),
    [
        pytest.param(qpi(10, 5.0), qpi(0, 1.0), True, id="higher-priority-first"),
        pytest.param(qpi(0, 1.0), qpi(10, 5.0), False, id="lower-priority-after"),
        pytest.param(qpi(5, 1.0), qpi(5, 2.0), True, id="equal-priority-earlier-first"),
        pytest.param(qpi(5, 2.0), qpi(5, 1.0), False, id="equal-priority-later-after"),
        pytest.param(qpi(5, 1.0, seq=1), qpi(5, 1.0, seq=2), True, id="same-time-lower-seq-first"),
        pytest.param(
            qpi(5, 1.0, seq=2), qpi(5, 1.0, seq=1), False, id="same-time-higher-seq-after"
        ),
        pytest.param(qpi(5, 1.0, seq=1), qpi(5, 1.0, seq=1), False, id="identical-not-less"),
        pytest.param(qpi(-5, 1.0), qpi(-10, 0.0), True, id="negative-priorities"),
    ],
)
def test_less(a: QueuedPodInfo, b: QueuedPodInfo, expected: bool, handle: FakeHandle) -> None:
    plugin = priority_sort.new(NoArgs(), handle)
    assert plugin.less(a, b) is expected
    assert (plugin.sort_key(a) < plugin.sort_key(b)) is expected


def test_sort_key_orders_a_queue_like_less(handle: FakeHandle) -> None:
    plugin = priority_sort.new(NoArgs(), handle)
    infos = [qpi(0, 3.0, 1), qpi(100, 9.0, 2), qpi(0, 1.0, 3), qpi(100, 9.0, 0), qpi(50, 0.0, 4)]
    ordered = sorted(infos, key=plugin.sort_key)
    assert [(q.pod.priority, q.timestamp, q.seq) for q in ordered] == [
        (100, 9.0, 0),
        (100, 9.0, 2),
        (50, 0.0, 4),
        (0, 1.0, 3),
        (0, 3.0, 1),
    ]
    for x, y in itertools.pairwise(ordered):
        assert plugin.less(x, y)
        assert not plugin.less(y, x)


def test_name() -> None:
    assert priority_sort.NAME == "PrioritySort"
    assert priority_sort.PrioritySort.name == "PrioritySort"
