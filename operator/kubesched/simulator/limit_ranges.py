"""LimitRange (``v1``) in scenarios, and what kube-apiserver's LimitRanger admission plugin
(on by default) does to a pod created in a namespace that has some, before any scheduler
reads it:

- the LimitRange is **defaulted** as the API server stores it (a ``Container`` item's
  ``default`` limit from its ``max``, its ``defaultRequest`` from ``default``, then from
  ``min``);
- each container and init container gets the ``Container`` items' ``default`` limits and
  ``defaultRequest`` requests it does not state (a limit it states was already copied
  into its missing request by the API server's defaulting, which runs first), and the pod
  the ``kubernetes.io/limit-ranger`` annotation saying what was set;
- the pod is then **checked** against each item: ``min``, ``max`` and
  ``maxLimitRequestRatio`` per container (``Container``) or for the pod's sums
  (``Pod``: the containers plus sidecars, or the largest init container, whichever is
  more), refused in the API server's words (``maximum cpu usage per Container is 2, but
  limit is 4``); several reasons are joined as kube joins them (``[a, b]``), in the
  order the LimitRange lists its resources (kube's order is a Go map's).

Quantities in the messages are written as kube writes them (``500m``, ``1Gi``, ``1536Mi``).
``PersistentVolumeClaim`` items are accepted and not enforced (the simulator provisions
no storage quota). A running scheduler reads none of this: on a cluster the API server
has done it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from kubesched.framework.quantity import QuantityError, parse_quantity
from kubesched.framework.types import ObjectError

__all__ = [
    "ANNOTATION",
    "Quantity",
    "admit",
    "canonical",
    "default_limit_range",
    "quantities",
    "validate_limit_range",
]

ANNOTATION = "kubernetes.io/limit-ranger"
TYPES = ("Container", "Pod", "PersistentVolumeClaim")
_FIELDS = ("max", "min", "default", "defaultRequest", "maxLimitRequestRatio")
_BINARY = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")
_DECIMAL = {-9: "n", -6: "u", -3: "m", 0: "", 3: "k", 6: "M", 9: "G", 12: "T", 15: "P", 18: "E"}
_EXPONENT = re.compile(r"[eE][+-]?[0-9]+$")


@dataclass(frozen=True, slots=True)
class Quantity:
    """A parsed quantity and the format kube keeps for it (binary, decimal, exponent)."""

    value: Fraction
    form: str

    @classmethod
    def parse(cls, text: Any) -> Quantity:
        s = str(text).strip()
        form = (
            "binary"
            if s.endswith(_BINARY[1:])
            else "exponent"
            if _EXPONENT.search(s)
            else "decimal"
        )
        return cls(parse_quantity(text), form)

    def milli(self) -> int:
        """kube's MilliValue (rounded up), which LimitRanger compares."""
        return math.ceil(self.value * 1000)

    def __add__(self, other: Quantity) -> Quantity:
        return Quantity(self.value + other.value, self.form)  # kube keeps the left format


def canonical(q: Quantity) -> str:
    """kube's ``Quantity.String()``: binary suffixes while the value is a whole number of
    at least 1024 bytes, else the largest decimal suffix (or exponent) that keeps the
    number whole."""
    v = q.value
    if v == 0:
        return "0"
    if q.form == "binary" and abs(v) >= 1024 and v.denominator == 1:
        n, e = int(v), 0
        while n % 1024 == 0 and e < len(_BINARY) - 1:
            n, e = n // 1024, e + 1
        return f"{n}{_BINARY[e]}"
    m, x = v, 0
    while m.denominator != 1:
        m, x = m * 10, x - 1
    n = int(m)
    while n % 10 == 0:
        n, x = n // 10, x + 1
    r = x % 3
    n, x = n * 10**r, x - r
    if q.form == "exponent" or x not in _DECIMAL:
        return f"{n}e{x}" if x else str(n)
    return f"{n}{_DECIMAL[x]}"


def quantities(rl: Any, field: str) -> dict[str, Quantity]:
    """A resource list's quantities by name; ObjectError names the field of a bad one."""
    if rl is None:
        return {}
    if not isinstance(rl, Mapping):
        raise ObjectError(f"{field}: expected an object of quantities")
    out = {}
    for name, text in rl.items():
        try:
            out[str(name)] = Quantity.parse(text)
        except (QuantityError, TypeError, ValueError) as e:
            raise ObjectError(f"{field}.{name}: {e}") from None
    return out


