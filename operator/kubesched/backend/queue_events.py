"""What a cluster event means to a parked pod: the queueing hints, and pod updates.

:class:`QueueingHints` holds the events each plugin registered (with their hints) and
answers kube-scheduler's question *is this pod worth requeuing on this event?* for pods
its rejecting plugins parked, and *may this event ungate it?* for gated ones.

Two questions the queue asks of a pod update: did it change anything that can change a
scheduling result (:func:`is_pod_updated`; status-only changes cannot), and which kinds
of change were they (:func:`pod_update_actions`), named as kube-scheduler names them so
plugins register for the same events they would in kube-scheduler.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from kubesched.framework.interface import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
)
from kubesched.framework.nodeinfo import QueuedPodInfo
from kubesched.framework.types import Node, Pod

__all__ = [
    "EVENTS_HELD",
    "EVENT_FORCE_ACTIVATE",
    "EVENT_UNSCHEDULABLE_TIMEOUT",
    "QueueingHints",
    "Strategy",
    "event_label",
    "is_pod_updated",
    "pod_update_actions",
    "pod_update_event",
]

EVENT_UNSCHEDULABLE_TIMEOUT = ClusterEvent(
    EventResource.WILDCARD, ActionType.ALL, "UnschedulableTimeout"
)
"""A pod stayed in the unschedulable pool longer than the limit (moves every pod)."""

EVENT_FORCE_ACTIVATE = ClusterEvent(EventResource.WILDCARD, ActionType.ALL, "ForceActivate")
"""A plugin activated a pod that was being scheduled at the time."""

EVENTS_HELD = ClusterEvent(EventResource.WILDCARD, ActionType.ALL, "EventsHeld")
"""Events came while the queues held them (``QueueSet.hold_moves``: the initial listing)."""

log = logging.getLogger(__name__)

# -- kube-scheduler's names for events (metrics) -------------------------------------------
_ACTION_NAMES = {
    ActionType.ADD: "Add",
    ActionType.DELETE: "Delete",
    ActionType.UPDATE_NODE_ALLOCATABLE: "UpdateNodeAllocatable",
    ActionType.UPDATE_NODE_LABEL: "UpdateNodeLabel",
    ActionType.UPDATE_NODE_TAINT: "UpdateNodeTaint",
    ActionType.UPDATE_NODE_CONDITION: "UpdateNodeCondition",
    ActionType.UPDATE_NODE_ANNOTATION: "UpdateNodeAnnotation",
    ActionType.UPDATE_NODE_DECLARED_FEATURE: "UpdateNodeDeclaredFeature",
    ActionType.UPDATE_POD_LABEL: "UpdatePodLabel",
    ActionType.UPDATE_POD_SCALE_DOWN: "UpdatePodScaleDown",
    ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED: "UpdatePodSchedulingGatesEliminated",
    ActionType.UPDATE_POD_TOLERATIONS: "UpdatePodToleration",
    ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM: "UpdatePodGeneratedResourceClaim",
    ActionType.UPDATE_OTHER: "Update",
    ActionType.UPDATE: "Update",
    ActionType.ALL: "All",
}
# The order of kube-scheduler's one-event-per-kind split of an update (its
# NodeSchedulingPropertiesChange and PodSchedulingPropertiesChange): an update of several
# kinds moves a pod on the first of them one of its plugins wants.
_SPLIT_ORDER = (
    ActionType.UPDATE_NODE_ALLOCATABLE,
    ActionType.UPDATE_NODE_LABEL,
    ActionType.UPDATE_NODE_TAINT,
    ActionType.UPDATE_NODE_CONDITION,
    ActionType.UPDATE_NODE_ANNOTATION,
    ActionType.UPDATE_NODE_DECLARED_FEATURE,
    ActionType.UPDATE_POD_LABEL,
    ActionType.UPDATE_POD_SCALE_DOWN,
    ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED,
    ActionType.UPDATE_POD_TOLERATIONS,
    ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM,
    ActionType.UPDATE_OTHER,
)
_labels: dict[tuple[ClusterEvent, bool], str] = {}


def event_label(event: ClusterEvent, *, target: bool = False) -> str:
    """kube-scheduler's ``ClusterEvent.Label()``: the event's own label if it has one
    (``UnschedulableTimeout``), else its resource and action (``NodeAdd``,
    ``AssignedPodDelete``, ``NodeUpdateNodeTaint``). ``target``: the update of the pod
    itself, whose resource kube-scheduler calls ``TargetPod``."""
    hit = _labels.get((event, target))
    if hit is None:
        if event.label:
            hit = event.label
        else:
            resource = "TargetPod" if target else event.resource.value
            action = _ACTION_NAMES.get(event.action)
            if action is None:  # several kinds: named by the first (see _split)
                action = _ACTION_NAMES[_split(event, None, None)[0].action]
            hit = resource + action
        _labels[(event, target)] = hit
    return hit


def _split(event: ClusterEvent, old: object, new: object) -> list[ClusterEvent]:
    """An update of several kinds as kube-scheduler's events, one per kind, in its order
    (a node's ``spec.unschedulable`` change is its first, a taint change)."""
    kinds = [a for a in _SPLIT_ORDER if a & event.action]
    if (
        ActionType.UPDATE_NODE_TAINT in kinds
        and isinstance(old, Node)
        and isinstance(new, Node)
        and old.unschedulable != new.unschedulable
    ):
        kinds.remove(ActionType.UPDATE_NODE_TAINT)
        kinds.insert(0, ActionType.UPDATE_NODE_TAINT)
    return [ClusterEvent(event.resource, a) for a in kinds] or [event]


class Strategy(enum.IntEnum):
    """Where an event sends a parked pod (ordered: the larger wins)."""

    SKIP = 0
    """Stay in the unschedulable pool."""
    AFTER_BACKOFF = 1
    """backoffQ if the pod's backoff has not expired, else activeQ."""
    IMMEDIATELY = 2
    """activeQ now: a Pending plugin's event; waiting was not a failure to back off from."""


class QueueingHints:
    """Plugin name -> the cluster events it registered, each with an optional hint
    ``hint(pod, old, new) -> bool`` (True: the event may make the pod schedulable)."""

    def __init__(self, events: Mapping[str, Sequence[ClusterEventWithHint]]) -> None:
        self._regs = {plugin: tuple(regs) for plugin, regs in events.items()}
        self._interest: dict[ClusterEvent, bool] = {}
        self._plugins_for: dict[ClusterEvent, frozenset[str]] = {}
        self._gaters_for: dict[ClusterEvent, frozenset[str]] = {}
        self._matching: dict[tuple[str, ClusterEvent], tuple[ClusterEventWithHint, ...]] = {}

    def plugins_for(self, event: ClusterEvent) -> frozenset[str]:
        """The plugins that registered for this event (cached: events repeat).

        The queue asks this once per event, then passes over every parked pod whose
        rejecting (or gating) plugins are not among them without asking each one: a
        bind of one pod must not cost a walk of every registration for every pod.
        """
        hit = self._plugins_for.get(event)
        if hit is None:
            hit = frozenset(
                plugin
                for plugin, regs in self._regs.items()
                if any(event.matches(r.event) for r in regs)
            )
            self._plugins_for[event] = hit
        return hit

    def gaters_for(self, event: ClusterEvent) -> frozenset[str]:
        """The plugins whose registration for this event may ungate a pod they hold at
        PreEnqueue (``ClusterEventWithHint.ungates``; cached like :meth:`plugins_for`)."""
        hit = self._gaters_for.get(event)
        if hit is None:
            hit = frozenset(
                plugin
                for plugin, regs in self._regs.items()
                if any(r.ungates and event.matches(r.event) for r in regs)
            )
            self._gaters_for[event] = hit
        return hit

    def interested(self, event: ClusterEvent) -> bool:
        """Whether any plugin registered for this event (wildcard events: always)."""
        if event.resource is EventResource.WILDCARD:
            return True
        hit = self._interest.get(event)
        if hit is None:
            hit = any(event.matches(r.event) for regs in self._regs.values() for r in regs)
            self._interest[event] = hit
        return hit

    def worth(self, qpi: QueuedPodInfo, event: ClusterEvent, old: object, new: object) -> Strategy:
        """kube-scheduler's isPodWorthRequeuing: only the plugins that rejected the pod
        in its last attempt are asked; a pod nothing rejected moves on any event."""
        pending = qpi.pending_plugins
        if not qpi.unschedulable_plugins and not pending:
            return Strategy.AFTER_BACKOFF
        if event.resource is EventResource.WILDCARD:
            if event == EVENT_FORCE_ACTIVATE and isinstance(new, Pod) and new.uid != qpi.pod.uid:
                return Strategy.SKIP
            return Strategy.AFTER_BACKOFF
        registered = self.plugins_for(event)
        if registered.isdisjoint(qpi.unschedulable_plugins) and registered.isdisjoint(pending):
            return Strategy.SKIP
        # Pending plugins first: their Queue means activeQ now, which ends the search.
        for plugin in (*pending, *qpi.unschedulable_plugins):
            if self._says_queue(plugin, qpi.pod, event, old, new):
                return Strategy.IMMEDIATELY if plugin in pending else Strategy.AFTER_BACKOFF
        return Strategy.SKIP

    def mover(
        self,
        qpi: QueuedPodInfo,
        event: ClusterEvent,
        old: object,
        new: object,
        *,
        target: bool = False,
    ) -> str:
        """The label of the event that moved this pod (``scheduler_queue_incoming_pods_total``):
        kube-scheduler delivers an update of several kinds as one event per kind, and the
        first that moves the pod names it; ``target`` as :func:`event_label`'s."""
        kinds = _split(event, old, new) if event.action not in _ACTION_NAMES else [event]
        for kind in kinds[:-1]:
            if qpi.gated:
                if self.ungates(qpi, kind, old, new):
                    break
            elif self.worth(qpi, kind, old, new) is not Strategy.SKIP:
                break
        else:
            kind = kinds[-1]
        return event_label(kind, target=target)

    def ungates(self, qpi: QueuedPodInfo, event: ClusterEvent, old: object, new: object) -> bool:
        """Whether the event may let a gated pod pass its gating PreEnqueue plugin. A
        wildcard event (the unschedulable pool's flush) lets it try again, as
        kube-scheduler 1.37 re-evaluates its gated pods on one."""
        if event.resource is EventResource.WILDCARD:
            return not (
                event == EVENT_FORCE_ACTIVATE and isinstance(new, Pod) and new.uid != qpi.pod.uid
            )
        if qpi.gating_plugin not in self.gaters_for(event):
            return False
        return self._says_queue(qpi.gating_plugin, qpi.pod, event, old, new, gating=True)

    def _matching_regs(self, plugin: str, event: ClusterEvent) -> tuple[ClusterEventWithHint, ...]:
        """``plugin``'s registrations this event matches (cached: a move asks this once
        per parked pod, thousands of times for the same event)."""
        hit = self._matching.get((plugin, event))
        if hit is None:
            hit = tuple(r for r in self._regs.get(plugin, ()) if event.matches(r.event))
            self._matching[(plugin, event)] = hit
        return hit

    def _says_queue(
        self,
        plugin: str,
        pod: Pod,
        event: ClusterEvent,
        old: object,
        new: object,
        *,
        gating: bool = False,
    ) -> bool:
        for reg in self._matching_regs(plugin, event):
            if gating and not reg.ungates:
                continue
            if reg.hint is None:
                return True
            try:
                if reg.hint(pod, old, new):
                    return True
            except Exception:  # as kube: an erroring hint means Queue, never a stuck pod
                log.exception("queueing hint of %s failed for pod %s", plugin, pod.key)
                return True
        return False


# Metadata that changes on every write and never changes a scheduling result.
_VOLATILE_META = ("resourceVersion", "generation", "managedFields", "finalizers")
# Status fields that do take part in scheduling (dynamic resource allocation).
_SCHEDULING_STATUS = ("resourceClaimStatuses", "extendedResourceClaimStatus")


def _relevant(raw: Mapping[str, Any]) -> tuple[dict[str, Any], Any, dict[str, Any]]:
    meta = {k: v for k, v in (raw.get("metadata") or {}).items() if k not in _VOLATILE_META}
    status = raw.get("status") or {}
    kept = {k: status[k] for k in _SCHEDULING_STATUS if k in status}
    return meta, raw.get("spec"), kept


def is_pod_updated(old: Pod | None, new: Pod) -> bool:
    """Whether the update may make the pod schedulable: anything but status and
    bookkeeping metadata (kube-scheduler's ``isPodUpdated``)."""
    if old is None:
        return True
    if old.raw is new.raw:
        return False
    return _relevant(old.raw) != _relevant(new.raw)


def _scaled_down(old: Pod, new: Pod) -> bool:
    o, n = old.requests, new.requests
    if n.milli_cpu < o.milli_cpu or n.memory < o.memory:
        return True
    if n.ephemeral_storage < o.ephemeral_storage:
        return True
    return any(n.scalar.get(k, 0) < v for k, v in o.scalar.items())


def pod_update_actions(old: Pod, new: Pod) -> ActionType:
    """The kinds of change from ``old`` to ``new`` as one flag (kube-scheduler v1.37's
    ``PodSchedulingPropertiesChange``, whose events are one per kind); ``UPDATE_OTHER``
    when none of the named ones. As kube's: tolerations by their number (the API server
    lets them be added only), the generated claims by the status that names them."""
    actions = ActionType(0)
    if old.labels != new.labels:
        actions |= ActionType.UPDATE_POD_LABEL
    if _scaled_down(old, new):
        actions |= ActionType.UPDATE_POD_SCALE_DOWN
    if old.scheduling_gates and not new.scheduling_gates:
        actions |= ActionType.UPDATE_POD_SCHEDULING_GATES_ELIMINATED
    if len(old.spec.get("tolerations") or ()) != len(new.spec.get("tolerations") or ()):
        actions |= ActionType.UPDATE_POD_TOLERATIONS
    o, n = old.raw.get("status") or {}, new.raw.get("status") or {}
    if any(o.get(k) != n.get(k) for k in _SCHEDULING_STATUS):
        actions |= ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM
    return actions or ActionType.UPDATE_OTHER


def pod_update_event(old: Pod, new: Pod) -> ClusterEvent:
    """The cluster event of a pod update: AssignedPod or UnscheduledPod by ``new``."""
    resource = EventResource.ASSIGNED_POD if new.node_name else EventResource.UNSCHEDULED_POD
    return ClusterEvent(resource, pod_update_actions(old, new))
