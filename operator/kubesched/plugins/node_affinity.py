"""NodeAffinity: a pod lands only on nodes matching its ``nodeSelector`` and its required
node affinity (and the profile's ``addedAffinity``), and prefers nodes matching its
preferred terms.

kube-scheduler semantics kept:

- PreFilter returns Skip when the pod has no nodeSelector, no required node affinity
  and the plugin has no ``addedAffinity.required...``. When every required term names
  nodes with ``matchFields`` ``metadata.name In``, PreFilter narrows Filter to those
  nodes (the union over terms of each term's intersection); if that set is empty the pod
  is ``UnschedulableAndUnresolvable`` with ``pod affinity terms conflict``.
- Filter rejects (UnschedulableAndUnresolvable) with
  ``node(s) didn't match scheduler-enforced node affinity`` when ``addedAffinity``'s
  required selector does not match, else ``node(s) didn't match Pod's node
  affinity/selector``. A required term that fails to parse matches no node (kube ignores
  parse errors there); an empty term matches nothing; terms are ORed.
- Score sums the weights of the matching preferred terms (the pod's and
  ``addedAffinity``'s; weight-0 and empty terms are dropped), NormalizeScore scales the
  highest to 100 (``DefaultNormalizeScore``, not reversed). A preferred term that fails
  to parse is an error in PreScore. kube-scheduler's default weight is 2.
- Requeue on Node Add / label update, when the node now matches and did not before.

Performance: Filter and Score are pure functions of node labels. For each distinct
compiled selector (identical pods of a workload share one) the per-node match mask and
the per-node preferred score are memoised against ``Snapshot.labels_version``, so a
workload re-matches the nodes only when node labels or the node set change.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, model_validator

from kubesched.api import field_docstrings
from kubesched.framework.cycle_state import CycleState, StateKey
from kubesched.framework.helpers import default_normalize_score
from kubesched.framework.interface import (
    MAX_NODE_SCORE,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    EventResource,
    FilterPlugin,
    Handle,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
    VectorFilterPlugin,
    VectorScorePlugin,
)
from kubesched.framework.labels import (
    NodeSelectorTerm,
    RequiredNodeAffinity,
    compile_node_selector_term,
    required_node_selector,
)
from kubesched.framework.memo import remember
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.status import Status
from kubesched.framework.types import Node, ObjectError, Pod

if TYPE_CHECKING:
    import numpy.typing as npt

    from kubesched.framework.snapshot import Snapshot

__all__ = [
    "ERR_REASON_CONFLICT",
    "ERR_REASON_ENFORCED",
    "ERR_REASON_POD",
    "NAME",
    "AddedAffinity",
    "Args",
    "NodeAffinity",
    "PreferredTerms",
    "new",
]

NAME = "NodeAffinity"

PRE_FILTER_STATE_KEY: StateKey[_PreFilterState] = StateKey("PreFilter" + NAME)
PRE_SCORE_STATE_KEY: StateKey[_PreScoreState] = StateKey("PreScore" + NAME)

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_ENFORCED = "node(s) didn't match scheduler-enforced node affinity"
ERR_REASON_CONFLICT = "pod affinity terms conflict"

_OBJECT_NAME_FIELD = "metadata.name"
_MEMO_LIMIT = 256
"""Distinct selectors memoised per labels version; beyond that the memo starts over."""


# -- compiled selectors ---------------------------------------------------------------------------
class PreferredTerms:
    """Weighted preferred terms; a node scores the sum of the weights it matches."""

    __slots__ = ("terms",)

    def __init__(self, terms: Sequence[tuple[NodeSelectorTerm, int]]) -> None:
        self.terms = tuple(terms)

    @classmethod
    def compile(cls, raw: Any, field: str) -> PreferredTerms:
        """Raises ObjectError on a term that does not parse."""
        if raw is None:
            return cls(())
        if not isinstance(raw, list):
            raise ObjectError(f"{field}: expected a list")
        out = []
        for i, t in enumerate(raw):
            if not isinstance(t, Mapping):
                raise ObjectError(f"{field}[{i}]: expected an object")
            weight = t.get("weight") or 0
            if not isinstance(weight, int):
                raise ObjectError(f"{field}[{i}].weight: must be an integer")
            pref = t.get("preference") or {}
            if weight == 0 or not (pref.get("matchExpressions") or pref.get("matchFields")):
                continue
            out.append((compile_node_selector_term(pref, f"{field}[{i}].preference"), weight))
        return cls(out)

    def score(self, labels: Mapping[str, str], name: str) -> int:
        return sum(w for t, w in self.terms if t.matches(labels, name))


def _node_affinity(pod: Pod) -> Mapping[str, Any]:
    na = pod.affinity.get("nodeAffinity")
    return na if isinstance(na, Mapping) else {}


def _preferred_raw(pod: Pod) -> Any:
    return _node_affinity(pod).get("preferredDuringSchedulingIgnoredDuringExecution")


def _name_narrowing(required: Any) -> set[str] | None:
    """Nodes named by ``matchFields`` metadata.name In in every term; None: no narrowing."""
    terms = required.get("nodeSelectorTerms") if isinstance(required, Mapping) else None
    if not terms:
        return None
    names: set[str] = set()
    for t in terms:
        term_names: set[str] | None = None
        for r in (t.get("matchFields") if isinstance(t, Mapping) else None) or ():
            if r.get("key") == _OBJECT_NAME_FIELD and r.get("operator") == "In":
                vals = set(r.get("values") or ())
                term_names = vals if term_names is None else term_names & vals
        if term_names is None:
            return None
        names |= term_names
    return names


# -- args ------------------------------------------------------------------------------------------
_MODEL_CONFIG = ConfigDict(
    extra="forbid",
    populate_by_name=True,
    use_attribute_docstrings=field_docstrings(),
    defer_build=True,
)


class AddedAffinity(BaseModel):
    """A ``v1.NodeAffinity`` every pod of the profile must also satisfy / prefer."""

    model_config = _MODEL_CONFIG

    required_during_scheduling_ignored_during_execution: dict[str, Any] | None = Field(
        default=None, alias="requiredDuringSchedulingIgnoredDuringExecution"
    )
    """A NodeSelector (``nodeSelectorTerms``, ORed) every node must match."""
    preferred_during_scheduling_ignored_during_execution: list[dict[str, Any]] = Field(
        default_factory=list, alias="preferredDuringSchedulingIgnoredDuringExecution"
    )
    """Weighted preferences (weight 1..100) added to every pod's score."""

    @model_validator(mode="after")
    def _compiles(self) -> AddedAffinity:
        req = self.required_during_scheduling_ignored_during_execution
        if req is not None:
            terms = req.get("nodeSelectorTerms")
            if not isinstance(terms, list) or not terms:
                raise ValueError(
                    "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: "
                    "must have at least one node selector term"
                )
            RequiredNodeAffinity.from_node_selector(
                req, "requiredDuringSchedulingIgnoredDuringExecution", strict=True
            )
        field = "preferredDuringSchedulingIgnoredDuringExecution"
        for i, t in enumerate(self.preferred_during_scheduling_ignored_during_execution):
            w = t.get("weight")
            if not isinstance(w, int) or not 1 <= w <= 100:
                raise ValueError(f"{field}[{i}].weight: must be in the range 1-100")
            compile_node_selector_term(t.get("preference") or {}, f"{field}[{i}].preference")
        return self


