"""What kube-apiserver refuses in a pod (and a label selector) that the scheduler's own
parsing would otherwise take quietly, so a scenario fails where a cluster would:
containers given as a mapping, requests above limits, an unknown selector operator.
Each check raises :class:`~kubesched.framework.types.ObjectError` with the field path."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubesched.framework.labels import compile_requirement
from kubesched.framework.quantity import QuantityError, parse_quantity
from kubesched.framework.types import ObjectError

__all__ = ["check_label_selector", "check_pod_spec"]

LABEL_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
NODE_OPERATORS = (*LABEL_OPERATORS, "Gt", "Lt")


def _expressions(exprs: Any, field: str, operators: tuple[str, ...]) -> None:
    if exprs is None:
        return
    if not isinstance(exprs, list):
        raise ObjectError(f"{field}: must be a list")
    for i, e in enumerate(exprs):
        compile_requirement(e, f"{field}[{i}]", operators)


def check_label_selector(sel: Any, field: str) -> None:
    """A metav1.LabelSelector: matchLabels of strings, matchExpressions with In, NotIn,
    Exists or DoesNotExist."""
    if sel is None:
        return
    if not isinstance(sel, Mapping):
        raise ObjectError(f"{field}: expected an object")
    ml = sel.get("matchLabels") or {}
    if not isinstance(ml, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in ml.items()
    ):
        raise ObjectError(f"{field}.matchLabels: keys and values must be strings")
    _expressions(sel.get("matchExpressions"), f"{field}.matchExpressions", LABEL_OPERATORS)


def _node_selector_term(term: Any, field: str) -> None:
    if not isinstance(term, Mapping):
        raise ObjectError(f"{field}: expected an object")
    _expressions(term.get("matchExpressions"), f"{field}.matchExpressions", NODE_OPERATORS)
    _expressions(term.get("matchFields"), f"{field}.matchFields", NODE_OPERATORS)


def _list(value: Any, field: str) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ObjectError(f"{field}: must be a list")
    return value


def _affinity(aff: Any) -> None:
    if aff is None:
        return
    if not isinstance(aff, Mapping):
        raise ObjectError("spec.affinity: expected an object")
    na = aff.get("nodeAffinity") or {}
    f = "spec.affinity.nodeAffinity"
    req = (
        na.get("requiredDuringSchedulingIgnoredDuringExecution")
        if isinstance(na, Mapping)
        else None
    )
    if isinstance(req, Mapping):
        rf = f"{f}.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms"
        for i, term in enumerate(_list(req.get("nodeSelectorTerms"), rf)):
            _node_selector_term(term, f"{rf}[{i}]")
    pf = f"{f}.preferredDuringSchedulingIgnoredDuringExecution"
    prefs = (
        na.get("preferredDuringSchedulingIgnoredDuringExecution")
        if isinstance(na, Mapping)
        else None
    )
    for i, pref in enumerate(_list(prefs, pf)):
        if isinstance(pref, Mapping):
            _node_selector_term(pref.get("preference") or {}, f"{pf}[{i}].preference")
    for kind in ("podAffinity", "podAntiAffinity"):
        pa = aff.get(kind) or {}
        if not isinstance(pa, Mapping):
            raise ObjectError(f"spec.affinity.{kind}: expected an object")
        rf = f"spec.affinity.{kind}.requiredDuringSchedulingIgnoredDuringExecution"
        for i, term in enumerate(
            _list(pa.get("requiredDuringSchedulingIgnoredDuringExecution"), rf)
        ):
            _pod_affinity_term(term, f"{rf}[{i}]")
        pf = f"spec.affinity.{kind}.preferredDuringSchedulingIgnoredDuringExecution"
        for i, w in enumerate(_list(pa.get("preferredDuringSchedulingIgnoredDuringExecution"), pf)):
            if isinstance(w, Mapping):
                _pod_affinity_term(w.get("podAffinityTerm") or {}, f"{pf}[{i}].podAffinityTerm")


def _pod_affinity_term(term: Any, field: str) -> None:
    if not isinstance(term, Mapping):
        raise ObjectError(f"{field}: expected an object")
    check_label_selector(term.get("labelSelector"), f"{field}.labelSelector")
    check_label_selector(term.get("namespaceSelector"), f"{field}.namespaceSelector")


def _containers(spec: Mapping[str, Any], key: str, required: bool) -> None:
    containers = spec.get(key)
    if containers is None and not required:
        return
    if isinstance(containers, Mapping):
        raise ObjectError(
            f"spec.{key}: must be a list of containers (each entry '- name: ...'), got a mapping"
        )
    if not isinstance(containers, list) or (required and not containers):
        raise ObjectError(f"spec.{key}: required (at least one container)")
    for i, c in enumerate(containers):
        if not isinstance(c, Mapping):
            raise ObjectError(f"spec.{key}[{i}]: expected an object")
        for field in ("name", "image"):
            if not isinstance(c.get(field), str) or not c.get(field):
                raise ObjectError(f"spec.{key}[{i}].{field}: required")
        _requests_within_limits(c.get("resources"), f"spec.{key}[{i}].resources")


def _requests_within_limits(res: Any, field: str) -> None:
    if not isinstance(res, Mapping):
        return
    requests, limits = res.get("requests"), res.get("limits")
    if not isinstance(requests, Mapping) or not isinstance(limits, Mapping):
        return
    for name, req in requests.items():
        if name not in limits:
            continue
        try:
            over = parse_quantity(req) > parse_quantity(limits[name])
        except QuantityError:
            continue  # the pod's parsing names the bad quantity
        if over:
            raise ObjectError(
                f"{field}.requests.{name}: invalid value {req!r}: must be less than or equal "
                f"to {name} limit of {limits[name]}"
            )


def check_pod_spec(spec: Mapping[str, Any]) -> None:
    """Containers (a non-empty list), requests within limits, selectors' operators."""
    _containers(spec, "containers", required=True)
    _containers(spec, "initContainers", required=False)
    ns = spec.get("nodeSelector")
    if ns is not None and (
        not isinstance(ns, Mapping)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in ns.items())
    ):
        raise ObjectError("spec.nodeSelector: keys and values must be strings")
    _affinity(spec.get("affinity"))
    f = "spec.topologySpreadConstraints"
    for i, c in enumerate(_list(spec.get("topologySpreadConstraints"), f)):
        if isinstance(c, Mapping):
            check_label_selector(c.get("labelSelector"), f"{f}[{i}].labelSelector")
