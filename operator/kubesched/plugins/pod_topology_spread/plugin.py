"""The PodTopologySpread plugin object: extension points over the filtering and
scoring states, and the queueing hints."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from kubesched.framework.cycle_state import CycleState, StateKey
from kubesched.framework.interface import (
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
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.status import Status
from kubesched.framework.types import Node, ObjectError, Pod
from kubesched.plugins.pod_topology_spread.args import Args
from kubesched.plugins.pod_topology_spread.constraints import (
    DO_NOT_SCHEDULE,
    SCHEDULE_ANYWAY,
    Constraint,
    default_selector,
    node_has_keys,
    parse_constraints,
)
from kubesched.plugins.pod_topology_spread.filtering import (
    FilterState,
    build_filter_state,
    filter_rows,
)
from kubesched.plugins.pod_topology_spread.rows import Rows
from kubesched.plugins.pod_topology_spread.scoring import (
    ScoreState,
    build_score_state,
    normalize,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from kubesched.framework.snapshot import Snapshot

__all__ = [
    "ERR_REASON_CONSTRAINTS_NOT_MATCH",
    "ERR_REASON_NODE_LABEL_NOT_MATCH",
    "NAME",
    "PodTopologySpread",
]

NAME = "PodTopologySpread"
PRE_FILTER_STATE_KEY: StateKey[FilterState] = StateKey("PreFilter" + NAME)
PRE_SCORE_STATE_KEY: StateKey[ScoreState] = StateKey("PreScore" + NAME)

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

_FIELD = "spec.topologySpreadConstraints"


class PodTopologySpread(
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
        self.handle = handle
        self.default_constraints, self.system_defaulted = args.constraints()
        self.rows = Rows()
        self._defaults: dict[str, list[Constraint]] = {}
        """whenUnsatisfiable -> the default constraints parsed, when they do not depend on
        the pod (no matchLabelKeys): parsed once, not for every pod."""
        self._defaults_fixed = not any(c.get("matchLabelKeys") for c in self.default_constraints)

    # -- constraints ----------------------------------------------------------------------------
    def constraints(self, pod: Pod, action: str) -> list[Constraint]:
        """The pod's constraints for ``action``, or the default ones (with the selector of
        the pod's Services and controller) when the pod declares none."""
        raw = pod.spec.get("topologySpreadConstraints")
        if raw:
            return parse_constraints(raw, pod.labels, action, _FIELD)
        cs = self._defaults.get(action) if self._defaults_fixed else None
        if cs is None:
            cs = parse_constraints(
                self.default_constraints, pod.labels, action, "defaultConstraints"
            )
            if self._defaults_fixed:
                self._defaults[action] = cs
        if not cs:
            return []
        sel = default_selector(pod, _store(self.handle))
        if sel is None:
            return []
        return [
            Constraint(
                c.max_skew,
                c.key,
                sel,
                min_domains=c.min_domains,
                honor_affinity=c.honor_affinity,
                honor_taints=c.honor_taints,
            )
            for c in cs
        ]

    # -- PreFilter / Filter ---------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        try:
            cs = self.constraints(pod, DO_NOT_SCHEDULE)
        except ObjectError as e:
            return None, Status.as_error(f"obtaining pod's hard topology spread constraints: {e}")
        if not cs:
            return None, Status.skip()
        state.write(PRE_FILTER_STATE_KEY, build_filter_state(pod, cs, nodes, self.rows))
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def _filter_state(self, state: CycleState) -> FilterState | None:
        s: FilterState | None = state.get(PRE_FILTER_STATE_KEY)
        return s

    def add_pod(
        self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo
    ) -> Status | None:
        s = self._filter_state(state)
        if s is None:
            return Status.as_error(f"reading {PRE_FILTER_STATE_KEY!r} from cycleState: not found")
        s.update_with_pod(pod, pod_to_add, node_info.node, 1)
        return None

    def remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo
    ) -> Status | None:
        s = self._filter_state(state)
        if s is None:
            return Status.as_error(f"reading {PRE_FILTER_STATE_KEY!r} from cycleState: not found")
        s.update_with_pod(pod, pod_to_remove, node_info.node, -1)
        return None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        s = self._filter_state(state)
        if s is None:
            return Status.as_error(f"reading {PRE_FILTER_STATE_KEY!r} from cycleState: not found")
        node = node_info.node
        if node is None:
            return Status.as_error("node not found")
        labels = node.labels
        for i, c in enumerate(s.constraints):
            value = labels.get(c.key)
            if value is None:
                return Status.unresolvable(ERR_REASON_NODE_LABEL_NOT_MATCH, plugin=NAME)
            skew = s.match_num(i, value) + s.self_match[i] - s.min_match(i)
            if skew > c.max_skew:
                return Status.unschedulable(ERR_REASON_CONSTRAINTS_NOT_MATCH, plugin=NAME)
        return None

    def filter_mask(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> npt.NDArray[np.bool_] | None:
        s = self._filter_state(state)
        if s is None or s.infos is not snapshot.node_infos:
            return None
        return filter_rows(s)

    # -- PreScore / Score -----------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        all_infos = self.handle.snapshot.node_infos
        if not all_infos:
            return Status.skip()
        try:
            cs = self.constraints(pod, SCHEDULE_ANYWAY)
        except ObjectError as e:
            return Status.as_error(f"calculating preScoreState: {e}")
        if not cs:
            return Status.skip()
        # Only explicit or List constraints need every topology key on a node, so nodes
        # without a zone label still get hostname spreading from the system defaults.
        require_all = bool(pod.spec.get("topologySpreadConstraints")) or not self.system_defaulted
        s = build_score_state(pod, cs, nodes, all_infos, self.rows, require_all=require_all)
        state.write(PRE_SCORE_STATE_KEY, s)
        return None

    def _score_state(self, state: CycleState) -> ScoreState | None:
        s: ScoreState | None = state.get(PRE_SCORE_STATE_KEY)
        return s

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        s = self._score_state(state)
        if s is None:
            return 0, Status.as_error(f"reading {PRE_SCORE_STATE_KEY!r} from cycleState: not found")
        return s.score_node(node_info), None

    def score_vector(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64] | None:
        s = self._score_state(state)
        if s is None or s.infos is not snapshot.node_infos:
            return None
        return s.score_rows(rows)

    def normalize_score(
        self, state: CycleState, pod: Pod, scores: npt.NDArray[np.int64]
    ) -> Status | None:
        s = self._score_state(state)
        if s is None:
            return Status.as_error(f"reading {PRE_SCORE_STATE_KEY!r} from cycleState: not found")
        normalize(s, scores)
        return None

    # -- queueing -------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        pod_actions = (
            ActionType.ADD
            | ActionType.UPDATE_POD_LABEL
            | ActionType.UPDATE_POD_TOLERATIONS
            | ActionType.DELETE
        )
        node_actions = (
            ActionType.ADD
            | ActionType.DELETE
            | ActionType.UPDATE_NODE_LABEL
            | ActionType.UPDATE_NODE_TAINT
        )
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, pod_actions), self.after_pod_change
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, node_actions), self.after_node_change
            ),
        ]

    def after_pod_change(self, pod: Pod, old: Any, new: Any) -> bool:
        """Whether a pod's add/update/delete may make ``pod`` fit (kube-scheduler v1.37).

        The pod's own update (kube's TargetPod hint): a toleration change when a hard
        constraint honors taints, or a label change that (un)matches one of its
        selectors. Another pod (AssignedPod): it must be placed or nominated, in the
        pod's namespace, and (un)match one of the hard constraints' selectors."""
        old_p = old if isinstance(old, Pod) else None
        new_p = new if isinstance(new, Pod) else None
        cs = self.constraints(pod, DO_NOT_SCHEDULE)
        if new_p is not None and old_p is not None and new_p.uid == pod.uid:
            if new_p.spec.get("tolerations") != old_p.spec.get("tolerations") and any(
                c.honor_taints for c in cs
            ):
                return True
            return _label_change_matters(old_p, new_p, cs)

        def involved(p: Pod) -> bool:
            return bool(p.node_name or p.nominated_node_name) and p.namespace == pod.namespace

        if (new_p is not None and not involved(new_p)) or (
            old_p is not None and not involved(old_p)
        ):
            return False
        if new_p is not None and old_p is not None:
            return _label_change_matters(old_p, new_p, cs)
        p = new_p if new_p is not None else old_p
        return p is not None and any(c.selector.matches(p.labels) for c in cs)

    def after_node_change(self, pod: Pod, old: Any, new: Any) -> bool:
        """Whether a node's add/delete/label or taint update may make ``pod`` fit."""
        old_n = old if isinstance(old, Node) else None
        new_n = new if isinstance(new, Node) else None
        cs = self.constraints(pod, DO_NOT_SCHEDULE)
        old_ok = old_n is not None and node_has_keys(old_n.labels, cs)
        new_ok = new_n is not None and node_has_keys(new_n.labels, cs)
        if old_n is not None and new_n is not None:
            if old_ok != new_ok:
                return True
            return new_ok and (
                any(old_n.labels.get(c.key) != new_n.labels.get(c.key) for c in cs)
                or old_n.raw.get("spec", {}).get("taints")
                != new_n.raw.get("spec", {}).get("taints")
            )
        return new_ok if new_n is not None else old_ok


def _label_change_matters(old: Pod, new: Pod, cs: Sequence[Constraint]) -> bool:
    """A label update that makes the pod match or unmatch one of the selectors."""
    if new.labels == old.labels:
        return False
    return any(c.selector.matches(old.labels) != c.selector.matches(new.labels) for c in cs)


def _store(handle: Handle) -> Any:
    try:
        return handle.store
    except RuntimeError:  # a framework without an object store
        return None
