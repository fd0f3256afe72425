"""VolumeZone: a pod whose bound PersistentVolumes carry zone/region labels only fits
nodes in those zones/regions, as kube-scheduler v1.37's plugin.

PreFilter collects, for every PVC volume of the pod, the bound PV's topology labels
(``topology.kubernetes.io/zone``/``region`` and their deprecated
``failure-domain.beta.kubernetes.io/*`` forms; a value may list several zones joined by
``__``). Unbound claims of a WaitForFirstConsumer StorageClass are skipped (VolumeBinding
handles them); other unbound claims, missing claims, PVs and classes fail PreFilter with
UnschedulableAndUnresolvable and kube's messages. No topology at all: Skip.

Filter: a node with none of the four labels fits (kube treats it as unconstrained);
otherwise every PV label must have the node's value (a beta PV label may match the
node's GA label) among its values, else UnschedulableAndUnresolvable
``node(s) had no available volume zone``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
)
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.registry import NoArgs
from kubesched.framework.status import Status
from kubesched.framework.storage import PV, PVC, STORAGE_CLASS, not_found, pvc_class
from kubesched.framework.types import Pod

__all__ = ["ERR_REASON_CONFLICT", "NAME", "TOPOLOGY_LABELS", "VolumeZone", "new"]

NAME = "VolumeZone"
PRE_FILTER_STATE_KEY: StateKey[list[PVTopology]] = StateKey("PreFilter" + NAME)

ERR_REASON_CONFLICT = "node(s) had no available volume zone"

BETA_ZONE = "failure-domain.beta.kubernetes.io/zone"
BETA_REGION = "failure-domain.beta.kubernetes.io/region"
ZONE = "topology.kubernetes.io/zone"
REGION = "topology.kubernetes.io/region"
TOPOLOGY_LABELS = (BETA_ZONE, BETA_REGION, ZONE, REGION)
_GA = {BETA_ZONE: ZONE, BETA_REGION: REGION}


@dataclass(frozen=True, slots=True)
class PVTopology:
    pv_name: str
    key: str
    values: frozenset[str]


def pv_topologies(pv_name: str, labels: dict[str, str]) -> list[PVTopology]:
    out = []
    for key in TOPOLOGY_LABELS:
        v = labels.get(key)
        if v is None:
            continue
        # kube's LabelZonesToSet: "__"-separated; an empty element is invalid and skipped.
        values = v.split("__")
        if any(not x for x in values):
            continue
        out.append(PVTopology(pv_name, key, frozenset(values)))
    return out


class VolumeZone(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.STORAGE_CLASS, ActionType.ADD)),
            # Zone labels decide; taints do not (kube-scheduler v1.34+, queueing hints).
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.PVC, ActionType.ADD | ActionType.UPDATE_OTHER)
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.PV, ActionType.ADD | ActionType.UPDATE_OTHER)
            ),
        ]

    def topologies(self, pod: Pod) -> tuple[list[PVTopology], Status | None]:
        """The pod's PV topologies, or a PreFilter failure (kube's getPVbyPod)."""
        out: list[PVTopology] = []
        for vol in pod.spec.get("volumes") or ():
            src = vol.get("persistentVolumeClaim")
            if src is None:
                continue
            store = self._handle.store
            claim = str(src.get("claimName") or "")
            if not claim:
                return [], Status.unresolvable("PersistentVolumeClaim had no name", plugin=NAME)
            pvc = store.get(PVC, pod.namespace, claim)
            if pvc is None:
                return [], Status.unresolvable(not_found(PVC, claim), plugin=NAME)
            pv_name = str((pvc.get("spec") or {}).get("volumeName") or "")
            if not pv_name:
                sc_name = pvc_class(pvc)
                if not sc_name:
                    return [], Status.unresolvable(
                        "PersistentVolumeClaim had no pv name and storageClass name", plugin=NAME
                    )
                sc = store.get(STORAGE_CLASS, "", sc_name)
                if sc is None:
                    return [], Status.unresolvable(not_found(STORAGE_CLASS, sc_name), plugin=NAME)
                mode = sc.get("volumeBindingMode")
                if mode is None:
                    return [], Status.unresolvable(
                        f'VolumeBindingMode not set for StorageClass "{sc_name}"', plugin=NAME
                    )
                if mode == "WaitForFirstConsumer":
                    continue
                return [], Status.unresolvable("PersistentVolume had no name", plugin=NAME)
            pv = store.get(PV, "", pv_name)
            if pv is None:
                return [], Status.unresolvable(not_found(PV, pv_name), plugin=NAME)
            labels = (pv.get("metadata") or {}).get("labels") or {}
            out.extend(pv_topologies(pv_name, labels))
        return out, None

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        topologies, status = self.topologies(pod)
        if status is not None:
            return None, status
        if not topologies:
            return None, Status.skip()
        state.write(PRE_FILTER_STATE_KEY, topologies)
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if not pod.spec.get("volumes"):
            return None
        topologies: list[PVTopology] | None = state.get(PRE_FILTER_STATE_KEY)
        if topologies is None:
            topologies, status = self.topologies(pod)
            if status is not None:
                return status
        node = node_info.node
        if node is None:
            return Status.as_error("node not found", plugin=NAME)
        labels = node.labels
        if not any(k in labels for k in TOPOLOGY_LABELS):
            return None
        for t in topologies:
            v = labels.get(t.key)
            if v is None and t.key in _GA:
                v = labels.get(_GA[t.key])
            if v is None or v not in t.values:
                return Status.unresolvable(ERR_REASON_CONFLICT, plugin=NAME)
        return None


def new(args: NoArgs, handle: Handle) -> VolumeZone:
    return VolumeZone(handle)