def validate_limit_range(obj: Mapping[str, Any]) -> None:
    spec = obj.get("spec")
    if not isinstance(spec, Mapping) or not isinstance(spec.get("limits"), list):
        raise ObjectError("spec.limits: Required value")
    for i, item in enumerate(spec["limits"]):
        field = f"spec.limits[{i}]"
        if not isinstance(item, Mapping):
            raise ObjectError(f"{field}: expected an object")
        if item.get("type") not in TYPES:
            raise ObjectError(f"{field}.type: Unsupported value: {item.get('type')!r}")
        for key in _FIELDS:
            quantities(item.get(key), f"{field}.{key}")


def default_limit_range(obj: dict[str, Any]) -> None:
    """kube's SetDefaults_LimitRangeItem, in place (after :func:`validate_limit_range`)."""
    for item in obj["spec"]["limits"]:
        if item.get("type") != "Container":
            continue
        default = item.setdefault("default", {}) or {}
        request = item.setdefault("defaultRequest", {}) or {}
        for source, target in (
            (item.get("max"), default),
            (default, request),
            (item.get("min"), request),
        ):
            for key, value in list((source or {}).items()):
                target.setdefault(key, value)
        item["default"], item["defaultRequest"] = default, request


def admit(pod: dict[str, Any], ranges: Iterable[Mapping[str, Any]]) -> None:
    """Mutate and check a pod as the LimitRanger plugin does, for ``ranges`` (the
    defaulted LimitRanges of its namespace, by name). Raises ObjectError."""
    ranges = list(ranges)
    spec = pod.get("spec")
    if not ranges or not isinstance(spec, dict):
        return
    containers = [
        (kind, c)
        for key, kind in (("containers", "container"), ("initContainers", "init container"))
        for c in spec.get(key) or ()
        if isinstance(c, dict)
    ]
    for _, c in containers:  # the API server's defaulting: a missing request is the limit
        res = c.setdefault("resources", {})
        for name, value in (res.get("limits") or {}).items():
            res.setdefault("requests", {}).setdefault(name, value)
    for lr in ranges:  # each in turn; the last that set something writes the annotation
        limits: dict[str, Any] = {}
        requests: dict[str, Any] = {}
        for item in lr["spec"]["limits"]:
            if item.get("type") == "Container":
                limits.update(item.get("default") or {})
                requests.update(item.get("defaultRequest") or {})
        notes = [note for kind, c in containers for note in _merge(c, kind, requests, limits)]
        if notes:
            annotations = pod.setdefault("metadata", {}).setdefault("annotations", {})
            annotations[ANNOTATION] = "LimitRanger plugin set: " + "; ".join(notes)
    for lr in ranges:
        errors = _check(spec, lr["spec"]["limits"])
        if errors:
            unique = list(dict.fromkeys(errors))
            text = unique[0] if len(unique) == 1 else "[" + ", ".join(unique) + "]"
            raise ObjectError(f"spec: {text}")


def _merge(
    c: dict[str, Any], kind: str, requests: Mapping[str, Any], limits: Mapping[str, Any]
) -> list[str]:
    res = c.setdefault("resources", {})
    set_by: dict[str, list[str]] = {"request": [], "limit": []}
    for word, key, defaults in (("limit", "limits", limits), ("request", "requests", requests)):
        have = res.get(key) or {}
        for name, value in defaults.items():
            if name not in have:
                have[name] = value
                set_by[word].append(name)
        if have:
            res[key] = have
    name = c.get("name", "")
    return [
        f"{', '.join(sorted(set_by[word]))} {word} for {kind} {name}"
        for word in ("request", "limit")
        if set_by[word]
    ]


