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
