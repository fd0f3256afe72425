"""VolumeRestrictions: volumes that cannot be shared, as kube-scheduler v1.37's plugin.

Two rules:

- *Disk conflicts* of inline volumes with pods already on the node (Filter,
  Unschedulable ``node(s) had no available disk``): the same GCE PD (``pdName``) unless
  both mounts are read-only; the same AWS EBS ``volumeID`` always; the same ISCSI ``iqn``
  unless both are read-only; RBD volumes with a common Ceph monitor, the same pool and
  image, unless both are read-only.
- *ReadWriteOncePod* claims: a pod whose PVC has the ``ReadWriteOncePod`` access mode
  cannot schedule while any other scheduled (or assumed) pod uses that claim. PreFilter
  counts the users over the whole snapshot; Filter rejects every node with Unschedulable
  ``node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode
  already in-use by another pod`` (kube-scheduler's wording, v1.34 to v1.37; Unschedulable, not Unresolvable: preemption may remove the user, so
  AddPod/RemovePod keep the count). A missing claim fails PreFilter with
  UnschedulableAndUnresolvable ``persistentvolumeclaim "<name>" not found``.

PreFilter returns Skip when the pod has no disk-conflict volume and no RWOP conflict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
from kubesched.framework.storage import PVC, access_modes, not_found
from kubesched.framework.types import Pod

__all__ = [
    "ERR_REASON_DISK_CONFLICT",
    "ERR_REASON_RWOP_CONFLICT",
    "NAME",
    "VolumeRestrictions",
    "new",
]

NAME = "VolumeRestrictions"
PRE_FILTER_STATE_KEY: StateKey[_State] = StateKey("PreFilter" + NAME)

ERR_REASON_DISK_CONFLICT = "node(s) had no available disk"
ERR_REASON_RWOP_CONFLICT = (
    "node(s) unavailable due to PersistentVolumeClaim with ReadWriteOncePod access mode "
    "already in-use by another pod"
)
READ_WRITE_ONCE_POD = "ReadWriteOncePod"

_CONFLICT_SOURCES = ("gcePersistentDisk", "awsElasticBlockStore", "rbd", "iscsi")


def needs_restrictions_check(vol: Mapping[str, Any]) -> bool:
    return any(vol.get(k) is not None for k in _CONFLICT_SOURCES)


def _ro(src: Mapping[str, Any]) -> bool:
    return bool(src.get("readOnly"))


def is_volume_conflict(vol: Mapping[str, Any], existing_pod: Pod) -> bool:
    """Whether ``vol`` of the incoming pod conflicts with a volume of ``existing_pod``."""
    gce, ebs, rbd, iscsi = (vol.get(k) for k in _CONFLICT_SOURCES)
    for ev in existing_pod.spec.get("volumes") or ():
        egce = ev.get("gcePersistentDisk")
        if (
            gce is not None
            and egce is not None
            and gce.get("pdName") == egce.get("pdName")
            and not (_ro(gce) and _ro(egce))
        ):
            return True
        eebs = ev.get("awsElasticBlockStore")
        if ebs is not None and eebs is not None and ebs.get("volumeID") == eebs.get("volumeID"):
            return True
        eiscsi = ev.get("iscsi")
        if (
            iscsi is not None
            and eiscsi is not None
            and iscsi.get("iqn") == eiscsi.get("iqn")
            and not (_ro(iscsi) and _ro(eiscsi))
        ):
            return True
        erbd = ev.get("rbd")
        if rbd is not None and erbd is not None:
            monitors = set(rbd.get("monitors") or ())
            if (
                monitors.intersection(erbd.get("monitors") or ())
                and (rbd.get("pool") or "rbd") == (erbd.get("pool") or "rbd")
                and rbd.get("image") == erbd.get("image")
                and not (_ro(rbd) and _ro(erbd))
            ):
                return True
    return False


@dataclass(slots=True)
class _State:
    rwop_claims: frozenset[str]
    """Names of the pod's claims with the ReadWriteOncePod access mode."""
    conflicting_refs: int
    """How many times scheduled pods reference those claims."""

    def clone(self) -> _State:
        return _State(self.rwop_claims, self.conflicting_refs)

    def refs_of(self, pod: Pod) -> int:
        n = 0
        for vol in pod.spec.get("volumes") or ():
            claim = (vol.get("persistentVolumeClaim") or {}).get("claimName")
            if claim and claim in self.rwop_claims:
                n += 1
        return n


class VolumeRestrictions(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE)),
            # Only a new node can change the answer (kube-scheduler v1.34+, queueing hints).
            ClusterEventWithHint(ClusterEvent(EventResource.NODE, ActionType.ADD)),
            ClusterEventWithHint(ClusterEvent(EventResource.PVC, ActionType.ADD)),
        ]

    # -- PreFilter ---------------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        volumes = pod.spec.get("volumes") or ()
        needs_check = any(needs_restrictions_check(v) for v in volumes)
        rwop: set[str] = set()
        for vol in volumes:
            src = vol.get("persistentVolumeClaim")
            if src is None:
                continue
            claim = str(src.get("claimName") or "")
            pvc = self._handle.store.get(PVC, pod.namespace, claim)
            if pvc is None:
                return None, Status.unresolvable(not_found(PVC, claim), plugin=NAME)
            if READ_WRITE_ONCE_POD in access_modes(pvc):
                rwop.add(claim)
        refs = 0
        if rwop:
            keys = {f"{pod.namespace}/{c}" for c in rwop}
            used = set()
            for ni in self._handle.snapshot.node_infos:
                if ni.pvc_ref_counts:
                    used.update(keys.intersection(ni.pvc_ref_counts))
            refs = len(used)
        if not needs_check and refs == 0:
            return None, Status.skip()
        state.write(PRE_FILTER_STATE_KEY, _State(frozenset(rwop), refs))
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return self

    def add_pod(
        self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo
    ) -> Status | None:
        s: _State | None = state.get(PRE_FILTER_STATE_KEY)
        if s is None:
            return Status.as_error(f"cannot read {PRE_FILTER_STATE_KEY!r} from cycleState", NAME)
        s.conflicting_refs += s.refs_of(pod_to_add)
        return None

    def remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo
    ) -> Status | None:
        s: _State | None = state.get(PRE_FILTER_STATE_KEY)
        if s is None:
            return Status.as_error(f"cannot read {PRE_FILTER_STATE_KEY!r} from cycleState", NAME)
        s.conflicting_refs -= s.refs_of(pod_to_remove)
        return None

    # -- Filter ------------------------------------------------------------------------------
    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        for vol in pod.spec.get("volumes") or ():
            if not needs_restrictions_check(vol):
                continue
            for existing in node_info.pods:
                if is_volume_conflict(vol, existing):
                    return Status.unschedulable(ERR_REASON_DISK_CONFLICT, plugin=NAME)
        s: _State | None = state.get(PRE_FILTER_STATE_KEY)
        if s is None:
            return Status.as_error(f"cannot read {PRE_FILTER_STATE_KEY!r} from cycleState", NAME)
        if s.conflicting_refs > 0:
            return Status.unschedulable(ERR_REASON_RWOP_CONFLICT, plugin=NAME)
        return None


def new(args: NoArgs, handle: Handle) -> VolumeRestrictions:
    return VolumeRestrictions(handle)
