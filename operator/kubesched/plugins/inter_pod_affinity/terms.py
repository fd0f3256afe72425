"""Pod affinity terms, compiled once per pod object, and the snapshot's topology values
as integer columns (for the vectorised Filter and Score).

A term matches a pod when the pod's namespace is one of the term's namespaces (or the
pod's namespace labels match the term's namespaceSelector) and the pod's labels match
the term's labelSelector. An empty ``namespaces`` list with no ``namespaceSelector``
means the namespace of the pod that owns the term; ``namespaceSelector: {}`` means
every namespace. ``matchLabelKeys`` / ``mismatchLabelKeys`` are merged into the
labelSelector as ``key In (value)`` / ``key NotIn (value)`` from the owner's labels,
as kube-apiserver does when it admits a pod (merging an already merged term again adds
the same requirement, which changes nothing).
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from kubesched.framework.labels import NOTHING, LabelSelector, compile_label_selector
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import ObjectError, Pod

__all__ = [
    "EMPTY_TERMS",
    "AffinityTerm",
    "PodTerms",
    "TermCache",
    "TopologyColumns",
    "WeightedTerm",
    "match_all",
]

I64 = npt.NDArray[np.int64]


class AffinityTerm:
    """A compiled ``PodAffinityTerm``; ``key`` identifies equal terms (for memos)."""

    __slots__ = ("key", "namespaces", "ns_selector", "selector", "topology_key")

    def __init__(
        self,
        namespaces: frozenset[str],
        ns_selector: LabelSelector,
        selector: LabelSelector,
        topology_key: str,
        key: Hashable,
    ) -> None:
        self.namespaces = namespaces
        self.ns_selector = ns_selector
        self.selector = selector
        self.topology_key = topology_key
        self.key = key

    def matches(self, pod: Pod, ns_labels: Mapping[str, str] | None) -> bool:
        return self.matches_labels(pod.namespace, pod.labels, ns_labels)

    def matches_labels(
        self, namespace: str, labels: Mapping[str, str], ns_labels: Mapping[str, str] | None
    ) -> bool:
        """Whether the term selects a pod of ``namespace`` (labelled ``ns_labels``) with
        ``labels``."""
        if namespace in self.namespaces or (
            self.ns_selector is not NOTHING and self.ns_selector.matches(ns_labels or {})
        ):
            return self.selector.matches(labels)
        return False

    def resolve_namespaces(self, namespaces: Iterable[Mapping[str, Any]]) -> AffinityTerm:
        """The incoming pod's form: a non-empty namespaceSelector unrolled into names of
        the namespaces it selects now (so matching needs no namespace labels)."""
        sel = self.ns_selector
        if sel is NOTHING or sel.is_empty():
            return self
        names = set(self.namespaces)
        for ns in namespaces:
            meta = ns.get("metadata") or {}
            if sel.matches(meta.get("labels") or {}):
                names.add(str(meta.get("name") or ""))
        frozen = frozenset(names)
        return AffinityTerm(
            frozen, NOTHING, self.selector, self.topology_key, ("resolved", self.key, frozen)
        )

    def __repr__(self) -> str:
        return f"<AffinityTerm {self.topology_key} ns={sorted(self.namespaces)}>"


class WeightedTerm:
    __slots__ = ("term", "weight")

    def __init__(self, term: AffinityTerm, weight: int) -> None:
        self.term = term
        self.weight = weight


class PodTerms:
    """A pod's (anti-)affinity terms by kind."""

    __slots__ = ("preferred_affinity", "preferred_anti", "required_affinity", "required_anti")

    def __init__(
        self,
        required_affinity: tuple[AffinityTerm, ...] = (),
        required_anti: tuple[AffinityTerm, ...] = (),
        preferred_affinity: tuple[WeightedTerm, ...] = (),
        preferred_anti: tuple[WeightedTerm, ...] = (),
    ) -> None:
        self.required_affinity = required_affinity
        self.required_anti = required_anti
        self.preferred_affinity = preferred_affinity
        self.preferred_anti = preferred_anti


EMPTY_TERMS = PodTerms()


def match_all(terms: Sequence[AffinityTerm], pod: Pod) -> bool:
    """The pod matches every term (and there is at least one); namespaces resolved."""
    if not terms:
        return False
    return all(t.matches(pod, None) for t in terms)


def _merged_selector(owner: Pod, term: Mapping[str, Any]) -> Any:
    sel = term.get("labelSelector")
    match_keys = term.get("matchLabelKeys") or ()
    mismatch_keys = term.get("mismatchLabelKeys") or ()
    if sel is None or not (match_keys or mismatch_keys) or not isinstance(sel, Mapping):
        return sel
    exprs = list(sel.get("matchExpressions") or ())
    for keys, op in ((match_keys, "In"), (mismatch_keys, "NotIn")):
        for k in keys:
            if isinstance(k, str) and k in owner.labels:
                exprs.append({"key": k, "operator": op, "values": [owner.labels[k]]})
    return {**sel, "matchExpressions": exprs}


_Entry = tuple[Mapping[str, Any], Pod, PodTerms, ObjectError | None]


