"""kubesched.framework.helpers: Go integer arithmetic and resource-name classes."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kubesched.framework.helpers import (
    broken_linear_function,
    default_normalize_score,
    go_div,
    go_div_array,
    go_round_div,
    is_extended_resource_name,
    is_scalar_resource_name,
)


@pytest.mark.parametrize(
    ("a", "b", "q"),
    [(7, 2, 3), (-7, 2, -3), (7, -2, -3), (-7, -2, 3), (0, 5, 0), (-70, 100, 0)],
)
def test_go_div_truncates_toward_zero(a: int, b: int, q: int) -> None:
    assert go_div(a, b) == q
    assert go_div_array(np.array([a], dtype=np.int64), b).tolist() == [q]


@given(st.integers(-(10**12), 10**12), st.integers(-1000, 1000).filter(bool))
def test_go_div_array_equals_scalar(a: int, b: int) -> None:
    assert go_div_array(np.array([a], dtype=np.int64), np.array([b], dtype=np.int64))[0] == go_div(
        a, b
    )


@pytest.mark.parametrize(
    ("n", "d", "r"), [(75, 2, 38), (74, 2, 37), (10, 3, 3), (11, 3, 4), (0, 7, 0), (5, 10, 1)]
)
def test_go_round_div_rounds_half_up(n: int, d: int, r: int) -> None:
    assert go_round_div(n, d) == r


@given(st.integers(0, 10**6), st.integers(1, 10**4))
def test_go_round_div_equals_float_round(n: int, d: int) -> None:
    import math

    x = float(n) / float(d)
    go_round = math.floor(x) + (1 if x - math.floor(x) >= 0.5 else 0)
    assert go_round_div(n, d) == go_round


@pytest.mark.parametrize(
    ("raw", "reverse", "out"),
    [
        pytest.param([10, 5, 0], False, [100, 50, 0], id="scale-to-max"),
        pytest.param([3, 1, 0], False, [100, 33, 0], id="truncates"),
        pytest.param([3, 1, 0], True, [0, 67, 100], id="reverse"),
        pytest.param([0, 0], False, [0, 0], id="all-zero"),
        pytest.param([0, 0], True, [100, 100], id="all-zero-reverse"),
    ],
)
def test_default_normalize_score(raw: list[int], reverse: bool, out: list[int]) -> None:
    scores = np.array(raw, dtype=np.int64)
    default_normalize_score(100, reverse, scores)
    assert scores.tolist() == out


@pytest.mark.parametrize(
    ("name", "extended", "scalar"),
    [
        ("cpu", False, False),
        ("memory", False, False),
        ("ephemeral-storage", False, False),
        ("pods", False, False),
        ("hugepages-2Mi", False, True),
        ("example.com/gpu", True, True),
        ("nvidia.com/gpu", True, True),
        ("kubernetes.io/something", False, True),
        ("requests.example.com/x", False, True),
    ],
)
def test_resource_name_classes(name: str, extended: bool, scalar: bool) -> None:
    assert is_extended_resource_name(name) is extended
    assert is_scalar_resource_name(name) is scalar


@pytest.mark.parametrize(
    ("p", "expected"),
    [(0, 20), (20, 20), (30, 35), (60, 80), (61, 80), (100, 80)],
)
def test_broken_linear_function(p: int, expected: int) -> None:
    f = broken_linear_function([(20, 20), (60, 80)])
    assert f(p) == expected
