"""RuntimeClass (``node.k8s.io/v1``) in scenarios, and what kube-apiserver's RuntimeClass
admission plugin (on by default) does to a pod that names one (``spec.runtimeClassName``)
before any scheduler reads it:

- **overhead**: the class's ``overhead.podFixed`` becomes the pod's ``spec.overhead``
  (which NodeResourcesFit adds to the pod's requests). A pod stating an overhead of its
  own is refused unless it is the class's; a pod with an overhead and no class that
  defines one is refused too;
- **scheduling**: the class's ``scheduling.nodeSelector`` is merged into the pod's (a
  key the pod sets to another value is refused), its ``scheduling.tolerations`` into the
  pod's (kube's MergeTolerations: a toleration another one covers is dropped);
- a class that does not exist refuses the pod.

The refusals carry the API server's words (``pod rejected: ...``, ``conflict: ...``).
Admission runs after DefaultTolerationSeconds', as in kube-apiserver's plugin order.
A running scheduler reads none of this: on a cluster the API server has done it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.framework.types import ObjectError
from kubesched.simulator.limit_ranges import quantities

__all__ = ["API_VERSION", "admit", "merge_tolerations", "validate_runtime_class"]

API_VERSION = "node.k8s.io/v1"

_EFFECTS = ("", "NoSchedule", "PreferNoSchedule", "NoExecute")
_OPERATORS = ("", "Equal", "Exists")


def validate_runtime_class(obj: Mapping[str, Any]) -> None:
    """The fields the API server validates and admission reads."""
    handler = obj.get("handler")
    if not isinstance(handler, str) or not handler:
        raise ObjectError("handler: Required value")
    overhead = obj.get("overhead")
    if overhead is not None:
        if not isinstance(overhead, Mapping):
            raise ObjectError("overhead: expected an object")
        _quantities(overhead.get("podFixed"), "overhead.podFixed")
    scheduling = obj.get("scheduling")
    if scheduling is None:
        return
    if not isinstance(scheduling, Mapping):
        raise ObjectError("scheduling: expected an object")
    selector = scheduling.get("nodeSelector")
    if selector is not None and (
        not isinstance(selector, Mapping)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in selector.items())
    ):
        raise ObjectError("scheduling.nodeSelector: keys and values must be strings")
    tolerations = scheduling.get("tolerations")
    if tolerations is None:
        return
    if not isinstance(tolerations, list):
        raise ObjectError("scheduling.tolerations: expected a list")
    for i, t in enumerate(tolerations):
        _check_toleration(t, f"scheduling.tolerations[{i}]")


def _quantities(rl: Any, field: str) -> dict[str, Any]:
    """The exact values of a resource list (``0.5`` equals ``500m``, as kube compares)."""
    return {name: q.value for name, q in quantities(rl, field).items()}


def _check_toleration(t: Any, field: str) -> None:
    if not isinstance(t, Mapping):
        raise ObjectError(f"{field}: expected an object")
    op, effect = t.get("operator") or "", t.get("effect") or ""
    if op not in _OPERATORS:
        raise ObjectError(f"{field}.operator: Unsupported value: {op!r}")
    if effect not in _EFFECTS:
        raise ObjectError(f"{field}.effect: Unsupported value: {effect!r}")
    if not t.get("key") and op != "Exists":
        raise ObjectError(f"{field}.operator: operator must be Exists when `key` is empty")
    if op == "Exists" and t.get("value"):
        raise ObjectError(f"{field}.operator: value must be empty when `operator` is 'Exists'")
    if t.get("tolerationSeconds") is not None and effect != "NoExecute":
        raise ObjectError(
            f"{field}.effect: effect must be 'NoExecute' when `tolerationSeconds` is set"
        )


def admit(spec: dict[str, Any], classes: Mapping[str, Mapping[str, Any]]) -> None:
    """Mutate and check a pod's ``spec`` as the RuntimeClass admission plugin does;
    ``classes`` are the scenario's RuntimeClasses by name. Raises ObjectError."""
    name = spec.get("runtimeClassName")
    rc = None
    if name is not None:
        rc = classes.get(name) if isinstance(name, str) else None
        if rc is None:
            raise ObjectError(
                f'spec.runtimeClassName: pod rejected: RuntimeClass "{name}" not found'
            )
    fixed = (rc.get("overhead") or {}).get("podFixed") if rc is not None else None
    own = spec.get("overhead")
    if fixed is not None:
        if own and _quantities(own, "spec.overhead") != _quantities(fixed, "overhead.podFixed"):
            raise ObjectError(
                "spec.overhead: pod rejected: Pod's Overhead doesn't match RuntimeClass's "
                "defined Overhead"
            )
        spec["overhead"] = dict(fixed)
    elif own is not None:
        raise ObjectError(
            "spec.overhead: pod rejected: Pod Overhead set without corresponding RuntimeClass "
            "defined Overhead"
        )
    scheduling = rc.get("scheduling") if rc is not None else None
    if scheduling:
        _merge_scheduling(spec, scheduling)


def _merge_scheduling(spec: dict[str, Any], scheduling: Mapping[str, Any]) -> None:
    wanted = scheduling.get("nodeSelector") or {}
    selector = spec.get("nodeSelector")
    if selector is None:
        merged = dict(wanted) if wanted else None
    else:
        merged = dict(selector)
        for key, value in wanted.items():
            if key in merged and merged[key] != value:
                raise ObjectError(
                    f"spec.nodeSelector: conflict: runtimeClass.scheduling.nodeSelector[{key}] "
                    f"= {value}; pod.spec.nodeSelector[{key}] = {merged[key]}"
                )
            merged[key] = value
    if merged is not None:
        spec["nodeSelector"] = merged
    tolerations = merge_tolerations(
        list(spec.get("tolerations") or ()), list(scheduling.get("tolerations") or ())
    )
    if tolerations:
        spec["tolerations"] = tolerations


def merge_tolerations(
    first: Sequence[Mapping[str, Any]], second: Sequence[Mapping[str, Any]]
) -> list[Mapping[str, Any]]:
    """kube's MergeTolerations: both lists in order, without a toleration another one
    covers (of two equal ones, the first is kept)."""
    every = [*first, *second]
    merged: list[Mapping[str, Any]] = []
    for i, t in enumerate(every):
        if any(_covers(m, t) for m in merged):
            continue
        if any(not _same(t, later) and _covers(later, t) for later in every[i + 1 :]):
            continue
        merged.append(t)
    return merged


def _norm(t: Mapping[str, Any]) -> tuple[Any, ...]:
    return (
        t.get("key") or "",
        t.get("operator") or "",
        t.get("value") or "",
        t.get("effect") or "",
        t.get("tolerationSeconds"),
    )


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return _norm(a) == _norm(b)


def _covers(ss: Mapping[str, Any], t: Mapping[str, Any]) -> bool:
    """kube's isSuperset: every taint ``t`` tolerates, ``ss`` tolerates too."""
    if _same(ss, t):
        return True
    s_key, s_op, s_value, s_effect, s_seconds = _norm(ss)
    t_key, t_op, t_value, t_effect, t_seconds = _norm(t)
    if t_key != s_key and (s_key != "" or s_op != "Exists"):
        return False
    if t_effect != s_effect and s_effect != "":
        return False
    # a NoExecute toleration with a time covers only those that leave no later
    if (
        s_effect == "NoExecute"
        and s_seconds is not None
        and (t_seconds is None or t_seconds > s_seconds)
    ):
        return False
    if s_op in ("", "Equal"):
        return bool(t_op == "Equal" and t_value == s_value)
    return bool(s_op == "Exists")
