"""PreScore state and scores: per ScheduleAnyway constraint, matching pods per domain
over all nodes (domains taken from the feasible nodes), weighted by
``log(domains + 2)``; a node's raw score is ``sum(count * weight + maxSkew - 1)``
rounded half away from zero, and NormalizeScore inverts it:
``100 * (max + min - score) / max`` (100 for every node when max is 0, 0 for nodes
missing a required topology key)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from kubesched.framework.interface import MAX_NODE_SCORE
from kubesched.framework.labels import RequiredNodeAffinity
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.types import Pod
from kubesched.plugins.pod_topology_spread.constraints import (
    HOSTNAME,
    Constraint,
    count_matching,
)
from kubesched.plugins.pod_topology_spread.filtering import inclusion_mask
from kubesched.plugins.pod_topology_spread.rows import Domains, Rows

__all__ = ["ScoreState", "build_score_state", "go_round", "normalize"]

I64 = npt.NDArray[np.int64]
BOOL = npt.NDArray[np.bool_]


def go_round(x: float) -> int:
    """Go's ``math.Round`` for ``x >= 0``: halves away from zero."""
    t = math.trunc(x)
    return int(t + (1 if x - t >= 0.5 else 0))


def topology_normalizing_weight(size: int) -> float:
    return math.log(size + 2)


class ScoreState:
    __slots__ = (
        "constraints",
        "dom_counts",
        "doms",
        "host_counts",
        "ids",
        "ignored",
        "ignored_names",
        "infos",
        "namespace",
        "weights",
    )

    def __init__(self, constraints: list[Constraint], namespace: str) -> None:
        self.constraints = constraints
        self.namespace = namespace
        self.ignored: BOOL = np.zeros(0, dtype=bool)
        """Aligned with PreScore's node list: nodes missing a required topology key."""
        self.ignored_names: set[str] = set()
        self.weights: list[float] = []
        self.dom_counts: list[I64 | None] = []
        """Per constraint (not hostname): matching pods per domain id."""
        self.host_counts: list[I64 | None] = []
        """Per hostname constraint: matching pods per node of ``infos``."""
        self.doms: list[Domains] = []
        self.ids: list[I64] = []
        self.infos: Sequence[NodeInfo] = ()

    def score_node(self, ni: NodeInfo) -> int:
        node = ni.node
        if node is None or ni.name in self.ignored_names:
            return 0
        total = 0.0
        for i, c in enumerate(self.constraints):
            v = node.labels.get(c.key)
            if v is None:
                continue
            dc = self.dom_counts[i]
            if dc is None:
                cnt = count_matching(ni, c.selector, self.namespace)
            else:
                d = self.doms[i].ids.get(v)
                cnt = int(dc[d]) if d is not None and d < len(dc) else 0
            total += float(cnt) * self.weights[i] + float(c.max_skew - 1)
        return go_round(total)

    def score_rows(self, rows: npt.NDArray[np.intp]) -> I64:
        total = np.zeros(len(rows), dtype=np.float64)
        for i, c in enumerate(self.constraints):
            ids = self.ids[i][rows]
            has = ids >= 0
            dc = self.dom_counts[i]
            if dc is None:
                hc = self.host_counts[i]
                assert hc is not None
                cnt = hc[rows]
            else:
                cnt = dc[np.maximum(ids, 0)] if len(dc) else np.zeros(len(rows), np.int64)
            part = cnt.astype(np.float64) * self.weights[i] + float(c.max_skew - 1)
            total = total + np.where(has, part, 0.0)
        t = np.trunc(total)
        out = (t + (total - t >= 0.5)).astype(np.int64)
        out[self._ignored_rows(rows)] = 0
        return out

    def _ignored_rows(self, rows: npt.NDArray[np.intp]) -> BOOL:
        if not self.ignored_names:
            return np.zeros(len(rows), dtype=bool)
        infos = self.infos
        return np.fromiter(
            (infos[int(r)].name in self.ignored_names for r in rows), dtype=bool, count=len(rows)
        )


