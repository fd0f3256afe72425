"""NodeName: a pod that names its node (``spec.nodeName``) fits only that node.

Since kube-scheduler v1.37 PreFilter also narrows the nodes Filter sees to the named
one, so the others are reported as ``node(s) didn't satisfy plugin(s) [NodeName]``
(UnschedulableAndUnresolvable, no preemption there) rather than by Filter's reason.
Filter's reason remains for a nominated-node check or a profile without PreFilter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from kubesched.framework.cycle_state import CycleState
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
from kubesched.framework.types import Pod

if TYPE_CHECKING:
    import numpy.typing as npt

    from kubesched.framework.snapshot import Snapshot

__all__ = ["ERR_REASON", "NAME", "NodeName", "new"]

NAME = "NodeName"

ERR_REASON = "node(s) didn't match the requested node name"


def fits(pod: Pod, node_info: NodeInfo) -> bool:
    return not pod.node_name or pod.node_name == node_info.name


class NodeName(PreFilterPlugin, FilterPlugin, VectorFilterPlugin, EnqueueExtensions):
    name = NAME
    filter_reads_node_only = True

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Only a new node can change the answer (kube-scheduler with queueing hints).
        return [ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD))]

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        if pod.node_name:
            return PreFilterResult({pod.node_name}), None
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if fits(pod, node_info):
            return None
        return Status.unresolvable(ERR_REASON, plugin=NAME)

    def filter_mask(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> npt.NDArray[np.bool_] | None:
        n = len(snapshot)
        if not pod.node_name:
            return np.ones(n, dtype=bool)
        mask = np.zeros(n, dtype=bool)
        ni = snapshot.get(pod.node_name)
        if ni is not None and 0 <= ni.index < n and snapshot.node_infos[ni.index] is ni:
            mask[ni.index] = True
        return mask


def new(args: NoArgs, handle: Handle) -> NodeName:
    return NodeName()
