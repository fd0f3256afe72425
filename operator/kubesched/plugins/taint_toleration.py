"""TaintToleration: a pod lands only on nodes whose NoSchedule/NoExecute taints it
tolerates, and prefers nodes with fewer PreferNoSchedule taints it does not tolerate.

kube-scheduler's default profile gives this plugin's score weight 3 (the weight belongs
to the profile, not to the plugin).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from kubesched.framework.cycle_state import CycleState, StateKey
from kubesched.framework.helpers import (
    DO_NOT_SCHEDULE_EFFECTS,
    default_normalize_score,
    find_matching_untolerated_taint,
    tolerations_tolerate_taint,
)
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
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.registry import NoArgs
from kubesched.framework.status import Status
from kubesched.framework.types import Node, Pod, Taint, Toleration

if TYPE_CHECKING:
    from collections.abc import Sequence

    import numpy.typing as npt

    from kubesched.framework.snapshot import Snapshot

__all__ = ["NAME", "UNTOLERATED", "TaintToleration", "new"]

NAME = "TaintToleration"

PRE_SCORE_STATE_KEY: StateKey[list[Toleration]] = StateKey("PreScore" + NAME)

PREFER_NO_SCHEDULE = "PreferNoSchedule"


UNTOLERATED = "node(s) had untolerated taint(s)"
"""kube-scheduler's Filter reason. Since kubernetes#134740 (1.35, and 1.34.2 on) it names
no taint: a pod's status is readable by whoever can read the pod, a node's taints not."""


def _hard(taint: Taint) -> bool:
    return taint.effect in DO_NOT_SCHEDULE_EFFECTS


def prefer_no_schedule_tolerations(tolerations: Sequence[Toleration]) -> list[Toleration]:
    """Tolerations that can match a PreferNoSchedule taint (that effect, or any effect)."""
    return [t for t in tolerations if not t.effect or t.effect == PREFER_NO_SCHEDULE]


def count_intolerable_prefer_no_schedule(
    taints: Sequence[Taint], tolerations: Sequence[Toleration]
) -> int:
    return sum(
        1
        for t in taints
        if t.effect == PREFER_NO_SCHEDULE and not tolerations_tolerate_taint(tolerations, t)
    )


class TaintToleration(
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

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                _after_node_change,
            ),
            # kube registers the pod's own update (TargetPod): any toleration change of it.
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_TOLERATIONS),
                _after_own_update,
            ),
        ]

    # -- Filter ---------------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        # kube-scheduler v1.37 has a PreFilter here that only skips pods with a deferred
        # resize (alpha gate InPlacePodVerticalScalingSchedulerPreemption, off by default).
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        node = node_info.node
        if node is None:
            return Status.as_error("invalid nodeInfo", plugin=NAME)
        taint = find_matching_untolerated_taint(node.taints, pod.tolerations, _hard)
        if taint is None:
            return None
        return Status.unresolvable(UNTOLERATED, plugin=NAME)

    def filter_mask(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> npt.NDArray[np.bool_] | None:
        if not pod.tolerations:
            return ~snapshot.hard_taints
        mask = np.ones(len(snapshot), dtype=bool)
        tolerations = pod.tolerations
        infos = snapshot.node_infos
        for i in np.flatnonzero(snapshot.hard_taints).tolist():
            node = infos[i].node
            assert node is not None
            if find_matching_untolerated_taint(node.taints, tolerations, _hard) is not None:
                mask[i] = False
        return mask

    # -- Score ----------------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        state.write(PRE_SCORE_STATE_KEY, prefer_no_schedule_tolerations(pod.tolerations))
        return None

    def _tolerations(self, state: CycleState, pod: Pod) -> list[Toleration]:
        tolerations: list[Toleration] | None = state.get(PRE_SCORE_STATE_KEY)
        if tolerations is None:
            tolerations = prefer_no_schedule_tolerations(pod.tolerations)
        return tolerations

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        """The number of PreferNoSchedule taints the pod does not tolerate (lower is better;
        NormalizeScore reverses)."""
        node = node_info.node
        if node is None:
            return 0, Status.as_error("invalid nodeInfo", plugin=NAME)
        return count_intolerable_prefer_no_schedule(
            node.taints, self._tolerations(state, pod)
        ), None

    def score_vector(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64] | None:
        out = np.zeros(len(rows), dtype=np.int64)
        tolerations = self._tolerations(state, pod)
        infos = snapshot.node_infos
        for j in np.flatnonzero(snapshot.soft_taints[rows]).tolist():
            node = infos[int(rows[j])].node
            assert node is not None
            out[j] = count_intolerable_prefer_no_schedule(node.taints, tolerations)
        return out

    def normalize_score(
        self, state: CycleState, pod: Pod, scores: npt.NDArray[np.int64]
    ) -> Status | None:
        default_normalize_score(MAX_NODE_SCORE, True, scores)
        return None


def _after_node_change(pod: Pod, old: object, new: object) -> bool:
    """Queueing hint (kube's): the node had a NoSchedule/NoExecute taint the pod does
    not tolerate (or is new) and now has none."""
    if not isinstance(new, Node):
        return True
    was_untolerated = True
    if isinstance(old, Node):
        was_untolerated = (
            find_matching_untolerated_taint(old.taints, pod.tolerations, _hard) is not None
        )
    is_untolerated = find_matching_untolerated_taint(new.taints, pod.tolerations, _hard) is not None
    return was_untolerated and not is_untolerated


def _after_own_update(pod: Pod, old: object, new: object) -> bool:
    return not isinstance(new, Pod) or new.uid == pod.uid


def new(args: NoArgs, handle: Handle) -> TaintToleration:
    return TaintToleration()
