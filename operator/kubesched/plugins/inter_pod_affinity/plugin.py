"""InterPodAffinity (kube-scheduler v1.37 semantics, with InterPodAffinityHostnameFastPath
off as by default).

PreFilter counts, per topology pair ``(topologyKey, value)``:

- existing pods' required anti-affinity terms that match the incoming pod (symmetry),
  over the nodes that hold pods with required anti-affinity only;
- existing pods matching *all* of the incoming pod's required affinity terms, and
  existing pods matching each of its required anti-affinity terms, over every pod.

It returns Skip when the pod has no required terms and no existing term matches it.
AddPod/RemovePod keep the counts right for nominated pods and preemption.

Filter, in this order, with kube's reasons and codes:

- ``node(s) didn't match pod affinity rules`` (UnschedulableAndUnresolvable): the node
  lacks a term's topology key, or some term has no matching pod in the node's domain.
  Exception: when no pod in the cluster matches the terms and the pod matches its own
  terms, any node with all the keys passes (the first pod of a group may land).
- ``node(s) didn't match pod anti-affinity rules`` (Unschedulable).
- ``node(s) didn't satisfy existing pods anti-affinity rules`` (Unschedulable).

PreScore sums, per topology pair, the incoming pod's preferred affinity weights (plus)
and anti-affinity weights (minus) for matching existing pods; and, for existing pods
whose terms match the incoming pod, their required affinity terms times
``hardPodAffinityWeight`` and their preferred affinity (plus) / anti-affinity (minus)
weights. Without preferred terms of its own, only pods with affinity are visited; with
``ignorePreferredTermsOfExistingPods`` such a pod skips scoring. Score is the sum over
the node's labels; NormalizeScore maps min..max to 0..100 with kube's float arithmetic
(``int64(100 * float64(s - min) / float64(max - min))``, all 0 when max == min).

Namespaces: an empty list without a selector means the owner pod's namespace;
``namespaceSelector: {}`` means all namespaces. The incoming pod's selectors are
unrolled into names from the Namespace objects in the store; existing pods' selectors
are matched against the incoming pod's namespace labels.

Deliberate differences:

- The per-cycle counts are the same sums kube computes, kept incrementally per node
  (recomputed only for nodes whose NodeInfo generation moved since the last cycle with
  equal terms), and Filter/Score run vectorised over the snapshot.
- ``matchLabelKeys``/``mismatchLabelKeys`` are merged into the selector here (kube-
  apiserver does it at admission; pods in the simulator never pass an apiserver).
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any, cast

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import (
    MAX_NODE_SCORE,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    Handle,
    PreFilterResult,
)
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.status import Status
from kubesched.framework.types import Node, ObjectError, Pod
from kubesched.plugins.inter_pod_affinity.terms import (
    AffinityTerm,
    Contribution,
    PodTerms,
    RowMemo,
    TermCache,
    TopologyColumns,
    WeightedTerm,
    generations,
    match_all,
)

if TYPE_CHECKING:
    import numpy.typing as npt

    from kubesched.framework.snapshot import Snapshot

__all__ = [
    "ERR_REASON_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH",
    "ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH",
    "NAME",
    "Args",
    "InterPodAffinity",
    "new",
]

NAME = "InterPodAffinity"
PRE_FILTER_STATE_KEY = "PreFilter" + NAME
PRE_SCORE_STATE_KEY = "PreScore" + NAME
_GENS_KEY = NAME + "/generations"

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = (
    "node(s) didn't satisfy existing pods anti-affinity rules"
)
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

Pair = tuple[str, str]
Counts = dict[Pair, int]
_MAX_MEMOS = 16


class Args(BaseModel):
    """kube-scheduler's ``InterPodAffinityArgs``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

    hard_pod_affinity_weight: int = Field(default=1, ge=0, le=100, alias="hardPodAffinityWeight")
    """Score weight of an existing pod's *required* affinity term that the incoming pod
    matches (kube's default 1; valid 0..100)."""
    ignore_preferred_terms_of_existing_pods: bool = Field(
        default=False, alias="ignorePreferredTermsOfExistingPods"
    )
    """Skip scoring for pods without preferred (anti-)affinity of their own, ignoring
    existing pods' terms (kube's default false)."""


