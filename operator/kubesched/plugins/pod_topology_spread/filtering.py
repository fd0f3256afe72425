"""PreFilter state and the Filter check: matching pods per topology domain, the global
minimum per constraint, and ``skew = matchNum + selfMatch - minMatchNum <= maxSkew``."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from kubesched.framework.labels import RequiredNodeAffinity, required_node_selector
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.types import Node, Pod
from kubesched.plugins.pod_topology_spread.constraints import (
    Constraint,
    included,
    node_has_keys,
    tolerates_node,
)
from kubesched.plugins.pod_topology_spread.rows import Domains, Rows

__all__ = ["CriticalPaths", "FilterState", "build_filter_state"]

I64 = npt.NDArray[np.int64]
BOOL = npt.NDArray[np.bool_]

MAX_INT32 = 2**31 - 1


class CriticalPaths:
    """kube's two tracked (domain, count) pairs: ``n0`` is the minimum; ``n1`` is at
    least ``n0`` (not necessarily the second minimum after AddPod/RemovePod)."""

    __slots__ = ("n0", "n1", "v0", "v1")

    def __init__(self) -> None:
        self.v0 = self.v1 = ""
        self.n0 = self.n1 = MAX_INT32

    def update(self, value: str, num: int) -> None:
        if value == self.v0:
            self.n0 = num
        elif value == self.v1:
            self.n1 = num
        else:
            if num < self.n0:
                self.v1, self.n1 = self.v0, self.n0
                self.v0, self.n0 = value, num
            elif num < self.n1:
                self.v1, self.n1 = value, num
            return
        if self.n0 > self.n1:
            self.v0, self.n0, self.v1, self.n1 = self.v1, self.n1, self.v0, self.n0

    def copy(self) -> CriticalPaths:
        c = CriticalPaths()
        c.v0, c.n0, c.v1, c.n1 = self.v0, self.n0, self.v1, self.n1
        return c


class FilterState:
    """Per constraint: matching pods per domain (indexed by the key's domain ids),
    which domains are eligible, their number, and the critical paths."""

    __slots__ = (
        "affinity",
        "constraints",
        "counts",
        "domains_num",
        "doms",
        "extra",
        "ids",
        "infos",
        "paths",
        "present",
        "self_match",
    )

    def __init__(self, constraints: list[Constraint], affinity: RequiredNodeAffinity) -> None:
        self.constraints = constraints
        self.affinity = affinity
        self.self_match: list[int] = []
        self.counts: list[I64] = []
        self.present: list[BOOL] = []
        self.extra: list[dict[str, int]] = []
        """Domains unknown to ``doms`` (only from AddPod on a node outside the list)."""
        self.domains_num: list[int] = []
        self.paths: list[CriticalPaths] = []
        self.doms: list[Domains] = []
        self.ids: list[I64] = []
        """Per constraint: the domain id of each node of ``infos`` (-1: no label)."""
        self.infos: Sequence[NodeInfo] = ()

    def clone(self) -> FilterState:
        c = FilterState(self.constraints, self.affinity)
        c.self_match = self.self_match
        c.counts = [a.copy() for a in self.counts]
        c.present = [a.copy() for a in self.present]
        c.extra = [dict(e) for e in self.extra]
        c.domains_num = list(self.domains_num)
        c.paths = [p.copy() for p in self.paths]
        c.doms = self.doms
        c.ids = self.ids
        c.infos = self.infos
        return c

    def _id(self, i: int, value: str) -> int:
        d = self.doms[i].ids.get(value)
        return -1 if d is None or d >= len(self.counts[i]) else d

    def match_num(self, i: int, value: str) -> int:
        d = self._id(i, value)
        if d < 0:
            return self.extra[i].get(value, 0)
        return int(self.counts[i][d])

    def min_match(self, i: int) -> int:
        """The global minimum; 0 while fewer domains than minDomains are eligible."""
        if self.domains_num[i] < self.constraints[i].min_domains:
            return 0
        return self.paths[i].n0

    def update(self, i: int, value: str, delta: int) -> None:
        d = self._id(i, value)
        if d < 0:
            extra = self.extra[i]
            if value not in extra:
                self.domains_num[i] += 1
            num = extra[value] = extra.get(value, 0) + delta
        else:
            if not self.present[i][d]:
                self.present[i][d] = True
                self.domains_num[i] += 1
            self.counts[i][d] += delta
            num = int(self.counts[i][d])
        self.paths[i].update(value, num)

    def update_with_pod(self, pod: Pod, other: Pod, node: Node | None, delta: int) -> None:
        """kube's updateWithPod: ``other`` (added or removed on ``node``) changes the
        counts where it would have been counted in PreFilter."""
        if node is None or other.namespace != pod.namespace:
            return
        if not node_has_keys(node.labels, self.constraints):
            return
        for i, c in enumerate(self.constraints):
            if not c.selector.matches(other.labels):
                continue
            if not included(c, pod, node, self.affinity):
                continue
            self.update(i, node.labels[c.key], delta)


def _affinity_mask(pod: Pod, affinity: RequiredNodeAffinity, rows: Rows) -> I64:
    req = required_node_selector(pod)
    key = ("affinity", tuple(sorted(pod.node_selector.items())), repr(req))

    def fn(ni: NodeInfo) -> int:
        return int(ni.node is not None and affinity.match_node(ni.node))

    return rows.flags(key, fn)


def _taint_mask(pod: Pod, rows: Rows) -> I64:
    key = ("tolerations", tuple((t.key, t.operator, t.value, t.effect) for t in pod.tolerations))

    def fn(ni: NodeInfo) -> int:
        return int(ni.node is not None and tolerates_node(pod, ni.node))

    return rows.flags(key, fn)


def inclusion_mask(
    c: Constraint, pod: Pod, affinity: RequiredNodeAffinity, rows: Rows, base: BOOL
) -> BOOL:
    """``base`` narrowed to the nodes ``c``'s inclusion policies count."""
    m = base
    if c.honor_affinity and not affinity.empty:
        m = m & (_affinity_mask(pod, affinity, rows) != 0)
    if c.honor_taints:
        m = m & (_taint_mask(pod, rows) != 0)
    return m


def build_filter_state(
    pod: Pod, constraints: list[Constraint], infos: Sequence[NodeInfo], rows: Rows
) -> FilterState:
    """kube's calPreFilterState over ``infos``, from memoised per-node columns."""
    rows.sync(infos)
    n = len(infos)
    affinity = RequiredNodeAffinity.of_pod(pod)
    s = FilterState(constraints, affinity)
    s.infos = infos
    ids_by_key = {c.key: rows.domain_ids(c.key) for c in constraints}
    has_all = np.ones(n, dtype=bool)
    for ids in ids_by_key.values():
        has_all &= ids >= 0
    for c in constraints:
        ids = ids_by_key[c.key]
        doms = rows.domains[c.key]
        v = len(doms.values)
        elig = inclusion_mask(c, pod, affinity, rows, has_all)
        cnt = rows.pod_counts(pod.namespace, c.selector_key, c.selector)
        d = ids[elig]
        present = np.bincount(d, minlength=v) > 0
        counts = np.bincount(d, weights=cnt[elig], minlength=v).astype(np.int64)
        paths = CriticalPaths()
        dom_ids = np.flatnonzero(present)
        if len(dom_ids):
            k = min(2, len(dom_ids))
            smallest = dom_ids[np.argsort(counts[dom_ids], kind="stable")[:k]]
            for j in smallest.tolist():
                paths.update(doms.values[j], int(counts[j]))
        s.self_match.append(1 if c.selector.matches(pod.labels) else 0)
        s.counts.append(counts)
        s.present.append(present)
        s.extra.append({})
        s.domains_num.append(len(dom_ids))
        s.paths.append(paths)
        s.doms.append(doms)
        s.ids.append(ids)
    return s


def filter_rows(s: FilterState) -> BOOL:
    """Filter's answer for every node of ``s.infos`` at once."""
    n = len(s.infos)
    mask = np.ones(n, dtype=bool)
    for i, c in enumerate(s.constraints):
        ids = s.ids[i]
        has = ids >= 0
        per_row = s.counts[i][np.maximum(ids, 0)] if len(s.counts[i]) else np.zeros(n, np.int64)
        ok = per_row + (s.self_match[i] - s.min_match(i)) <= c.max_skew
        mask &= has & ok
    return mask
