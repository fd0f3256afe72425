"""Spread constraints as the plugin uses them: parsed from the pod (or from the default
constraints and the selector of the pod's Services and controller), with the node
inclusion policies and the pod's required node affinity."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kubesched.framework.helpers import DO_NOT_SCHEDULE_EFFECTS, find_matching_untolerated_taint
from kubesched.framework.labels import (
    LabelSelector,
    RequiredNodeAffinity,
    Requirement,
    compile_label_selector,
)
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.types import Node, ObjectError, Pod, Taint

__all__ = [
    "DO_NOT_SCHEDULE",
    "HOSTNAME",
    "SCHEDULE_ANYWAY",
    "ZONE",
    "Constraint",
    "count_matching",
    "default_selector",
    "node_has_keys",
    "parse_constraints",
]

HOSTNAME = "kubernetes.io/hostname"
ZONE = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"

SelectorKey = tuple[Any, ...]


def selector_key(sel: LabelSelector) -> SelectorKey:
    """A hashable identity of what a selector matches (for memoised pod counts)."""
    if sel.nothing:
        return ("nothing",)
    return (
        tuple(sorted(sel.match_labels.items())),
        tuple(sorted((r.key, r.op, tuple(sorted(r.values))) for r in sel.exprs)),
    )


def _as_requirements(sel: LabelSelector) -> list[Requirement]:
    """A selector's conditions as requirements (matchLabels become ``In [value]``)."""
    reqs = [Requirement(k, "In", [v]) for k, v in sel.match_labels.items()]
    reqs.extend(sel.exprs)
    return reqs


def merge_match_labels(labels: Mapping[str, str], sel: LabelSelector) -> LabelSelector:
    """kube's merge of matchLabelKeys values into a selector: the label set AND the
    selector's requirements; a nil selector contributes no requirements."""
    if sel.nothing:
        return LabelSelector(labels)
    return LabelSelector(labels, _as_requirements(sel))


class Constraint:
    """One topology spread constraint, with defaults applied (minDomains 1,
    nodeAffinityPolicy Honor, nodeTaintsPolicy Ignore)."""

    __slots__ = (
        "honor_affinity",
        "honor_taints",
        "key",
        "max_skew",
        "min_domains",
        "selector",
        "selector_key",
    )

    def __init__(
        self,
        max_skew: int,
        key: str,
        selector: LabelSelector,
        *,
        min_domains: int = 1,
        honor_affinity: bool = True,
        honor_taints: bool = False,
    ) -> None:
        self.max_skew = max_skew
        self.key = key
        self.selector = selector
        self.selector_key = selector_key(selector)
        self.min_domains = min_domains
        self.honor_affinity = honor_affinity
        self.honor_taints = honor_taints

    def __repr__(self) -> str:
        return f"<Constraint {self.key} maxSkew={self.max_skew} minDomains={self.min_domains}>"


def _int(v: Any, field: str, default: int | None = None) -> int:
    if v is None and default is not None:
        return default
    if not isinstance(v, int) or isinstance(v, bool):
        raise ObjectError(f"{field}: must be an integer, got {v!r}")
    return v


def _policy(v: Any, field: str, default: str) -> bool:
    v = v or default
    if v not in (HONOR, IGNORE):
        raise ObjectError(f"{field}: must be Honor or Ignore, got {v!r}")
    return bool(v == HONOR)


def parse_constraints(
    raw: Sequence[Any], pod_labels: Mapping[str, str], action: str, field: str
) -> list[Constraint]:
    """The constraints of ``raw`` whose whenUnsatisfiable is ``action``."""
    out: list[Constraint] = []
    for i, c in enumerate(raw):
        f = f"{field}[{i}]"
        if not isinstance(c, Mapping):
            raise ObjectError(f"{f}: expected an object")
        if c.get("whenUnsatisfiable") != action:
            continue
        key = c.get("topologyKey")
        if not isinstance(key, str) or not key:
            raise ObjectError(f"{f}.topologyKey: required")
        sel = compile_label_selector(c.get("labelSelector"), f"{f}.labelSelector")
        keys = c.get("matchLabelKeys") or ()
        if keys:
            ml = {k: pod_labels[k] for k in keys if isinstance(k, str) and k in pod_labels}
            if ml:
                sel = merge_match_labels(ml, sel)
        out.append(
            Constraint(
                _int(c.get("maxSkew"), f"{f}.maxSkew"),
                key,
                sel,
                min_domains=_int(c.get("minDomains"), f"{f}.minDomains", 1),
                honor_affinity=_policy(
                    c.get("nodeAffinityPolicy"), f"{f}.nodeAffinityPolicy", HONOR
                ),
                honor_taints=_policy(c.get("nodeTaintsPolicy"), f"{f}.nodeTaintsPolicy", IGNORE),
            )
        )
    return out


