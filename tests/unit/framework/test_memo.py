"""A bounded memo starts over at its limit: a scheduler fed open-ended keys (extended
resource names, user-written selectors) keeps at most ``limit`` of them."""

from __future__ import annotations

from kubesched.framework.memo import remember


def test_a_memo_under_its_limit_keeps_everything() -> None:
    memo: dict[str, int] = {}
    for i in range(3):
        assert remember(memo, f"k{i}", i, limit=4) == i
    assert memo == {"k0": 0, "k1": 1, "k2": 2}


def test_a_memo_at_its_limit_starts_over_with_the_new_entry() -> None:
    memo: dict[str, int] = {}
    for i in range(10_000):
        remember(memo, f"k{i}", i, limit=4)
        assert len(memo) <= 4
    assert memo["k9999"] == 9999
