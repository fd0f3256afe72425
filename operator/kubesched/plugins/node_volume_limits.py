"""NodeVolumeLimits: CSI attach limits per node, as kube-scheduler v1.37's CSILimits plugin.

A node's limit for a CSI driver is ``spec.drivers[].allocatable.count`` of its CSINode
and nothing else (a node allocatable ``attachable-volumes-csi-*`` is ignored, as by
kube-scheduler v1.34 and v1.37). Volumes are counted once per unique
``<driver>/<volumeHandle>``: the pod's PVC (and generic ephemeral) volumes resolve PVC -> PV -> ``spec.csi``; an unbound
claim counts against its StorageClass's provisioner with a per-claim handle. Volumes
already used by pods on the node are not counted twice. If for some driver
``attached + new > limit``: Unschedulable ``node(s) exceed max volume count``.
A missing claim of the incoming pod: UnschedulableAndUnresolvable
``looking up PVC <ns>/<name>: persistentvolumeclaim "<name>" not found``.

Since v1.37 (gate VolumeLimitScaling, beta and on): a driver whose CSIDriver object sets
``spec.preventPodSchedulingIfMissing: true`` must be registered in the node's CSINode
(``spec.drivers[].name``); if not, Unschedulable ``<driver> CSI driver is not installed
on the node``. This is checked before the limits, for every driver of the pod's new
volumes; a driver without a CSIDriver object passes.

Deliberate differences from kube-scheduler:

- in-tree volume plugins migrated to CSI (inline GCE PD / EBS / ... volumes and in-tree
  PVs) are not translated: they are not counted;
- VolumeAttachment objects (attachments left by deleted pods, counted since v1.33) are not
  watched: only pods' volumes count.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

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
)
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.registry import NoArgs
from kubesched.framework.status import Status
from kubesched.framework.storage import (
    CSI_DRIVER,
    CSI_NODE,
    PV,
    PVC,
    STORAGE_CLASS,
    ephemeral_owner_error,
    not_found,
    pod_claims,
    pvc_class,
)
from kubesched.framework.types import Pod

__all__ = [
    "ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED",
    "NAME",
    "CSILimits",
    "driver_not_installed",
    "new",
]

NAME = "NodeVolumeLimits"

ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED = "node(s) exceed max volume count"

CSI_ATTACH_LIMIT_PREFIX = "attachable-volumes-csi-"
_RESOURCE_NAME_LENGTH_LIMIT = 63


def csi_attach_limit_key(driver: str) -> str:
    """kube's GetCSIAttachLimitKey: long driver names are shortened with a sha1 suffix."""
    if len(CSI_ATTACH_LIMIT_PREFIX) + len(driver) >= _RESOURCE_NAME_LENGTH_LIMIT:
        digest = hashlib.sha1(driver.encode(), usedforsecurity=False).hexdigest()[:16]
        return CSI_ATTACH_LIMIT_PREFIX + driver[:23] + digest
    return CSI_ATTACH_LIMIT_PREFIX + driver


def volume_limits(node_info: NodeInfo, csi_node: Mapping[str, Any] | None) -> dict[str, int]:
    """Limit key -> max attachable volumes on this node (its CSINode's driver counts)."""
    limits: dict[str, int] = {}
    if csi_node is not None:
        for d in (csi_node.get("spec") or {}).get("drivers") or ():
            count = (d.get("allocatable") or {}).get("count")
            if isinstance(count, int) and not isinstance(count, bool):
                limits[csi_attach_limit_key(str(d.get("name") or ""))] = count
    return limits


def driver_not_installed(driver: str) -> str:
    """The Filter reason of a node missing a driver that must be registered."""
    return f"{driver} CSI driver is not installed on the node"


def _driver_registered(csi_node: Mapping[str, Any] | None, driver: str) -> bool:
    if csi_node is None:
        return False
    drivers = (csi_node.get("spec") or {}).get("drivers") or ()
    return any(isinstance(d, Mapping) and d.get("name") == driver for d in drivers)


class _PVCNotFound(Exception):
    pass