class PreFilterState:
    __slots__ = (
        "affinity_counts",
        "anti_affinity_counts",
        "existing_anti_counts",
        "namespace_labels",
        "pod",
        "required_affinity",
        "required_anti",
        "self_match",
    )

    def __init__(
        self,
        pod: Pod,
        required_affinity: tuple[AffinityTerm, ...],
        required_anti: tuple[AffinityTerm, ...],
        namespace_labels: Mapping[str, str],
        existing_anti_counts: Counts,
        affinity_counts: Counts,
        anti_affinity_counts: Counts,
    ) -> None:
        self.pod = pod
        self.required_affinity = required_affinity
        self.required_anti = required_anti
        self.namespace_labels = namespace_labels
        self.existing_anti_counts = existing_anti_counts
        self.affinity_counts = affinity_counts
        self.anti_affinity_counts = anti_affinity_counts
        self.self_match = match_all(required_affinity, pod)

    def clone(self) -> PreFilterState:
        c = object.__new__(PreFilterState)
        for slot in PreFilterState.__slots__:
            object.__setattr__(c, slot, getattr(self, slot))
        c.existing_anti_counts = dict(self.existing_anti_counts)
        c.affinity_counts = dict(self.affinity_counts)
        c.anti_affinity_counts = dict(self.anti_affinity_counts)
        return c

    def update_with_pod(self, other: Pod, other_terms: PodTerms, node: Node, sign: int) -> None:
        labels = node.labels
        for t in other_terms.required_anti:
            if t.matches(self.pod, self.namespace_labels):
                _bump(self.existing_anti_counts, labels, t.topology_key, sign)
        if match_all(self.required_affinity, other):
            for t in self.required_affinity:
                _bump(self.affinity_counts, labels, t.topology_key, sign)
        for t in self.required_anti:
            if t.matches(other, None):
                _bump(self.anti_affinity_counts, labels, t.topology_key, sign)


def _bump(counts: Counts, labels: Mapping[str, str], key: str, sign: int) -> None:
    v = labels.get(key)
    if v is None:
        return
    pair = (key, v)
    n = counts.get(pair, 0) + sign
    if n:
        counts[pair] = n
    else:
        counts.pop(pair, None)


class PreScoreState:
    __slots__ = ("topology_score",)

    def __init__(self, topology_score: dict[str, dict[str, int]]) -> None:
        self.topology_score = topology_score


def _satisfy_affinity(s: PreFilterState, labels: Mapping[str, str]) -> bool:
    pods_exist = True
    counts = s.affinity_counts
    for t in s.required_affinity:
        v = labels.get(t.topology_key)
        if v is None:
            return False
        if counts.get((t.topology_key, v), 0) <= 0:
            pods_exist = False
    return pods_exist or (not counts and s.self_match)


def _satisfy_anti_affinity(s: PreFilterState, labels: Mapping[str, str]) -> bool:
    counts = s.anti_affinity_counts
    if counts:
        for t in s.required_anti:
            v = labels.get(t.topology_key)
            if v is not None and counts.get((t.topology_key, v), 0) > 0:
                return False
    return True


def _satisfy_existing_anti_affinity(s: PreFilterState, labels: Mapping[str, str]) -> bool:
    counts = s.existing_anti_counts
    if counts:
        for item in labels.items():
            if counts.get(item, 0) > 0:
                return False
    return True


def _match_any(terms: Sequence[AffinityTerm], pod: Pod) -> bool:
    """The pod matches at least one term (namespace selectors as resolved terms)."""
    return any(t.matches(pod, None) for t in terms)


