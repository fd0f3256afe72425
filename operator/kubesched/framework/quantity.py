"""Kubernetes resource quantities ("100m", "1.5Gi", "2e3") as exact integers.

kube-scheduler counts CPU in millicores (``MilliValue``) and every other resource in
whole units (``Value``); both round *up* (away from zero), as ``resource.Quantity`` does.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

__all__ = ["QUANTITY_PATTERN", "QuantityError", "milli_value", "parse_quantity", "value"]

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9),
    "u": Fraction(1, 10**6),
    "m": Fraction(1, 10**3),
    "": Fraction(1),
    "k": Fraction(10**3),
    "M": Fraction(10**6),
    "G": Fraction(10**9),
    "T": Fraction(10**12),
    "P": Fraction(10**15),
    "E": Fraction(10**18),
}
QUANTITY_PATTERN = r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(?:([eE][+-]?[0-9]+)|(Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE])?)$"
"""The grammar of a quantity: a signed decimal number, then a decimal exponent or a suffix.
The PodGroup CRD's schema carries it too (``minResources``), so the API server refuses
what kubesched could not parse."""
_RE = re.compile(QUANTITY_PATTERN)
# Kubernetes caps quantities at 2^63-1 in their int64 form; anything larger is refused.
_MAX = 2**63 - 1


class QuantityError(ValueError):
    """A string that is not a Kubernetes resource quantity."""


def parse_quantity(text: str | int | float) -> Fraction:
    """Parse a quantity into an exact fraction of base units."""
    try:
        return _parse_quantity(text)
    except TypeError:  # unhashable (a list, a map): the cache cannot even look it up
        raise QuantityError(f"quantities must be strings or numbers, not {text!r}") from None


@lru_cache(maxsize=4096)
def _parse_quantity(text: str | int | float) -> Fraction:
    if isinstance(text, bool) or not isinstance(text, str | int | float):
        raise QuantityError(f"quantities must be strings or numbers, not {text!r}")
    if isinstance(text, int):
        return Fraction(text)
    if isinstance(text, float):
        if not math.isfinite(text):
            raise QuantityError(f"quantities must be finite, not {text!r}")
        return Fraction(str(text))
    s = str(text)
    m = _RE.match(s)
    if not m:
        raise QuantityError(
            f"quantities must match the regular expression "
            f"'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$': {text!r}"
        )
    number, exponent, suffix = m.group(1), m.group(2), m.group(3) or ""
    base = Fraction(number)
    if exponent:
        exp = int(exponent[1:])
        if abs(exp) > 30:
            raise QuantityError(f"quantity exponent out of range: {text!r}")
        return base * Fraction(10) ** exp
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    return base * _DECIMAL[suffix]


def _ceil(q: Fraction) -> int:
    # Away from zero, like resource.Quantity: -1.5 is -2, as 1.5 is 2.
    n = -((-abs(q.numerator)) // q.denominator)
    return n if q >= 0 else -n


def milli_value(text: str | int | float) -> int:
    """The quantity in thousandths, rounded up (how CPU is counted)."""
    try:
        return _milli_value(text)
    except TypeError:
        raise QuantityError(f"quantities must be strings or numbers, not {text!r}") from None


@lru_cache(maxsize=8192)
def _milli_value(text: str | int | float) -> int:
    v = _ceil(parse_quantity(text) * 1000)
    if v > _MAX or v < -_MAX:
        raise QuantityError(f"quantity too large: {text!r}")
    return v


def value(text: str | int | float) -> int:
    """The quantity in whole units, rounded up (memory, storage, pods, extended)."""
    try:
        return _value(text)
    except TypeError:
        raise QuantityError(f"quantities must be strings or numbers, not {text!r}") from None


@lru_cache(maxsize=8192)
def _value(text: str | int | float) -> int:
    v = _ceil(parse_quantity(text))
    if v > _MAX or v < -_MAX:
        raise QuantityError(f"quantity too large: {text!r}")
    return v
