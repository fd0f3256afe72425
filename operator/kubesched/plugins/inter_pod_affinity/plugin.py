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

- The per-cycle counts are the same sums kube computes, read from per-topology-domain
  counts kept across cycles (:mod:`.index`: per label class of pods and per distinct
  term of existing pods, following the snapshot's pod journal), so a cycle costs the
  label classes, terms and domains, not pods x nodes; Filter/Score run vectorised over
  the snapshot.
- ``matchLabelKeys``/``mismatchLabelKeys`` are merged into the selector here (kube-
  apiserver does it at admission; pods in the simulator never pass an apiserver).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import repeat
from typing import TYPE_CHECKING

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from kubesched.framework.cycle_state import CycleState, StateKey
from kubesched.framework.interface import (
    MAX_NODE_SCORE,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    EventResource,
    FilterPlugin,
    Handle,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
    VectorFilterPlugin,
    VectorScorePlugin,
)
from kubesched.framework.nodeinfo import NodeInfo, PodJournal
from kubesched.framework.status import Status
from kubesched.framework.types import Node, ObjectError, Pod
from kubesched.plugins.inter_pod_affinity.index import AffinityIndex, Counts
from kubesched.plugins.inter_pod_affinity.terms import (
    AffinityTerm,
    PodTerms,
    TermCache,
    TopologyColumns,
    WeightedTerm,
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
PRE_FILTER_STATE_KEY: StateKey[PreFilterState] = StateKey("PreFilter" + NAME)
PRE_SCORE_STATE_KEY: StateKey[PreScoreState] = StateKey("PreScore" + NAME)

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = (
    "node(s) didn't satisfy existing pods anti-affinity rules"
)
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

_MAX_INDEXES = 4
"""Snapshots followed at once (the cache's, and a copy gang preemption works on)."""


class Args(BaseModel):
    """kube-scheduler's ``InterPodAffinityArgs``."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

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


class InterPodAffinity(
    PreFilterPlugin,
    FilterPlugin,
    VectorFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    VectorScorePlugin,
    EnqueueExtensions,
):
    name = NAME

    def __init__(self, args: Args, handle: Handle) -> None:
        self.args = args
        self._handle = handle
        self._terms = TermCache()
        self._columns = TopologyColumns()
        self._indexes: dict[int, tuple[PodJournal, AffinityIndex]] = {}

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

    def _after_pod_change(self, pod: Pod, old_obj: object, new_obj: object) -> bool:
        """Queueing hint (kube-scheduler v1.37). The pod's own label update (TargetPod):
        always. Another pod must be placed or nominated; added, it may satisfy the
        affinity (one pod matching every term); relabelled, it may start to match the
        affinity or stop matching any anti-affinity term; deleted, it may have matched
        an anti-affinity term, or its own anti-affinity may have matched this pod."""
        old = old_obj if isinstance(old_obj, Pod) else None
        new = new_obj if isinstance(new_obj, Pod) else None
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

    def _after_node_change(self, pod: Pod, old_obj: object, new_obj: object) -> bool:
        """Queueing hint (kube's isSchedulableAfterNodeChange): a node that gains an
        affinity topology key (new, or added, or changed value), any new node when the
        pod has anti-affinity, or a node losing or changing an anti-affinity key."""
        old = old_obj if isinstance(old_obj, Node) else None
        new = new_obj if isinstance(new_obj, Node) else None
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

    def _index(self, snap: Snapshot) -> AffinityIndex:
        """The counts over the snapshot's pods, kept across cycles."""
        j = snap.journal
        hit = self._indexes.pop(id(j), None)
        if hit is None or hit[0] is not j:
            hit = (j, AffinityIndex(self._terms.lenient))
            while len(self._indexes) >= _MAX_INDEXES:
                del self._indexes[next(iter(self._indexes))]
        self._indexes[id(j)] = hit  # most recently used last
        hit[1].sync(snap)
        return hit[1]

    # -- PreFilter --------------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        snap = self._handle.snapshot
        try:
            terms = self._terms.get(pod)
        except ObjectError as e:
            return None, Status.unresolvable(f"parsing pod: {e}", plugin=NAME)
        no_own_terms = not terms.required_affinity and not terms.required_anti
        if no_own_terms and not snap.any_pods_with_required_anti_affinity():
            # no term on either side (the index, which counts only the snapshot's pods,
            # would hold none either): no catching up its counts for this pod
            return None, Status.skip()
        index = self._index(snap)
        with_anti = index.has_required_anti()
        if no_own_terms and not with_anti:
            # the snapshot's anti-affinity terms are all ones the index leaves out
            # (they do not compile)
            return None, Status.skip()
        aff = self._resolve(terms.required_affinity)
        anti = self._resolve(terms.required_anti)
        ns_labels = self._namespace_labels(pod.namespace)

        existing: Counts = {}
        if with_anti:
            existing = index.existing_anti_counts(pod, ns_labels)
        if not existing and not aff and not anti:
            return None, Status.skip()
        if (aff or anti) and nodes is not snap.node_infos:
            # Another node list than the snapshot's (explain): count over it.
            index = AffinityIndex.from_nodes(nodes, self._terms.lenient)
        state.write(
            PRE_FILTER_STATE_KEY,
            PreFilterState(
                pod,
                aff,
                anti,
                ns_labels,
                existing,
                index.affinity_counts(aff),
                index.anti_affinity_counts(anti),
            ),
        )
        return None, None

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
        if not has_pref and not snap.any_pods_with_affinity():
            return Status.skip()  # as below, without catching the index up first
        index = self._index(snap)
        if not has_pref and not index.has_terms():
            return Status.skip()
        try:
            terms = self._terms.get(pod)
        except ObjectError as e:
            return Status.as_error(f"failed to parse pod: {e}", plugin=NAME)
        totals = index.score_counts(
            pod,
            self._namespace_labels(pod.namespace),
            self._resolve_weighted(terms.preferred_affinity),
            self._resolve_weighted(terms.preferred_anti),
            self.args.hard_pod_affinity_weight,
        )
        if not totals:
            # kube skips when no term matched anywhere; when matches cancel out, every
            # node scores 0 after normalization either way.
            return Status.skip()
        topology_score: dict[str, dict[str, int]] = {}
        for (tk, tv), sc in totals.items():
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
