"""NodeUnschedulable: cordoned nodes (``spec.unschedulable``) take no new pods, unless the
pod tolerates the ``node.kubernetes.io/unschedulable:NoSchedule`` taint."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.helpers import tolerations_tolerate_taint
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
    VectorFilterPlugin,
)
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.registry import NoArgs
from kubesched.framework.status import Status
from kubesched.framework.types import Node, Pod, Taint

if TYPE_CHECKING:
    import numpy.typing as npt

    from kubesched.framework.snapshot import Snapshot

__all__ = [
    "ERR_REASON_UNKNOWN_CONDITION",
    "ERR_REASON_UNSCHEDULABLE",
    "NAME",
    "TAINT_NODE_UNSCHEDULABLE",
    "NodeUnschedulable",
    "new",
]

NAME = "NodeUnschedulable"

ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
ERR_REASON_UNKNOWN_CONDITION = "node(s) had unknown conditions"

TAINT_NODE_UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
_UNSCHEDULABLE_TAINT = Taint(TAINT_NODE_UNSCHEDULABLE, "", "NoSchedule")


def tolerates_unschedulable(pod: Pod) -> bool:
    return tolerations_tolerate_taint(pod.tolerations, _UNSCHEDULABLE_TAINT)


class NodeUnschedulable(PreFilterPlugin, FilterPlugin, VectorFilterPlugin, EnqueueExtensions):
    name = NAME
    filter_reads_node_only = True

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_TAINT),
                _after_node_change,
            ),
            # kube registers the pod's own update (TargetPod); the hint ignores others.
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.UPDATE_POD_TOLERATIONS),
                _after_pod_toleration_change,
            ),
        ]

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
            return Status.unresolvable(ERR_REASON_UNKNOWN_CONDITION, plugin=NAME)
        if not node.unschedulable or tolerates_unschedulable(pod):
            return None
        return Status.unresolvable(ERR_REASON_UNSCHEDULABLE, plugin=NAME)

    def filter_mask(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> npt.NDArray[np.bool_] | None:
        if tolerates_unschedulable(pod):
            return np.ones(len(snapshot), dtype=bool)
        return ~snapshot.unschedulable


def _after_node_change(pod: Pod, old: object, new: object) -> bool:
    """Queueing hint (kube's): a node added schedulable, or uncordoned."""
    if not isinstance(new, Node):
        return True
    if isinstance(old, Node):
        return old.unschedulable and not new.unschedulable
    return not new.unschedulable


def _after_pod_toleration_change(pod: Pod, old: object, new: object) -> bool:
    """Queueing hint (kube's): the pod itself now tolerates the unschedulable taint."""
    if not isinstance(new, Pod):
        return True
    return new.uid == pod.uid and tolerates_unschedulable(new)


def new(args: NoArgs, handle: Handle) -> NodeUnschedulable:
    return NodeUnschedulable()