class Args(BaseModel):
    """NodeAffinityArgs."""

    model_config = _MODEL_CONFIG

    added_affinity: AddedAffinity | None = Field(default=None, alias="addedAffinity")
    """Node affinity applied to all pods of the profile on top of their own. Default:
    none."""


# -- the plugin -----------------------------------------------------------------------------------
class _PreFilterState:
    __slots__ = ("key", "required")

    def __init__(self, key: str, required: RequiredNodeAffinity) -> None:
        self.key = key
        self.required = required


class _PreScoreState:
    __slots__ = ("key", "preferred")

    def __init__(self, key: str, preferred: PreferredTerms) -> None:
        self.key = key
        self.preferred = preferred


class NodeAffinity(
    PreFilterPlugin,
    FilterPlugin,
    VectorFilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    VectorScorePlugin,
    EnqueueExtensions,
):
    name = NAME
    filter_reads_node_only = True

    def __init__(self, args: Args) -> None:
        self.added_required: RequiredNodeAffinity | None = None
        self.added_preferred: PreferredTerms | None = None
        added = args.added_affinity
        if added is not None:
            req = added.required_during_scheduling_ignored_during_execution
            if req is not None:
                self.added_required = RequiredNodeAffinity.from_node_selector(
                    req, "addedAffinity.requiredDuringSchedulingIgnoredDuringExecution", strict=True
                )
            prefs = added.preferred_during_scheduling_ignored_during_execution
            if prefs:
                self.added_preferred = PreferredTerms.compile(
                    prefs, "addedAffinity.preferredDuringSchedulingIgnoredDuringExecution"
                )
        self._compiled: dict[str, RequiredNodeAffinity] = {}
        self._compiled_pref: dict[str, PreferredTerms] = {}
        self._memo_version = -1
        self._masks: dict[str, npt.NDArray[np.bool_]] = {}
        self._scores: dict[str, npt.NDArray[np.int64]] = {}

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL),
                self._after_node_change,
            )
        ]

    def _after_node_change(self, pod: Pod, old: object, new: object) -> bool:
        """Queueing hint: the node matches now (and, on an update, did not before)."""
        if not isinstance(new, Node):
            return True
        if self.added_required is not None and not self.added_required.match_node(new):
            return False
        req = RequiredNodeAffinity.of_pod(pod)
        if not req.match_node(new):
            return False
        if not isinstance(old, Node):
            return True
        return not req.match_node(old)

    # -- memo ---------------------------------------------------------------------------------
    def _check_memo(self, snapshot: Snapshot) -> None:
        v = snapshot.labels_version
        if v != self._memo_version or len(self._masks) + len(self._scores) > _MEMO_LIMIT:
            self._memo_version = v
            self._masks = {}
            self._scores = {}

    def _mask(
        self, key: str, required: RequiredNodeAffinity, snapshot: Snapshot
    ) -> npt.NDArray[np.bool_]:
        self._check_memo(snapshot)
        mask = self._masks.get(key)
        if mask is None:
            infos = snapshot.node_infos
            match = required.matches
            mask = np.fromiter(
                (match(ni.node.labels, ni.name) if ni.node is not None else False for ni in infos),
                dtype=bool,
                count=len(infos),
            )
            mask.flags.writeable = False
            self._masks[key] = mask
        return mask

    # -- PreFilter / Filter --------------------------------------------------------------------
    def _required(self, pod: Pod) -> _PreFilterState:
        key = repr((pod.spec.get("nodeSelector"), required_node_selector(pod)))
        req = self._compiled.get(key)
        if req is None:
            req = remember(self._compiled, key, RequiredNodeAffinity.of_pod(pod), _MEMO_LIMIT)
        return _PreFilterState(key, req)

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        required = required_node_selector(pod)
        if required is None and self.added_required is None and not pod.node_selector:
            return None, Status.skip()
        state.write(PRE_FILTER_STATE_KEY, self._required(pod))
        names = _name_narrowing(required)
        if names is None:
            return None, None
        if not names:
            return None, Status.unresolvable(ERR_REASON_CONFLICT, plugin=NAME)
        return PreFilterResult(names), None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def _pre_filter_state(self, state: CycleState, pod: Pod) -> _PreFilterState:
        s: _PreFilterState | None = state.get(PRE_FILTER_STATE_KEY)
        return self._required(pod) if s is None else s

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        node = node_info.node
        if node is None:
            return Status.as_error("node not found", plugin=NAME)
        if self.added_required is not None and not self.added_required.match_node(node):
            return Status.unresolvable(ERR_REASON_ENFORCED, plugin=NAME)
        if not self._pre_filter_state(state, pod).required.match_node(node):
            return Status.unresolvable(ERR_REASON_POD, plugin=NAME)
        return None

    def filter_mask(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> npt.NDArray[np.bool_] | None:
        s = self._pre_filter_state(state, pod)
        mask = self._mask(s.key, s.required, snapshot)
        if self.added_required is not None:
            mask = mask & self._mask("\x00added", self.added_required, snapshot)
        return mask

    # -- PreScore / Score ------------------------------------------------------------------------
    def _preferred(self, pod: Pod) -> _PreScoreState | None:
        """None: nothing to score. Raises ObjectError for an unparsable term."""
        raw = _preferred_raw(pod)
        if raw is None and self.added_preferred is None:
            return None
        key = repr(raw)
        pref = self._compiled_pref.get(key)
        if pref is None:
            pref = PreferredTerms.compile(
                raw, "spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution"
            )
            remember(self._compiled_pref, key, pref, _MEMO_LIMIT)
        return _PreScoreState(key, pref)

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        try:
            s = self._preferred(pod)
        except ObjectError as e:
            return Status.as_error(e, plugin=NAME)
        if s is None:
            return Status.skip()
        state.write(PRE_SCORE_STATE_KEY, s)
        return None

    def _pre_score_state(self, state: CycleState, pod: Pod) -> _PreScoreState | None:
        s: _PreScoreState | None = state.get(PRE_SCORE_STATE_KEY)
        return self._preferred(pod) if s is None else s

    def _node_score(self, s: _PreScoreState | None, labels: Mapping[str, str], name: str) -> int:
        count = 0
        if self.added_preferred is not None:
            count += self.added_preferred.score(labels, name)
        if s is not None:
            count += s.preferred.score(labels, name)
        return count

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        node = node_info.node
        if node is None:
            return 0, Status.as_error("node not found", plugin=NAME)
        try:
            s = self._pre_score_state(state, pod)
        except ObjectError as e:
            return 0, Status.as_error(e, plugin=NAME)
        return self._node_score(s, node.labels, node.name), None

    def score_vector(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64] | None:
        s = self._pre_score_state(state, pod)
        key = "" if s is None else s.key
        self._check_memo(snapshot)
        scores = self._scores.get(key)
        if scores is None:
            infos = snapshot.node_infos
            scores = np.fromiter(
                (
                    self._node_score(s, ni.node.labels, ni.name) if ni.node is not None else 0
                    for ni in infos
                ),
                dtype=np.int64,
                count=len(infos),
            )
            scores.flags.writeable = False
            self._scores[key] = scores
        return scores[rows]

    def normalize_score(
        self, state: CycleState, pod: Pod, scores: npt.NDArray[np.int64]
    ) -> Status | None:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return None


def new(args: Args, handle: Handle) -> NodeAffinity:
    return NodeAffinity(args)