def _rows_of(nodes: Sequence[NodeInfo], infos: Sequence[NodeInfo]) -> npt.NDArray[np.intp]:
    n = len(infos)
    idx = np.fromiter((ni.index for ni in nodes), dtype=np.intp, count=len(nodes))
    if all(0 <= int(r) < n and infos[int(r)] is ni for r, ni in zip(idx, nodes, strict=True)):
        return idx
    by_name = {ni.name: i for i, ni in enumerate(infos)}
    return np.array([by_name.get(ni.name, -1) for ni in nodes], dtype=np.intp)


def build_score_state(
    pod: Pod,
    constraints: list[Constraint],
    nodes: Sequence[NodeInfo],
    all_infos: Sequence[NodeInfo],
    rows: Rows,
    *,
    require_all: bool,
) -> ScoreState:
    """kube's initPreScoreState + PreScore counting, over memoised per-node columns."""
    rows.sync(all_infos)
    n = len(all_infos)
    s = ScoreState(constraints, pod.namespace)
    s.infos = all_infos
    frows = _rows_of(nodes, all_infos)
    ids_by_key = {c.key: rows.domain_ids(c.key) for c in constraints}
    has_all = np.ones(n, dtype=bool)
    if require_all:
        for ids in ids_by_key.values():
            has_all &= ids >= 0
    known = frows >= 0
    f_has = np.zeros(len(nodes), dtype=bool)
    f_has[known] = has_all[frows[known]]
    if require_all:
        # A feasible node outside the list is judged by its own labels.
        for j in np.flatnonzero(~known).tolist():
            node = nodes[j].node
            f_has[j] = node is not None and all(c.key in node.labels for c in constraints)
        s.ignored = ~f_has
    else:
        s.ignored = np.zeros(len(nodes), dtype=bool)
    s.ignored_names = {nodes[j].name for j in np.flatnonzero(s.ignored).tolist()}
    kept = frows[known & ~s.ignored]
    affinity = RequiredNodeAffinity.of_pod(pod)
    for c in constraints:
        ids = ids_by_key[c.key]
        doms = rows.domains[c.key]
        s.doms.append(doms)
        s.ids.append(ids)
        cnt = rows.pod_counts(pod.namespace, c.selector_key, c.selector)
        if c.key == HOSTNAME:
            s.weights.append(topology_normalizing_weight(len(nodes) - len(s.ignored_names)))
            s.dom_counts.append(None)
            s.host_counts.append(cnt)
            continue
        # Without required keys a node lacking the label counts in the "" domain.
        eff = ids if require_all else np.where(ids >= 0, ids, doms.id_of(""))
        v = len(doms.values)
        in_set = np.zeros(v, dtype=bool)
        in_set[eff[kept]] = True
        s.weights.append(topology_normalizing_weight(int(in_set.sum())))
        elig = inclusion_mask(c, pod, affinity, rows, has_all)
        sums = np.bincount(eff[elig], weights=cnt[elig], minlength=v).astype(np.int64)
        s.dom_counts.append(np.where(in_set, sums, 0))
        s.host_counts.append(None)
    return s


def normalize(s: ScoreState, scores: I64) -> None:
    """kube's NormalizeScore, in place; ``scores`` aligned with PreScore's node list."""
    if scores.size == 0:
        return
    ignored = s.ignored if len(s.ignored) == len(scores) else np.zeros(len(scores), dtype=bool)
    valid = scores[~ignored]
    if valid.size == 0:
        scores[:] = 0
        return
    lo, hi = int(valid.min()), int(valid.max())
    if hi == 0:
        out = np.full(len(scores), MAX_NODE_SCORE, dtype=np.int64)
    else:
        out = MAX_NODE_SCORE * (hi + lo - scores) // hi
    out[ignored] = 0
    scores[:] = out
