"""Resource quantities as kube-scheduler counts them: cpu in millis, the rest in units,
both rounded away from zero like ``resource.Quantity``."""

from __future__ import annotations

import pytest

from kubesched.framework.quantity import QuantityError, milli_value, value

# (text, milli_value, value)
CASES: list[tuple[str | int | float, int, int]] = [
    ("0", 0, 0),
    ("1", 1000, 1),
    ("100m", 100, 1),
    ("1500m", 1500, 2),
    ("0.5", 500, 1),
    ("2.5", 2500, 3),
    (".5", 500, 1),
    ("5.", 5000, 5),
    ("+2", 2000, 2),
    ("1n", 1, 1),
    ("1500n", 1, 1),
    ("1u", 1, 1),
    ("2000u", 2, 1),
    ("0.1m", 1, 1),
    ("1k", 1_000_000, 1000),
    ("1M", 10**9, 10**6),
    ("1G", 10**12, 10**9),
    ("1T", 10**15, 10**12),
    ("1P", 10**18, 10**15),
    ("1Ki", 1024_000, 1024),
    ("1Mi", 2**20 * 1000, 2**20),
    ("1.5Gi", 3 * 2**29 * 1000, 3 * 2**29),
    ("1Ti", 2**40 * 1000, 2**40),
    ("1Pi", 2**50 * 1000, 2**50),
    ("1e3", 10**6, 1000),
    ("1E3", 10**6, 1000),
    ("1.5e3", 1_500_000, 1500),
    ("1e-3", 1, 1),
    ("25e-1", 2500, 3),
    ("-1.5", -1500, -2),
    ("-100m", -100, -1),
    (3, 3000, 3),
    (0.25, 250, 1),
]


@pytest.mark.parametrize(
    ("text", "millis", "units"),
    CASES,
    ids=[f"{c[0]!r}" for c in CASES],
)
def test_milli_value_and_value(text: str | int | float, millis: int, units: int) -> None:
    assert milli_value(text) == millis
    assert value(text) == units


@pytest.mark.parametrize(("text", "units"), [("7Ei", 7 * 2**60), ("2E", 2 * 10**18)])
def test_a_large_quantity_fits_in_units_but_not_in_millis(text: str, units: int) -> None:
    # Exabytes of memory are a valid int64; counted in millis they would overflow.
    assert value(text) == units
    with pytest.raises(QuantityError, match="too large"):
        milli_value(text)


@pytest.mark.parametrize(
    "text",
    ["", "abc", "1Gb", "1K", "1.2.3", "Mi", "1 Gi", "1e", "1ki", "--1", "1m5", "0x10"],
    ids=lambda t: repr(t),
)
def test_invalid_strings_raise_and_quote_the_text(text: str) -> None:
    with pytest.raises(QuantityError) as exc:
        value(text)
    assert repr(text) in str(exc.value)
    assert "quantities must match the regular expression" in str(exc.value)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("1e100", "exponent out of range"),
        ("9Ei", "too large"),
        (True, "not True"),
    ],
    ids=["huge-exponent", "over-int64", "bool"],
)
def test_out_of_range_and_wrong_types(text: str | bool, message: str) -> None:
    with pytest.raises(QuantityError, match=message):
        value(text)