class CSILimits(PreFilterPlugin, FilterPlugin, EnqueueExtensions):
    name = NAME

    def __init__(self, handle: Handle) -> None:
        self._handle = handle
        self._unbound_prefix = uuid.uuid4().hex
        """Handles of not yet bound claims never collide with real volume handles."""

    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_NODE, ActionType.ADD)),
            ClusterEventWithHint(
                ClusterEvent(EventResource.CSI_NODE, ActionType.UPDATE), _after_csi_node_update
            ),
            ClusterEventWithHint(ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE)),
            ClusterEventWithHint(ClusterEvent(EventResource.PVC, ActionType.ADD)),
        ]

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        for _ in pod_claims(pod):
            return None, None
        return None, Status.skip()

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def _driver_info(self, pvc: Mapping[str, Any]) -> tuple[str, str]:
        store = self._handle.store
        pv_name = str((pvc.get("spec") or {}).get("volumeName") or "")
        if pv_name:
            pv = store.get(PV, "", pv_name)
            if pv is not None:
                csi = (pv.get("spec") or {}).get("csi")
                if csi is None:
                    return "", ""  # in-tree volume: migration is not modelled
                return str(csi.get("driver") or ""), str(csi.get("volumeHandle") or "")
        sc_name = pvc_class(pvc)
        if not sc_name:
            return "", ""
        sc = store.get(STORAGE_CLASS, "", sc_name)
        if sc is None:
            return "", ""
        meta = pvc.get("metadata") or {}
        handle = f"{self._unbound_prefix}-{meta.get('namespace') or 'default'}/{meta.get('name')}"
        return str(sc.get("provisioner") or ""), handle

    def attachable_volumes(self, pod: Pod, *, new_pod: bool, out: dict[str, str]) -> None:
        """Add the pod's CSI volumes (unique name -> driver) to ``out``.

        Raises ``_PVCNotFound`` (new pod only) or ``ValueError`` (malformed volume)."""
        store = self._handle.store
        for pc in pod_claims(pod):
            if not pc.claim:
                raise ValueError("PersistentVolumeClaim had no name")
            pvc = store.get(PVC, pod.namespace, pc.claim)
            if pvc is None:
                if new_pod:
                    raise _PVCNotFound(
                        f"looking up PVC {pod.namespace}/{pc.claim}: {not_found(PVC, pc.claim)}"
                    )
                continue
            if pc.ephemeral:
                err = ephemeral_owner_error(pod, pvc)
                if err is not None:
                    raise ValueError(err)
            driver, handle = self._driver_info(pvc)
            if not driver or not handle:
                continue
            out[f"{driver}/{handle}"] = driver

    def _must_be_installed(self, driver: str) -> bool:
        """Whether the driver's CSIDriver opts in to preventPodSchedulingIfMissing."""
        obj = self._handle.store.get(CSI_DRIVER, "", driver)
        if obj is None:
            return False
        return (obj.get("spec") or {}).get("preventPodSchedulingIfMissing") is True

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if not pod.spec.get("volumes"):
            return None
        node = node_info.node
        if node is None:
            return Status.as_error("node not found", plugin=NAME)
        new_volumes: dict[str, str] = {}
        try:
            self.attachable_volumes(pod, new_pod=True, out=new_volumes)
        except _PVCNotFound as e:
            return Status.unresolvable(str(e), plugin=NAME)
        except ValueError as e:
            return Status.as_error(str(e), plugin=NAME)
        if not new_volumes:
            return None
        csi_node = self._handle.store.get(CSI_NODE, "", node.name)
        for driver in dict.fromkeys(new_volumes.values()):
            if self._must_be_installed(driver) and not _driver_registered(csi_node, driver):
                return Status.unschedulable(driver_not_installed(driver), plugin=NAME)
        limits = volume_limits(node_info, csi_node)
        if not limits:
            return None
        attached: dict[str, str] = {}
        try:
            for existing in node_info.pods:
                if existing.spec.get("volumes"):
                    self.attachable_volumes(existing, new_pod=False, out=attached)
        except ValueError as e:
            return Status.as_error(str(e), plugin=NAME)
        attached_count: dict[str, int] = {}
        for unique, driver in attached.items():
            new_volumes.pop(unique, None)
            key = csi_attach_limit_key(driver)
            attached_count[key] = attached_count.get(key, 0) + 1
        new_count: dict[str, int] = {}
        for driver in new_volumes.values():
            key = csi_attach_limit_key(driver)
            new_count[key] = new_count.get(key, 0) + 1
        for key, count in new_count.items():
            limit = limits.get(key)
            if limit is not None and attached_count.get(key, 0) + count > limit:
                return Status.unschedulable(ERR_REASON_MAX_VOLUME_COUNT_EXCEEDED, plugin=NAME)
        return None


def _driver_counts(csi_node: object) -> dict[str, int]:
    counts: dict[str, int] = {}
    spec = csi_node.get("spec") if isinstance(csi_node, Mapping) else None
    for d in (spec or {}).get("drivers") or ():
        if not isinstance(d, Mapping):
            continue
        count = (d.get("allocatable") or {}).get("count")
        if not isinstance(count, int) or isinstance(count, bool):
            count = 0
        counts[str(d.get("name") or "")] = count
    return counts


def _after_csi_node_update(pod: Pod, old: object, new: object) -> bool:
    """Queueing hint (kube's isSchedulableAfterCSINodeUpdated): some driver's attach
    limit grew (a driver newly listed without a count does not count as growth)."""
    before = _driver_counts(old)
    return any(n > before.get(name, 0) for name, n in _driver_counts(new).items())


def new(args: NoArgs, handle: Handle) -> CSILimits:
    return CSILimits(handle)