# -- the default selector (kube's helper.DefaultSelector) ----------------------------------------
_CONTROLLERS = {
    ("v1", "ReplicationController"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "StatefulSet"),
}


def _controller_of(pod: Pod) -> Mapping[str, Any] | None:
    meta = pod.raw.get("metadata") or {}
    for ref in meta.get("ownerReferences") or ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def default_selector(pod: Pod, store: Any) -> LabelSelector | None:
    """The selectors of the Services selecting the pod, merged, and of its controlling
    ReplicationController / ReplicaSet / StatefulSet; None when that is empty."""
    label_set: dict[str, str] = {}
    exprs: list[Requirement] = []
    for svc in _list(store, "Service", pod.namespace):
        sel = (svc.get("spec") or {}).get("selector")
        if not isinstance(sel, Mapping):
            continue  # a nil selector matches nothing
        if all(pod.labels.get(k) == v for k, v in sel.items()):
            label_set.update(sel)
    ref = _controller_of(pod)
    if ref is not None and (ref.get("apiVersion"), ref.get("kind")) in _CONTROLLERS:
        obj = _get(store, str(ref.get("kind")), pod.namespace, str(ref.get("name") or ""))
        if obj is not None:
            spec_sel = (obj.get("spec") or {}).get("selector")
            if ref.get("kind") == "ReplicationController":
                if isinstance(spec_sel, Mapping):
                    label_set.update({str(k): str(v) for k, v in spec_sel.items()})
            elif spec_sel is not None:
                try:
                    sel = compile_label_selector(spec_sel)
                except ObjectError:
                    sel = None
                if sel is not None and not sel.nothing:
                    exprs.extend(_as_requirements(sel))
    if not label_set and not exprs:
        return None
    return LabelSelector(label_set, exprs)


def _list(store: Any, kind: str, namespace: str) -> Iterable[Mapping[str, Any]]:
    if store is None:
        return ()
    try:
        return list(store.list(kind, namespace))
    except RuntimeError:  # a framework without an object store
        return ()


def _get(store: Any, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None:
    if store is None:
        return None
    try:
        obj = store.get(kind, namespace, name)
    except RuntimeError:
        return None
    return obj if isinstance(obj, Mapping) else None


# -- nodes ----------------------------------------------------------------------------------------
def _hard(taint: Taint) -> bool:
    return taint.effect in DO_NOT_SCHEDULE_EFFECTS


def tolerates_node(pod: Pod, node: Node) -> bool:
    """No NoSchedule/NoExecute taint of the node is left untolerated by the pod."""
    if not node.taints:
        return True
    return find_matching_untolerated_taint(node.taints, pod.tolerations, _hard) is None


def included(c: Constraint, pod: Pod, node: Node, affinity: RequiredNodeAffinity) -> bool:
    """kube's matchNodeInclusionPolicies: whether ``node`` counts for ``c``."""
    if c.honor_affinity and not affinity.empty and not affinity.match_node(node):
        return False
    return not (c.honor_taints and not tolerates_node(pod, node))


def node_has_keys(labels: Mapping[str, str], constraints: Sequence[Constraint]) -> bool:
    return all(c.key in labels for c in constraints)


def count_matching(ni: NodeInfo, selector: LabelSelector, namespace: str) -> int:
    """Pods on the node in ``namespace``, not terminating, that ``selector`` matches."""
    n = 0
    for p in ni.pods:
        if p.namespace == namespace and not p.deletion_timestamp and selector.matches(p.labels):
            n += 1
    return n
