"""Go durations (``time.ParseDuration``), as metav1.Duration fields of kube-scheduler's
plugin args carry them: ``10s``, ``1m30s``, ``1.5h``, ``300ms``, ``-2s``, ``0``.

A sequence of decimal numbers, each with a unit (``ns``, ``us``/``µs``/``μs``, ``ms``,
``s``, ``m``, ``h``), with an optional sign in front; ``0`` alone needs no unit. What Go
refuses is refused here with its wording (``time: invalid duration "10"``), so a
profile's message reads like kube-scheduler's.
"""

from __future__ import annotations

import re

__all__ = ["parse_go_duration"]

_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # U+00B5 micro sign
    "μs": 1e-6,  # U+03BC Greek mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_PART = re.compile(r"(\d+\.?\d*|\.\d+)([^\d.]+)")


def parse_go_duration(text: str) -> float:
    """Seconds; ``ValueError`` with Go's message when ``text`` is not a duration."""
    body = text
    sign = 1.0
    if body[:1] in ("-", "+"):
        sign = -1.0 if body[0] == "-" else 1.0
        body = body[1:]
    if body == "0":
        return 0.0
    if not body:
        raise ValueError(f"time: invalid duration {_quote(text)}")
    total = 0.0
    pos = 0
    while pos < len(body):
        m = _PART.match(body, pos)
        if m is None:
            if re.fullmatch(r"\d+\.?\d*|\.\d+", body[pos:]):
                raise ValueError(f"time: missing unit in duration {_quote(text)}")
            raise ValueError(f"time: invalid duration {_quote(text)}")
        unit = _UNITS.get(m.group(2))
        if unit is None:
            raise ValueError(f"time: unknown unit {_quote(m.group(2))} in duration {_quote(text)}")
        total += float(m.group(1)) * unit
        pos = m.end()
    return sign * total


def _quote(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'