class InterPodAffinity:
    name = NAME

    def __init__(self, args: Args, handle: Handle) -> None:
        self.args = args
        self._handle = handle
        self._terms = TermCache()
        self._columns = TopologyColumns()
        self._memos: dict[Hashable, RowMemo] = {}

    # -- events -----------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.POD,
                    ActionType.ADD | ActionType.UPDATE_POD_LABEL | ActionType.DELETE,
                ),
                self._after_pod_change,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
                self._after_node_change,
            ),
        ]

    def _after_pod_change(self, pod: Pod, old: Pod | None, new: Pod | None) -> bool:
        """Queueing hint (kube-scheduler v1.37). The pod's own label update (TargetPod):
        always. Another pod must be placed or nominated; added, it may satisfy the
        affinity (one pod matching every term); relabelled, it may start to match the
        affinity or stop matching any anti-affinity term; deleted, it may have matched
        an anti-affinity term, or its own anti-affinity may have matched this pod."""
        if old is not None and new is not None and new.uid == pod.uid:
            return True
        if (new is not None and not (new.node_name or new.nominated_node_name)) or (
            old is not None and not (old.node_name or old.nominated_node_name)
        ):
            return False
        terms = self._terms.lenient(pod)
        aff, anti = terms.required_affinity, terms.required_anti
        if old is not None and new is not None:
            if not match_all(aff, old) and match_all(aff, new):
                return True
            return _match_any(anti, old) and not _match_any(anti, new)
        if new is not None:
            return match_all(aff, new)
        if old is None:
            return True
        if _match_any(anti, old):
            return True
        return _match_any(self._terms.lenient(old).required_anti, pod)

    def _after_node_change(self, pod: Pod, old: Node | None, new: Node | None) -> bool:
        """Queueing hint (kube's isSchedulableAfterNodeChange): a node that gains an
        affinity topology key (new, or added, or changed value), any new node when the
        pod has anti-affinity, or a node losing or changing an anti-affinity key."""
        if new is None:
            return True
        terms = self._terms.lenient(pod)
        for t in terms.required_affinity:
            key = t.topology_key
            if old is None:
                if key in new.labels:
                    return True
                continue
            if key in new.labels and old.labels.get(key) != new.labels[key]:
                return True
        for t in terms.required_anti:
            if old is None:
                return True
            key = t.topology_key
            if key in old.labels and (key not in new.labels or old.labels[key] != new.labels[key]):
                return True
        return False

    # -- helpers ----------------------------------------------------------------------------
    def _namespace_labels(self, namespace: str) -> Mapping[str, str]:
        ns = self._handle.store.get("Namespace", "", namespace)
        if ns is None:
            return {}
        labels = (ns.get("metadata") or {}).get("labels") or {}
        return dict(labels)

    def _resolve(self, terms: Sequence[AffinityTerm]) -> tuple[AffinityTerm, ...]:
        if all(t.ns_selector.is_empty() or t.ns_selector.nothing for t in terms):
            return tuple(terms)
        namespaces = list(self._handle.store.list("Namespace"))
        return tuple(t.resolve_namespaces(namespaces) for t in terms)

    def _memo(self, key: Hashable) -> RowMemo:
        m = self._memos.pop(key, None)
        if m is None:
            m = RowMemo()
            while len(self._memos) >= _MAX_MEMOS:
                del self._memos[next(iter(self._memos))]
        self._memos[key] = m  # most recently used last
        return m

    def _sum_rows(
        self, state: CycleState, key: Hashable, compute: Any, nodes: Sequence[NodeInfo]
    ) -> dict[Hashable, int]:
        """Totals of ``compute`` over ``nodes``: memoised when they are the snapshot's."""
        snap = self._handle.snapshot
        if nodes is snap.node_infos:
            infos = snap.node_infos
            g = state.get(_GENS_KEY)
            if g is None or g[0] is not infos:
                # Once per cycle: nothing changes within a cycle.
                g = (infos, generations(infos))
                state.write(_GENS_KEY, g)
            return self._memo(key).update(compute, infos, g[1])
        totals: dict[Hashable, int] = {}
        for ni in nodes:
            for k, v in compute(ni):
                totals[k] = totals.get(k, 0) + v
        return {k: v for k, v in totals.items() if v}

    # -- PreFilter --------------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        snap = self._handle.snapshot
        try:
            terms = self._terms.get(pod)
        except ObjectError as e:
            return None, Status.unresolvable(f"parsing pod: {e}", plugin=NAME)
        with_anti = snap.have_pods_with_required_anti_affinity()
        if not terms.required_affinity and not terms.required_anti and not with_anti:
            return None, Status.skip()
        aff = self._resolve(terms.required_affinity)
        anti = self._resolve(terms.required_anti)
        ns_labels = self._namespace_labels(pod.namespace)

        existing: Counts = {}
        if with_anti:
            existing = self._existing_anti_counts(state, pod, ns_labels, snap)
        if not existing and not aff and not anti:
            return None, Status.skip()
        affinity_counts: Counts = {}
        anti_counts: Counts = {}
        if aff or anti:
            affinity_counts, anti_counts = self._incoming_counts(state, aff, anti, nodes)
        state.write(
            PRE_FILTER_STATE_KEY,
            PreFilterState(pod, aff, anti, ns_labels, existing, affinity_counts, anti_counts),
        )
        return None, None

    def _existing_anti_counts(
        self, state: CycleState, pod: Pod, ns_labels: Mapping[str, str], snap: Snapshot
    ) -> Counts:
        terms_of = self._terms.lenient
        memo: dict[int, bool] = {}

        def compute(ni: NodeInfo) -> Contribution:
            if not ni.pods_with_required_anti_affinity or ni.node is None:
                return []
            labels = ni.node.labels
            out: Contribution = []
            for p in ni.pods_with_required_anti_affinity:
                for t in terms_of(p).required_anti:
                    hit = memo.get(id(t))
                    if hit is None:
                        hit = memo[id(t)] = t.matches(pod, ns_labels)
                    if hit:
                        v = labels.get(t.topology_key)
                        if v is not None:
                            out.append(((t.topology_key, v), 1))
            return out

        key = (
            "existing-anti",
            pod.namespace,
            frozenset(pod.labels.items()),
            frozenset(ns_labels.items()),
        )
        totals = self._sum_rows(state, key, compute, snap.node_infos)
        return dict(totals)  # type: ignore[arg-type]

    def _incoming_counts(
        self,
        state: CycleState,
        aff: tuple[AffinityTerm, ...],
        anti: tuple[AffinityTerm, ...],
        nodes: Sequence[NodeInfo],
    ) -> tuple[Counts, Counts]:
        def compute_affinity(ni: NodeInfo) -> Contribution:
            node = ni.node
            if not ni.pods or node is None:
                return []
            labels = node.labels
            out: Contribution = []
            for p in ni.pods:
                if match_all(aff, p):
                    for t in aff:
                        v = labels.get(t.topology_key)
                        if v is not None:
                            out.append(((t.topology_key, v), 1))
            return out

        def compute_anti(ni: NodeInfo) -> Contribution:
            node = ni.node
            if not ni.pods or node is None:
                return []
            labels = node.labels
            out: Contribution = []
            for p in ni.pods:
                for t in anti:
                    if t.matches(p, None):
                        v = labels.get(t.topology_key)
                        if v is not None:
                            out.append(((t.topology_key, v), 1))
            return out

        affinity: Counts = {}
        anti_counts: Counts = {}
        if aff:
            key = ("affinity", tuple(t.key for t in aff))
            affinity = dict(self._sum_rows(state, key, compute_affinity, nodes))  # type: ignore[arg-type]
        if anti:
            key = ("anti", tuple(t.key for t in anti))
            anti_counts = dict(self._sum_rows(state, key, compute_anti, nodes))  # type: ignore[arg-type]
        return affinity, anti_counts

    def pre_filter_extensions(self) -> InterPodAffinity:
        return self

    def add_pod(
        self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo
    ) -> Status | None:
        return self._update(state, pod_to_add, node_info, 1)

    def remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo
    ) -> Status | None:
        return self._update(state, pod_to_remove, node_info, -1)

    def _update(self, state: CycleState, other: Pod, ni: NodeInfo, sign: int) -> Status | None:
        s: PreFilterState | None = state.get(PRE_FILTER_STATE_KEY)
        if s is None:
            return Status.as_error(f'error reading "{PRE_FILTER_STATE_KEY}" from cycleState')
        if ni.node is not None:
            s.update_with_pod(other, self._terms.lenient(other), ni.node, sign)
        return None

    # -- Filter -----------------------------------------------------------------------------
    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        s: PreFilterState | None = state.get(PRE_FILTER_STATE_KEY)
        if s is None:
            return Status.as_error(f'error reading "{PRE_FILTER_STATE_KEY}" from cycleState')
        node = node_info.node
        if node is None:
            return Status.as_error("node not found")
        labels = node.labels
        if not _satisfy_affinity(s, labels):
            return Status.unresolvable(ERR_REASON_AFFINITY_RULES_NOT_MATCH, plugin=NAME)
        if not _satisfy_anti_affinity(s, labels):
            return Status.unschedulable(ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH, plugin=NAME)
        if not _satisfy_existing_anti_affinity(s, labels):
            return Status.unschedulable(
                ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH, plugin=NAME
            )
        return None

    def filter_mask(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> npt.NDArray[np.bool_] | None:
        s: PreFilterState | None = state.get(PRE_FILTER_STATE_KEY)
        if s is None:
            return None
        n = len(snapshot)
        mask = np.ones(n, dtype=bool)
        if s.required_affinity:
            has_all = np.ones(n, dtype=bool)
            exist = np.ones(n, dtype=bool)
            for t in s.required_affinity:
                codes, ok = self._pair_rows(snapshot, t.topology_key, s.affinity_counts)
                has_all &= codes >= 0
                exist &= ok
            if not s.affinity_counts and s.self_match:
                mask &= has_all
            else:
                mask &= has_all & exist
        if s.anti_affinity_counts:
            for key in {t.topology_key for t in s.required_anti}:
                mask &= ~self._pair_rows(snapshot, key, s.anti_affinity_counts)[1]
        if s.existing_anti_counts:
            for key in {k for k, _ in s.existing_anti_counts}:
                mask &= ~self._pair_rows(snapshot, key, s.existing_anti_counts)[1]
        return mask

    def _pair_rows(
        self, snapshot: Snapshot, key: str, counts: Counts
    ) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.bool_]]:
        """The key's value codes per row, and the rows whose (key, value) count > 0."""
        codes, table = self._columns.column(snapshot, key)
        m = len(table)
        values = [v for (k, v), c in counts.items() if k == key and c > 0]
        # Unknown values land in slot m; rows without the label (-1) read slot m + 1.
        idx = np.fromiter(map(table.get, values, repeat(m)), dtype=np.int64, count=len(values))
        hit = np.zeros(m + 2, dtype=bool)
        hit[idx] = True
        hit[m] = False
        return codes, hit[codes]

    # -- Score ------------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        a = pod.affinity
        has_pref = bool(
            ((a.get("podAffinity") or {}).get("preferredDuringSchedulingIgnoredDuringExecution"))
            or (
                (a.get("podAntiAffinity") or {}).get(
                    "preferredDuringSchedulingIgnoredDuringExecution"
                )
            )
        )
        if self.args.ignore_preferred_terms_of_existing_pods and not has_pref:
            return Status.skip()
        snap = self._handle.snapshot
        if not has_pref and not snap.have_pods_with_affinity():
            return Status.skip()
        try:
            terms = self._terms.get(pod)
        except ObjectError as e:
            return Status.as_error(f"failed to parse pod: {e}", plugin=NAME)
        pref_aff = self._resolve_weighted(terms.preferred_affinity)
        pref_anti = self._resolve_weighted(terms.preferred_anti)
        ns_labels = self._namespace_labels(pod.namespace)
        hard_weight = self.args.hard_pod_affinity_weight
        terms_of = self._terms.lenient

        def compute(ni: NodeInfo) -> Contribution:
            node = ni.node
            if node is None or not node.labels:
                return []
            pods = ni.pods if has_pref else ni.pods_with_affinity
            if not pods:
                return []
            labels = node.labels
            out: Contribution = []

            def add(t: AffinityTerm, weight: int) -> None:
                v = labels.get(t.topology_key)
                if v is not None:
                    out.append(((t.topology_key, v), weight))

            for p in pods:
                for w in pref_aff:
                    if w.term.matches(p, None):
                        add(w.term, w.weight)
                for w in pref_anti:
                    if w.term.matches(p, None):
                        add(w.term, -w.weight)
                pt = terms_of(p)
                if hard_weight > 0:
                    for t in pt.required_affinity:
                        if t.matches(pod, ns_labels):
                            add(t, hard_weight)
                for w in pt.preferred_affinity:
                    if w.term.matches(pod, ns_labels):
                        add(w.term, w.weight)
                for w in pt.preferred_anti:
                    if w.term.matches(pod, ns_labels):
                        add(w.term, -w.weight)
            return out

        key = (
            "score",
            has_pref,
            hard_weight,
            pod.namespace,
            frozenset(pod.labels.items()),
            frozenset(ns_labels.items()),
            tuple((w.term.key, w.weight) for w in pref_aff),
            tuple((w.term.key, w.weight) for w in pref_anti),
        )
        totals = self._sum_rows(state, key, compute, snap.node_infos)
        if not totals:
            # kube skips when no term matched anywhere; when matches cancel out, every
            # node scores 0 after normalization either way.
            return Status.skip()
        topology_score: dict[str, dict[str, int]] = {}
        for pair, sc in totals.items():
            tk, tv = cast("Pair", pair)
            topology_score.setdefault(tk, {})[tv] = sc
        state.write(PRE_SCORE_STATE_KEY, PreScoreState(topology_score))
        return None

    def _resolve_weighted(self, terms: Sequence[WeightedTerm]) -> tuple[WeightedTerm, ...]:
        resolved = self._resolve([w.term for w in terms])
        return tuple(
            w if r is w.term else WeightedTerm(r, w.weight)
            for w, r in zip(terms, resolved, strict=True)
        )

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        s: PreScoreState | None = state.get(PRE_SCORE_STATE_KEY)
        if s is None:
            return 0, Status.as_error(f'failed to read "{PRE_SCORE_STATE_KEY}" from cycleState')
        node = node_info.node
        if node is None:
            return 0, Status.as_error("node not found")
        labels = node.labels
        total = 0
        for k, values in s.topology_score.items():
            v = labels.get(k)
            if v is not None:
                total += values.get(v, 0)
        return total, None

    def score_vector(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64] | None:
        s: PreScoreState | None = state.get(PRE_SCORE_STATE_KEY)
        if s is None:
            return None
        out = np.zeros(len(rows), dtype=np.int64)
        for k, values in s.topology_score.items():
            codes, table = self._columns.column(snapshot, k)
            lookup = np.zeros(len(table) + 1, dtype=np.int64)
            for v, sc in values.items():
                c = table.get(v)
                if c is not None:
                    lookup[c] = sc
            out += lookup[codes[rows]]
        return out

    def normalize_score(
        self, state: CycleState, pod: Pod, scores: npt.NDArray[np.int64]
    ) -> Status | None:
        s: PreScoreState | None = state.get(PRE_SCORE_STATE_KEY)
        if s is None or not s.topology_score or scores.size == 0:
            return None
        lo = int(scores.min())
        diff = int(scores.max()) - lo
        if diff <= 0:
            scores[:] = 0
            return None
        f = float(MAX_NODE_SCORE) * ((scores - lo).astype(np.float64) / float(diff))
        scores[:] = f.astype(np.int64)
        return None


def new(args: Args, handle: Handle) -> InterPodAffinity:
    return InterPodAffinity(args, handle)
