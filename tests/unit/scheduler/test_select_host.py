"""Which of equally scored nodes a pod goes to: kube-scheduler 1.37's heap rule.

``data/go_heap_winners.txt`` was recorded from Go's own ``container/heap`` (the program
is ``data/go_heap_winners.go.txt``: random score lists, ``heap.Init`` with kube-scheduler's
``Less``, one ``heap.Pop``): each line is the scores in feasible order and the position
Go popped.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from kubesched.scheduler.select_host import heap_winner

DATA = Path(__file__).parent / "data" / "go_heap_winners.txt"


def _cases() -> list[tuple[list[int], int]]:
    out = []
    for line in DATA.read_text().splitlines():
        scores, winner = line.split(";")
        out.append(([int(s) for s in scores.split(",")], int(winner)))
    return out


def test_the_winner_is_the_one_go_container_heap_pops() -> None:
    cases = _cases()
    assert len(cases) == 500
    wrong = [
        (scores, winner, heap_winner(np.array(scores, dtype=np.int64)))
        for scores, winner in cases
        if heap_winner(np.array(scores, dtype=np.int64)) != winner
    ]
    assert not wrong, wrong[:5]


@pytest.mark.parametrize(
    ("scores", "winner"),
    [
        pytest.param([7], 0, id="one-node"),
        pytest.param([1, 9, 3], 1, id="a-unique-best-wherever-it-is"),
        pytest.param([5, 5, 5, 5], 0, id="all-equal:-the-first-feasible-node"),
        # 0 at the root; its left subtree (1, 3, 4) holds no 9, its right one (2) does
        pytest.param([0, 1, 9, 1, 1, 9], 2, id="best-only-on-the-right"),
        # two 9s, at positions 2 (the root's right child) and 4 (under the left child 1):
        # the left subtree is taken first, so position 4 wins although 2 comes earlier
        pytest.param([0, 1, 9, 1, 9], 4, id="left-subtree-first"),
    ],
)
def test_ties_follow_heap_positions(scores: list[int], winner: int) -> None:
    assert heap_winner(np.array(scores, dtype=np.int64)) == winner


def test_no_scores_is_an_error() -> None:
    with pytest.raises(ValueError, match="no scored nodes"):
        heap_winner(np.array([], dtype=np.int64))


def _go_heap_root(scores: list[int]) -> int:
    """The position Go's ``heap.Init`` leaves at the root of a max-heap over ``scores``
    (sift down from the last parent; swap only with a strictly greater child, the left
    one when both children are equal): what the recorded lines above pin, for sizes the
    recording did not reach."""
    h = list(range(len(scores)))
    n = len(h)
    for i in range(n // 2 - 1, -1, -1):
        j = i
        while True:
            c = 2 * j + 1
            if c >= n:
                break
            if c + 1 < n and scores[h[c + 1]] > scores[h[c]]:
                c += 1
            if not scores[h[c]] > scores[h[j]]:
                break
            h[j], h[c] = h[c], h[j]
            j = c
    return h[0]


@pytest.mark.parametrize("size", [61, 1023, 1024, 1025, 5000, 70_000])
def test_large_lists_with_ties_far_apart(size: int) -> None:
    """Lists longer than any recorded, best scores deep in the heap: the winner is still
    the one Go's heap would pop, whatever size was seen before (smaller and larger)."""
    rng = np.random.default_rng(size)
    for _ in range(20):
        scores = rng.integers(0, 40, size)
        scores[0] = 0
        assert heap_winner(scores.astype(np.int64)) == _go_heap_root(scores.tolist())
        small = rng.integers(0, 3, 50)
        assert heap_winner(small.astype(np.int64)) == _go_heap_root(small.tolist())