class TermCache:
    """Compiled terms per pod (by uid; reused while the pod's raw dict is the same object,
    or its affinity, namespace and labels are equal: a pod's bound copy from the watch
    needs no new parse) and interned by content, so equal terms of many pods are one
    object."""

    MAX_PODS = 200_000

    def __init__(self) -> None:
        self._pods: dict[str, _Entry] = {}
        self._interned: dict[Hashable, AffinityTerm] = {}

    def _entry(self, pod: Pod) -> _Entry:
        hit = self._pods.get(pod.uid)
        if hit is not None and hit[0] is pod.raw:
            return hit
        if hit is not None:
            was = hit[1]
            if (
                was.affinity == pod.affinity
                and was.namespace == pod.namespace
                and was.labels == pod.labels
            ):
                hit = self._pods[pod.uid] = (pod.raw, pod, hit[2], hit[3])
                return hit
        if len(self._pods) >= self.MAX_PODS:
            self._pods.clear()
            self._interned.clear()
        try:
            hit = (pod.raw, pod, self._parse(pod, strict=True), None)
        except ObjectError as e:
            hit = (pod.raw, pod, self._parse(pod, strict=False), e)
        self._pods[pod.uid] = hit
        return hit

    def get(self, pod: Pod) -> PodTerms:
        """The incoming pod's terms; raises ObjectError for a term that does not compile."""
        a = pod.affinity
        if not a or not (a.get("podAffinity") or a.get("podAntiAffinity")):
            return EMPTY_TERMS
        _, _, terms, err = self._entry(pod)
        if err is not None:
            raise err
        return terms

    def lenient(self, pod: Pod) -> PodTerms:
        """An existing pod's terms; a kind whose terms do not compile has none (as kube's
        PodInfo keeps them)."""
        a = pod.affinity
        if not a or not (a.get("podAffinity") or a.get("podAntiAffinity")):
            return EMPTY_TERMS
        return self._entry(pod)[2]

    def _parse(self, pod: Pod, *, strict: bool) -> PodTerms:
        a = pod.affinity
        aff = a.get("podAffinity") or {}
        anti = a.get("podAntiAffinity") or {}
        req = "requiredDuringSchedulingIgnoredDuringExecution"
        pref = "preferredDuringSchedulingIgnoredDuringExecution"
        out: list[Any] = []
        for kind, src, weighted in (
            ("podAffinity", aff, False),
            ("podAntiAffinity", anti, False),
            ("podAffinity", aff, True),
            ("podAntiAffinity", anti, True),
        ):
            field = f"spec.affinity.{kind}.{pref if weighted else req}"
            try:
                out.append(
                    self._terms(pod, src.get(pref if weighted else req) or (), field, weighted)
                )
            except (ObjectError, AttributeError, TypeError, ValueError) as e:
                # As kube's PodInfo: a kind whose terms do not parse has no terms.
                if strict:
                    raise (
                        e if isinstance(e, ObjectError) else ObjectError(f"{field}: {e}")
                    ) from None
                out.append(())
        return PodTerms(*out)

    def _terms(self, pod: Pod, items: Sequence[Any], field: str, weighted: bool) -> tuple[Any, ...]:
        res: list[Any] = []
        for i, item in enumerate(items):
            f = f"{field}[{i}]"
            if weighted:
                w = item.get("weight")
                if not isinstance(w, int) or isinstance(w, bool):
                    raise ObjectError(f"{f}.weight: must be an integer")
                res.append(WeightedTerm(self._term(pod, item.get("podAffinityTerm") or {}, f), w))
            else:
                res.append(self._term(pod, item, f))
        return tuple(res)

    def _term(self, owner: Pod, d: Mapping[str, Any], field: str) -> AffinityTerm:
        sel = _merged_selector(owner, d)
        ns_list = d.get("namespaces") or []
        ns_sel = d.get("namespaceSelector")
        if not ns_list and ns_sel is None:
            namespaces = frozenset((owner.namespace,))
        else:
            namespaces = frozenset(str(n) for n in ns_list)
        tk = str(d.get("topologyKey") or "")
        key = (
            namespaces,
            json.dumps(sel, sort_keys=True),
            json.dumps(ns_sel, sort_keys=True),
            tk,
        )
        term = self._interned.get(key)
        if term is None:
            term = AffinityTerm(
                namespaces,
                compile_label_selector(ns_sel, f"{field}.namespaceSelector"),
                compile_label_selector(sel, f"{field}.labelSelector"),
                tk,
                key,
            )
            self._interned[key] = term
        return term


class TopologyColumns:
    """Per topology key, an integer code per snapshot row (-1: the node lacks the label)
    and the value -> code table; rebuilt when a node object or the node set changes."""

    def __init__(self) -> None:
        self._snap: Snapshot | None = None
        self._gen = -1
        self._version: Any = None
        self._nodes: list[Any] = []
        self._cols: dict[str, tuple[I64, dict[str, int]]] = {}

    def _validate(self, snap: Snapshot) -> None:
        if snap is self._snap and snap.generation == self._gen:
            return
        version = getattr(snap, "labels_version", None)
        if version is not None:
            # The snapshot says when row nodes' labels may have changed.
            if snap is not self._snap or version != self._version:
                self._cols = {}
                self._nodes = [ni.node for ni in snap.node_infos]
            self._version = version
        else:
            nodes = [ni.node for ni in snap.node_infos]
            same = len(nodes) == len(self._nodes) and all(
                a is b for a, b in zip(nodes, self._nodes, strict=True)
            )
            if not same or snap is not self._snap:
                self._cols = {}
            self._nodes = nodes
        self._snap = snap
        self._gen = snap.generation

    def column(self, snap: Snapshot, key: str) -> tuple[I64, dict[str, int]]:
        self._validate(snap)
        col = self._cols.get(key)
        if col is None:
            table: dict[str, int] = {}
            codes = np.empty(len(self._nodes), dtype=np.int64)
            for i, node in enumerate(self._nodes):
                v = node.labels.get(key) if node is not None else None
                if v is None:
                    codes[i] = -1
                else:
                    c = table.get(v)
                    if c is None:
                        c = table[v] = len(table)
                    codes[i] = c
            col = self._cols[key] = (codes, table)
        return col
