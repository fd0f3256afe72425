"""NodePorts: a pod's host ports must be free on the node.

A wanted ``(hostIP, protocol, hostPort)`` conflicts with a port in use on the node when
the protocol and port are equal and either IP is the wildcard ``0.0.0.0`` or the IPs
are equal (kube-scheduler's ``HostPortInfo.CheckConflict``; an empty hostIP means
``0.0.0.0`` and an empty protocol TCP). Host ports of regular containers and of
restartable (sidecar) init containers count, as in kube-scheduler's ``GetHostPorts``.

PreFilter returns Skip for a pod without host ports, so most pods never pay for this
plugin. Filter rejects with ``Unschedulable`` (removing pods could free the port, so
preemption may help). Deliberate difference: a node counts each port's users, so one
of two pods sharing a port leaving does not free it (kube's set forgets it at once).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

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
    VectorFilterPlugin,
)
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.registry import NoArgs
from kubesched.framework.status import Status
from kubesched.framework.types import Pod

if TYPE_CHECKING:
    import numpy.typing as npt

    from kubesched.framework.snapshot import Snapshot

__all__ = ["ERR_REASON", "NAME", "NodePorts", "fits_ports", "new"]

NAME = "NodePorts"

PRE_FILTER_STATE_KEY: StateKey[list[HostPort]] = StateKey("PreFilter" + NAME)

ERR_REASON = "node(s) didn't have free ports for the requested pod ports"

WILDCARD_IP = "0.0.0.0"

HostPort = tuple[str, str, int]
"""``(hostIP, protocol, hostPort)`` with kube's defaults applied."""


def conflicts(want: HostPort, in_use: Mapping[HostPort, int]) -> bool:
    """Whether ``want`` collides with a port in ``in_use``."""
    ip, proto, port = want
    if port <= 0:
        return False
    if ip == WILDCARD_IP:
        return any(p == port and pr == proto for _, pr, p in in_use)
    return (WILDCARD_IP, proto, port) in in_use or want in in_use


def fits_ports(wanted: Sequence[HostPort], in_use: Mapping[HostPort, int]) -> bool:
    if not in_use:
        return True
    return not any(conflicts(w, in_use) for w in wanted)


class NodePorts(PreFilterPlugin, FilterPlugin, VectorFilterPlugin, EnqueueExtensions):
    name = NAME

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # Ports are immutable on a pod: only a deleted pod or a new node can free one.
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD, ActionType.DELETE), _after_pod_deleted
            ),
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD)),
        ]

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        if not pod.host_ports:
            return None, Status.skip()
        state.write(PRE_FILTER_STATE_KEY, list(pod.host_ports))
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def _wanted(self, state: CycleState, pod: Pod) -> list[HostPort]:
        wanted: list[HostPort] | None = state.get(PRE_FILTER_STATE_KEY)
        return list(pod.host_ports) if wanted is None else wanted

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if fits_ports(self._wanted(state, pod), node_info.used_ports):
            return None
        return Status.unschedulable(ERR_REASON, plugin=NAME)

    def filter_mask(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> npt.NDArray[np.bool_] | None:
        wanted = self._wanted(state, pod)
        mask = np.ones(len(snapshot), dtype=bool)
        for i, ni in enumerate(snapshot.node_infos):
            used = ni.used_ports
            if used and not fits_ports(wanted, used):
                mask[i] = False
        return mask


def _after_pod_deleted(pod: Pod, old: object, new: object) -> bool:
    """Queueing hint: only a placed (or nominated) pod holding one of this pod's ports
    can free something it needs."""
    if not isinstance(old, Pod):
        return True
    if not old.node_name and not old.nominated_node_name:
        return False
    if not old.host_ports:
        return False
    freed = dict.fromkeys(old.host_ports, 1)
    return not fits_ports(pod.host_ports, freed)


def new(args: NoArgs, handle: Handle) -> NodePorts:
    return NodePorts()
