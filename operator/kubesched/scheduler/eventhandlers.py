"""Cluster events -> cache, queue and nominator (kube-scheduler's eventhandlers.go).

Both cluster adapters call these with plain dicts; a malformed object is reported
through ``on_bad_object`` and skipped, never raised into the watch loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from kubesched.api.gangs import GANG_STORE_KINDS, WORKLOAD_STORE_KIND
from kubesched.backend.queue_events import pod_update_event
from kubesched.framework.interface import ActionType, ClusterEvent, EventResource
from kubesched.framework.types import Node, ObjectError, Pod
from kubesched.scheduler.scheduler import Scheduler

__all__ = ["EventHandlers", "node_update_action"]

log = logging.getLogger("kubesched.events")

Obj = Mapping[str, Any]


def _meta(obj: Obj) -> Obj:
    """``metadata``, or empty when it is not a map (the parser reports that)."""
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


# Kinds whose changes requeue pods, by the resource name plugins register for.
OTHER_KINDS = {
    "PersistentVolumeClaim": EventResource.PVC,
    "PersistentVolume": EventResource.PV,
    "StorageClass": EventResource.STORAGE_CLASS,
    "CSINode": EventResource.CSI_NODE,
    "CSIDriver": EventResource.CSI_DRIVER,
    "CSIStorageCapacity": EventResource.CSI_STORAGE_CAPACITY,
    "VolumeAttachment": EventResource.VOLUME_ATTACHMENT,
    "ResourceClaim": EventResource.RESOURCE_CLAIM,
    "ResourceSlice": EventResource.RESOURCE_SLICE,
    "DeviceClass": EventResource.DEVICE_CLASS,
    # a rule re-taints devices: kube-scheduler's slice tracker reports slice updates
    "DeviceTaintRule": EventResource.RESOURCE_SLICE,
    **dict.fromkeys(GANG_STORE_KINDS, EventResource.POD_GROUP),
    WORKLOAD_STORE_KIND: EventResource.POD_GROUP,  # an upstream PodGroup's template
}


def node_update_action(old: Node, new: Node) -> ActionType:
    """Which kinds of node update happened (kube's nodeSchedulingPropertiesChange)."""
    a = ActionType(0)
    if old.allocatable != new.allocatable:
        a |= ActionType.UPDATE_NODE_ALLOCATABLE
    if old.labels != new.labels:
        a |= ActionType.UPDATE_NODE_LABEL
    if old.unschedulable != new.unschedulable or [repr(t) for t in old.taints] != [
        repr(t) for t in new.taints
    ]:
        a |= ActionType.UPDATE_NODE_TAINT
    if (old.raw.get("status") or {}).get("conditions") != (new.raw.get("status") or {}).get(
        "conditions"
    ):
        a |= ActionType.UPDATE_NODE_CONDITION
    if (old.raw.get("metadata") or {}).get("annotations") != (new.raw.get("metadata") or {}).get(
        "annotations"
    ):
        a |= ActionType.UPDATE_NODE_ANNOTATION
    if (old.raw.get("status") or {}).get("declaredFeatures") != (new.raw.get("status") or {}).get(
        "declaredFeatures"
    ):
        a |= ActionType.UPDATE_NODE_DECLARED_FEATURE
    return a


class EventHandlers:
    def __init__(
        self,
        sched: Scheduler,
        on_bad_object: Callable[[str, Obj, str], None] | None = None,
    ) -> None:
        self.sched = sched
        self.on_bad_object = on_bad_object or (
            lambda kind, obj, msg: log.warning("skipping malformed %s: %s", kind, msg)
        )
        self._pods: dict[str, Pod] = {}
        self._nodes: dict[str, Node] = {}

    # -- dispatch -------------------------------------------------------------------------------
    def on_event(self, kind: str, event_type: str, obj: Obj, old: Obj | None = None) -> None:
        """``event_type`` is ADDED, MODIFIED or DELETED (watch vocabulary)."""
        try:
            if kind == "Pod":
                self._pod_event(event_type, obj)
            elif kind == "Node":
                self._node_event(event_type, obj)
            elif kind in OTHER_KINDS:
                self._other_event(kind, event_type, obj, old)
        except ObjectError as e:
            meta = _meta(obj)
            ns = meta.get("namespace")
            name = f"{ns}/{meta.get('name')}" if ns else str(meta.get("name"))
            self.on_bad_object(kind, obj, f"{kind} {name}: {e}")

    # -- pods -------------------------------------------------------------------------------------
    def _pod_event(self, event_type: str, raw: Obj) -> None:
        if event_type == "DELETED":
            uid = str(_meta(raw).get("uid") or "")
            old = self._pods.pop(uid, None) if uid else None
            if old is None:
                old = Pod(raw)
                self._pods.pop(old.uid, None)
            self._pod_deleted(old)
            return
        pod = Pod(raw)
        old = self._pods.get(pod.uid)
        if old is not None and old.key != pod.key:
            # The API server never does this; a second pod with the uid would share the
            # first one's cache and queue entries (the simulator's manifests might).
            raise ObjectError(f"metadata.uid: {pod.uid!r} is already the uid of pod {old.key}")
        if pod.is_terminal():
            # Finished pods hold no resources (kube-scheduler filters them out of its watch).
            if old is not None:
                del self._pods[pod.uid]
                self._pod_deleted(old)
            return
        self._pods[pod.uid] = pod
        if old is None:
            self._pod_added(pod)
        else:
            self._pod_updated(old, pod)

    def _pod_added(self, pod: Pod) -> None:
        s = self.sched
        if pod.node_name:
            s.cache.add_pod(pod)
            s.queues.move_all_to_active_or_backoff(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.ADD), None, pod
            )
            return
        if s.responsible_for(pod):
            s.unscheduled[pod.uid] = pod
            if pod.nominated_node_name:
                s.nominator.add(pod)
            q = s.queues.queue(pod.scheduler_name)
            if q is not None:
                q.add(pod)
        else:
            s.unserved[pod.uid] = pod

    def _pod_updated(self, old: Pod, new: Pod) -> None:
        s = self.sched
        if new.node_name:
            if not old.node_name:
                # Bound (by us or someone else): out of the queue, into the cache.
                s.unscheduled.pop(new.uid, None)
                s.unserved.pop(new.uid, None)
                s.nominator.delete(new)
                q = s.queues.queue(old.scheduler_name)
                if q is not None:
                    q.delete(old)
                s.cache.add_pod(new)
                s.queues.move_all_to_active_or_backoff(
                    ClusterEvent(EventResource.ASSIGNED_POD, ActionType.ADD), None, new
                )
            else:
                s.cache.update_pod(old, new)
                s.queues.move_all_to_active_or_backoff(pod_update_event(old, new), old, new)
            return
        if s.responsible_for(new):
            s.unscheduled[new.uid] = new
            if s.cache.is_assumed(new.uid):
                # In its binding cycle (waiting at Permit, binding): not the queue's, or
                # it would be both assumed and queued, nor the nominator's (its status
                # patch of an earlier nomination, landing now, must not hold that node
                # again); a failed bind requeues the latest version (kube-scheduler's
                # updatePodInSchedulingQueue skips it too).
                return
            s.nominator.update(old, new)
            q = s.queues.queue(new.scheduler_name)
            if q is not None:
                q.update(old, new)
        elif s.responsible_for(old):
            # schedulerName cannot change in a real cluster; the simulator may do it.
            self._pod_deleted(old)
            s.unserved[new.uid] = new
        else:
            s.unserved[new.uid] = new

    def _pod_deleted(self, pod: Pod) -> None:
        s = self.sched
        if pod.node_name and not s.unscheduled.get(pod.uid):
            s.cache.remove_pod(pod)
            s.queues.move_all_to_active_or_backoff(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE), pod, None
            )
            return
        s.unscheduled.pop(pod.uid, None)
        s.unserved.pop(pod.uid, None)
        s.nominator.delete(pod)
        q = s.queues.queue(pod.scheduler_name)
        if q is not None:
            q.delete(pod)
        fwk = s.framework_for(pod)
        if fwk is not None:
            fwk.reject_waiting_pod(pod.uid, "", "pod was deleted while waiting at permit")
        if s.cache.is_assumed(pod.uid):
            s.cache.remove_pod(pod)
        s.stats.outcomes.pop(pod.uid, None)

    # -- nodes ------------------------------------------------------------------------------------
    def _node_event(self, event_type: str, raw: Obj) -> None:
        s = self.sched
        if event_type == "DELETED":
            name = str(_meta(raw).get("name") or "")
            self._nodes.pop(name, None)
            s.cache.remove_node(name)
            return
        node = Node(raw)
        old = self._nodes.get(node.name)
        self._nodes[node.name] = node
        if old is None:
            s.cache.add_node(node)
            s.queues.move_all_to_active_or_backoff(
                ClusterEvent(EventResource.NODE, ActionType.ADD), None, node
            )
            return
        s.cache.update_node(old, node)
        action = node_update_action(old, node)
        if action:
            s.queues.move_all_to_active_or_backoff(
                ClusterEvent(EventResource.NODE, action), old, node
            )

    # -- everything else ---------------------------------------------------------------------------
    def _other_event(self, kind: str, event_type: str, obj: Obj, old: Obj | None) -> None:
        if kind in GANG_STORE_KINDS and (
            event_type == "DELETED" or _meta(obj).get("deletionTimestamp")
        ):
            self._pod_group_deleted(kind, obj)
        action = {
            "ADDED": ActionType.ADD,
            "DELETED": ActionType.DELETE,
        }.get(event_type, ActionType.UPDATE_OTHER)
        # hints get (old, new) as kube's do: (deleted object, None) for a delete
        before, after = (obj, None) if event_type == "DELETED" else (old, obj)
        if kind == "DeviceTaintRule":
            # the DRA machinery, imported on the first rule (off kubesched run's start-up)
            from kubesched.framework.dra.taint_rules import rule_taints_devices

            store = self.sched.store
            slices = store.list("ResourceSlice") if store is not None else ()
            if not rule_taints_devices(slices, old, obj):
                return
            action, before, after = ActionType.UPDATE_OTHER, None, None
        self.sched.queues.move_all_to_active_or_backoff(
            ClusterEvent(OTHER_KINDS[kind], action), before, after
        )

    def _pod_group_deleted(self, kind: str, obj: Obj) -> None:
        """Tell the plugins that keep gangs waiting at Permit (``pod_group_deleted``:
        Coscheduling) that a PodGroup is gone, so its waiting members are rejected."""
        meta = _meta(obj)
        ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
        for prof in list(self.sched.profiles.values()):
            for plugin in prof.framework.chain.permit:
                hook = getattr(plugin, "pod_group_deleted", None)
                if callable(hook):
                    hook(ns, name, kind)
