"""The start's plain pending pods, held back until the first cycle is done.

kube-scheduler schedules once its informers' caches are synced, its queue then holding
every pending pod. Building the scheduler's view of each pod and queueing it costs
about 20 µs a pod in Python: 0.1 s of a start with 5000 pending pods, all of it before
the first bind, which needs only the pod its queue pops first. So ``kubesched run``
(``operator/run.py``, ``_initial_sync``) holds back the pending pods of its first
listing whose queueing is nothing but their place in activeQ, and queues them right
after the first cycle, before the second pop. The order is kube-scheduler's all the
same: each held pod's queue reserves its arrival (timestamp and sequence) as the listing
delivers it (:meth:`SchedulingQueue.reserve`), and before the first cycle each queue
gets the held pod it would pop first (the highest priority, then the earliest arrival:
PrioritySort's order, and Coscheduling's for a pod of no gang), so the first pop is what
it would have been with every pod queued.

Held: a pod with a uid, for a served scheduler name, unassigned, not being deleted, not
finished, of an integer (or no) priority, with no scheduling gates, no resource claims,
no nominated node and no gang. Anything else (a pod some PreEnqueue plugin could hold, a
nominated pod the nominator must know, a gang member, a pod the view may find malformed)
is queued as the listing delivers it. The held pods are released whole when anything
else could need them first: the first cycle ended (after its bind, if it has one past
Permit), any event delivered after the listing, a profile set or removed, or the
initial sync's wait for the first bind ending (``WATCHES_WITHIN``).

The :class:`~kubesched.scheduler.scheduler.Scheduler` owns the hold
(``Scheduler.hold_pending``, ``admit_held_heads``, ``release_held``); the watch router
offers it each pod of the listing (``WatchRouter.dispatch``) and releases it at the
first event after the listing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from kubesched.api.gangs import pod_ref
from kubesched.framework.types import DEFAULT_SCHEDULER_NAME

if TYPE_CHECKING:
    from kubesched.scheduler.scheduler import Scheduler

__all__ = ["HeldPods"]

Obj = Mapping[str, Any]


class HeldPods:
    """Pending pods of the start's listing, held (:meth:`hold`) until :meth:`release`.
    ``deliver`` queues one as the listing would have (the router's ADDED)."""

    def __init__(self, sched: Scheduler, deliver: Callable[[Obj], None]) -> None:
        self.sched = sched
        self._deliver = deliver
        self.holding = True
        """Whether :meth:`hold` takes pods (the listing is under way)."""
        self._pods: dict[str, Obj] = {}
        """uid -> pod, in the listing's order."""
        self._order: dict[str, list[tuple[int, float, int, str]]] = {}
        """Scheduler name -> (-priority, arrival timestamp, arrival seq, uid) per pod."""

    def __len__(self) -> int:
        return len(self._pods)

    def hold(self, raw: Obj) -> bool:
        """Hold ``raw`` (True) if it is a plain pending pod (the module doc), its place
        reserved in its queue; False: deliver it now."""
        meta, spec, status = raw.get("metadata"), raw.get("spec"), raw.get("status")
        if status is None:
            status = {}
        if type(meta) is not dict or type(spec) is not dict or type(status) is not dict:
            return False
        uid = meta.get("uid")
        if (
            not uid
            or type(uid) is not str
            or meta.get("deletionTimestamp")
            or spec.get("nodeName")
            or spec.get("schedulingGates")
            or spec.get("resourceClaims")
            or status.get("nominatedNodeName")
            or status.get("phase") not in (None, "Pending")
        ):
            return False
        prio = spec.get("priority")
        if prio is None:
            prio = 0
        elif type(prio) is not int:
            return False
        labels = meta.get("labels")
        if labels is None:
            labels = {}
        elif type(labels) is not dict:
            return False
        if pod_ref("", labels, spec) is not None:
            return False
        name = spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME
        q = self.sched.queues.queue(name) if name in self.sched.profiles else None
        if q is None:
            return False
        ts, seq = q.reserve(uid)
        self._pods[uid] = raw
        self._order.setdefault(name, []).append((-prio, ts, seq, uid))
        return True

    def admit_heads(self) -> None:
        """The listing is in: hold no more, and queue, per scheduler name, the held pod
        its queue would pop first (should that one not reach activeQ, the next)."""
        self.holding = False
        order, self._order = self._order, {}
        for name, entries in order.items():
            q = self.sched.queues.queue(name)
            while entries and q is not None:
                first = min(entries)
                entries.remove(first)
                uid = first[3]
                self._deliver(self._pods.pop(uid))
                if q.is_active(uid):
                    break

    def release(self) -> None:
        """Queue every pod still held, in the listing's order (each in the place its
        queue reserved), and forget the reservations of any that did not come."""
        self.holding = False
        self._order = {}
        pods, self._pods = self._pods, {}
        for raw in pods.values():
            self._deliver(raw)
        for q in self.sched.queues.queues().values():
            q.drop_reservations()