def _check(spec: Mapping[str, Any], items: list[Mapping[str, Any]]) -> list[str]:
    # each container's (requests, limits), read once for every item
    containers = [
        (
            quantities((c.get("resources") or {}).get("requests"), ""),
            quantities((c.get("resources") or {}).get("limits"), ""),
        )
        for key in ("containers", "initContainers")
        for c in spec.get(key) or ()
    ]
    errors: list[str] = []
    for item in items:
        kind = item.get("type")
        if kind == "Container":
            for requests, limits in containers:
                errors += _constraints("Container", item, requests, limits)
        elif kind == "Pod":
            errors += _constraints("Pod", item, *_pod_sums(spec))
    return errors


def _constraints(
    kind: str, item: Mapping[str, Any], req: dict[str, Quantity], lim: dict[str, Quantity]
) -> list[str]:
    out = []
    for name, bound in quantities(item.get("min"), "").items():
        out.append(_min(kind, name, bound, req, lim))
    for name, bound in quantities(item.get("max"), "").items():
        out.append(_max(kind, name, bound, req, lim))
    for name, bound in quantities(item.get("maxLimitRequestRatio"), "").items():
        out.append(_ratio(kind, name, bound, req, lim))
    return [e for e in out if e]


def _min(
    kind: str, name: str, bound: Quantity, req: dict[str, Quantity], lim: dict[str, Quantity]
) -> str:
    head = f"minimum {name} usage per {kind} is {canonical(bound)}"
    if name not in req:
        return f"{head}.  No request is specified"
    if req[name].milli() < bound.milli():
        return f"{head}, but request is {canonical(req[name])}"
    if name in lim and lim[name].milli() < bound.milli():
        return f"{head}, but limit is {canonical(lim[name])}"
    return ""


def _max(
    kind: str, name: str, bound: Quantity, req: dict[str, Quantity], lim: dict[str, Quantity]
) -> str:
    head = f"maximum {name} usage per {kind} is {canonical(bound)}"
    if name not in lim:
        return f"{head}.  No limit is specified"
    if lim[name].milli() > bound.milli():
        return f"{head}, but limit is {canonical(lim[name])}"
    if name in req and req[name].milli() > bound.milli():
        return f"{head}, but request is {canonical(req[name])}"
    return ""


def _ratio(
    kind: str, name: str, bound: Quantity, req: dict[str, Quantity], lim: dict[str, Quantity]
) -> str:
    head = f"{name} max limit to request ratio per {kind} is {canonical(bound)}"
    r, m = req.get(name), lim.get(name)
    if r is None or r.milli() == 0:
        return f"{head}, but no request is specified or request is 0"
    if m is None or m.milli() == 0:
        return f"{head}, but no limit is specified or limit is 0"
    ratio = m.milli() / r.milli()
    if ratio * 1000 > bound.milli():
        return f"{head}, but provided ratio is {ratio:f}"
    return ""


def _pod_sums(spec: Mapping[str, Any]) -> tuple[dict[str, Quantity], dict[str, Quantity]]:
    """The pod's requests and limits as LimitRanger sums them (its podRequests and
    podLimits: containers and sidecars added, each init container with the sidecars
    before it, the larger of the two; pod-level cpu and memory replace the sums)."""
    sums = []
    for key in ("requests", "limits"):
        total: dict[str, Quantity] = {}
        sidecars: dict[str, Quantity] = {}
        largest: dict[str, Quantity] = {}
        for c in spec.get("containers") or ():
            _add(total, quantities((c.get("resources") or {}).get(key), ""))
        for c in spec.get("initContainers") or ():
            own = quantities((c.get("resources") or {}).get(key), "")
            if c.get("restartPolicy") == "Always":
                _add(total, own)
                _add(sidecars, own)
                own = sidecars
            else:
                own = _add(dict(own), sidecars)
            _max_into(largest, own)
        _max_into(total, largest)
        level = quantities(((spec.get("resources") or {}).get(key)), "")
        total.update({k: v for k, v in level.items() if k in ("cpu", "memory")})
        sums.append(total)
    return sums[0], sums[1]


def _add(into: dict[str, Quantity], more: Mapping[str, Quantity]) -> dict[str, Quantity]:
    for name, q in more.items():
        into[name] = into[name] + q if name in into else q
    return into


def _max_into(into: dict[str, Quantity], more: Mapping[str, Quantity]) -> None:
    for name, q in more.items():
        if name not in into or q.value > into[name].value:
            into[name] = q
