"""Binding cycles, the writes in flight, and how a scheduling attempt ends.

The binding cycle of a pod that passed Reserve and Permit (WaitOnPermit, PreBind, Bind
with transient failures retried in place (:mod:`kubesched.scheduler.bindretry`), PostBind,
the ``Scheduled`` Event) runs as an asyncio task beside the next scheduling cycles, at most
:data:`MAX_BINDS_IN_FLIGHT` past Permit; a failure anywhere runs Unreserve, forgets the
assumed pod and takes the failure path. The failure path is kube-scheduler's
handleSchedulingFailure: PostFilter (preemption) for a pod no node fits, the requeue, the
nomination, the ``FailedScheduling`` Event and the ``PodScheduled`` condition. Single pods
(:mod:`kubesched.scheduler.scheduler`) and gangs (:mod:`kubesched.scheduler.gang_cycle`)
end both ways. :class:`BindingCycles` is a mixin of
:class:`~kubesched.scheduler.scheduler.Scheduler`: the state it uses is the scheduler's,
made in its ``__init__``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Coroutine
from dataclasses import dataclass, field
from typing import Any

from kubesched.api.gangs import in_pod_group_cycle
from kubesched.backend.cache import Cache
from kubesched.backend.nominator import Nominator
from kubesched.backend.queue_set import QueueSet
from kubesched.framework.cluster_port import ClusterPort, Conflict, NotFound, PodCondition
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ActionType, ClusterEvent, EventResource
from kubesched.framework.nodeinfo import QueuedPodInfo
from kubesched.framework.runtime import Framework
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.scheduler.algorithm import FitError, one_node_rejection
from kubesched.scheduler.bindretry import (
    BindRetryPolicy,
    assigned_node,
    error_code,
    is_transient,
    retry_delay,
)
from kubesched.scheduler.metrics import SchedulerMetrics

__all__ = ["ERRORS_REMEMBERED", "MAX_BINDS_IN_FLIGHT", "BindingCycles", "PodOutcome", "Stats"]

log = logging.getLogger("kubesched.scheduler")

ASSIGNED_POD_DELETE = ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE)

MAX_BINDS_IN_FLIGHT = 256
"""Binding cycles past Permit at most; the next scheduling cycle waits for one to end.
kube-scheduler starts a goroutine per bind and lets them pile up; here each pending bind
holds its cycle state, its request and a coroutine, about 40 KiB: a backlog of gangs
(3000 members placed faster than the API server binds them) had 1167 in flight and 46
MiB more resident at the peak. The API server sets the bind rate either way, so placing
pods further ahead of it gains nothing; 256 is half a second of binds at 500 a second
over the 32 write connections. Pods waiting at Permit (for a sibling, say) do not count:
they may need the next cycles to be let go."""


@dataclass(slots=True)
class PodOutcome:
    """The last thing that happened to a pod this scheduler served."""

    node: str | None = None
    status: str = "Pending"  # Scheduled | Unschedulable | SchedulerError | Waiting | Pending
    message: str = ""
    attempts: int = 0


@dataclass(slots=True)
class Stats:
    scheduled: int = 0
    unschedulable: int = 0
    errors: int = 0
    first_cycle: float | None = None
    last_bind: float | None = None
    outcomes: dict[str, PodOutcome] = field(default_factory=dict)


ERRORS_REMEMBERED = 4096
"""Pods whose last scheduling error is remembered, so that it is logged once
(:meth:`BindingCycles._log_error`)."""


class BindingCycles:
    """The binding cycles and failure path of a :class:`Scheduler` (mixed into it)."""

    cluster: ClusterPort
    cache: Cache
    nominator: Nominator
    queues: QueueSet
    metrics: SchedulerMetrics
    stats: Stats
    unscheduled: dict[str, Pod]
    bind_retry: BindRetryPolicy
    bound_once: asyncio.Event
    _tasks: set[asyncio.Task[Any]]
    _wake: asyncio.Event
    _binding: int
    _bind_room: asyncio.Event
    _attempt_start: dict[str, float]
    _errors_logged: dict[str, str]

    def _spawn(self, coro: Coroutine[Any, Any, Any]) -> None:
        t = asyncio.create_task(coro)
        self._tasks.add(t)
        t.add_done_callback(self._task_done)

    def _task_done(self, t: asyncio.Task[Any]) -> None:
        self._tasks.discard(t)
        if not t.cancelled() and t.exception() is not None:
            log.error("background task failed", exc_info=t.exception())
        self._wake.set()

    async def drain(self) -> None:
        """Wait for binding cycles and writes in flight."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def abort(self) -> None:
        """Cancel binding cycles and writes in flight, and wait for them to end (the lease
        was lost: this replica must write nothing more)."""
        while self._tasks:
            tasks = list(self._tasks)
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _room_to_bind(self) -> None:
        """Until fewer than :data:`MAX_BINDS_IN_FLIGHT` binding cycles are past Permit."""
        while self._binding >= MAX_BINDS_IN_FLIGHT:
            self._bind_room.clear()
            await self._bind_room.wait()

    def _attempt_seconds(self, uid: str) -> float:
        start = self._attempt_start.pop(uid, None)
        return 0.0 if start is None else time.perf_counter() - start

    def _post_filter_and_fail(
        self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, err: FitError, cycle: int
    ) -> None:
        diag = err.diagnosis
        # kube-scheduler clears the nomination unless PostFilter runs (no plugins, no
        # nodes: clearNominatedNode); then its result decides, and none leaves it. A
        # Kubernetes PodGroup's member is tried in its group's cycle: no PostFilter, and
        # its nomination is left to the group's preemption.
        nominated: str | None = ""
        if in_pod_group_cycle(qpi.pod.spec):
            nominated = None
        elif fwk.chain.post_filter and err.num_all_nodes > 0:
            nominated = None
            t0 = time.perf_counter()
            res, s = fwk.run_post_filter(state, qpi.pod, diag.node_to_status)
            self.metrics.extension_point(
                "PostFilter", s, fwk.profile_name, time.perf_counter() - t0
            )
            if _preemption_ran(fwk, s):
                self.metrics.preemption_attempts.inc()
            if s is not None and s.code == Code.ERROR:
                # as kube-scheduler: an error in PostFilter is logged and its message
                # joins the pod's; the attempt stays a failure to fit (Unschedulable)
                log.warning("pod %s: PostFilter: %s", qpi.pod.key, s.message())
            if s is not None and s.message():
                diag.post_filter_msg = s.message()
            if res is not None:
                # A result overrides the nomination; an empty one clears it (kube's
                # ModeOverride). No result leaves it as it is.
                nominated = str(res.nominated_node_name or "")
        qpi.unschedulable_plugins = set(diag.unschedulable_plugins)
        qpi.pending_plugins = set(diag.pending_plugins)
        code = (
            Code.PENDING
            if diag.pending_plugins and not diag.unschedulable_plugins
            else Code.UNSCHEDULABLE
        )
        # No node at all is kube-scheduler's ErrNoNodesAvailable, said as is (not a
        # FitError's "0/0 nodes are available: ...").
        message = diag.pre_filter_msg if err.num_all_nodes == 0 else str(err)
        self._fail(fwk, qpi, Status(code, message), cycle, nominated_node=nominated)

    def _fail(
        self,
        fwk: Framework,
        qpi: QueuedPodInfo,
        status: Status,
        cycle: int,
        *,
        nominated_node: str | None = "",
    ) -> None:
        """kube-scheduler's handleSchedulingFailure: requeue, event, condition.
        ``nominated_node``: the pod's nomination from now on; "" (the default, kube's
        clearNominatedNode for every failure but one after PostFilter) clears it, None
        leaves it as it is."""
        pod = qpi.pod
        rejected = status.is_rejected()
        reason = "Unschedulable" if rejected else "SchedulerError"
        msg = status.message()
        self.metrics.attempt(
            "unschedulable" if rejected else "error",
            fwk.profile_name,
            self._attempt_seconds(pod.uid),
        )
        if rejected:
            self.stats.unschedulable += 1
            if status.plugin and status.code != Code.PENDING:
                qpi.unschedulable_plugins.add(status.plugin)
            elif status.plugin:
                qpi.pending_plugins.add(status.plugin)
        else:
            self.stats.errors += 1
            qpi.unschedulable_plugins = set()
            qpi.pending_plugins = set()
            self._log_error(pod, msg)
        qpi.message = msg
        self.stats.outcomes[pod.uid] = PodOutcome(None, reason, msg, qpi.attempts)
        queue = self.queues.queue(pod.scheduler_name)
        latest = self.unscheduled.get(pod.uid)
        if queue is not None and latest is not None:
            # Requeue the latest version of the pod (it may have changed meanwhile).
            qpi.pod = latest
            queue.add_unschedulable(qpi, scheduling_cycle=cycle)
        if nominated_node:
            self.nominator.add(pod, nominated_node)
        elif nominated_node == "":
            self.nominator.delete(pod)
            if not pod.nominated_node_name:
                nominated_node = None  # nothing to clear in the pod's status
        self._spawn(self._report_failure(fwk, pod, reason, msg, nominated_node))

    def _log_error(self, pod: Pod, msg: str) -> None:
        """A scheduling error, at WARNING the first time a pod meets it: the pod backs off
        and is tried again, and an error that stays (a PodGroup whose pods disagree) would
        otherwise repeat the line at every attempt. Each attempt still records its
        FailedScheduling event; repeats are logged at DEBUG."""
        logged = self._errors_logged
        if logged.get(pod.uid) == msg:
            log.debug("error scheduling pod %s (again): %s", pod.key, msg)
            return
        if len(logged) >= ERRORS_REMEMBERED:
            logged.clear()
        logged[pod.uid] = msg
        log.warning("error scheduling pod %s: %s", pod.key, msg)

    async def _report_failure(
        self, fwk: Framework, pod: Pod, reason: str, msg: str, nominated_node: str | None
    ) -> None:
        try:
            await self._failed_scheduling_event(fwk, pod, msg)
            await self.cluster.patch_pod_status(
                pod,
                condition=PodCondition("PodScheduled", "False", reason, msg),
                nominated_node_name=nominated_node,
            )
        except NotFound:
            pass

    async def _report_gone(self, fwk: Framework, pod: Pod, msg: str) -> None:
        with contextlib.suppress(NotFound):
            await self._failed_scheduling_event(fwk, pod, msg)

    async def _failed_scheduling_event(self, fwk: Framework, pod: Pod, msg: str) -> None:
        await self.cluster.record_event(
            pod,
            event_type="Warning",
            reason="FailedScheduling",
            action="Scheduling",
            message=msg,
            reporting_controller=fwk.profile_name,
        )

    async def _bind(self, fwk: Framework, state: CycleState, pod: Pod, node: str) -> Status | None:
        """The Bind extension point, with transient failures retried in place (the pod
        stays assumed meanwhile); see :mod:`kubesched.scheduler.bindretry`."""
        policy = self.bind_retry
        attempt = 1
        while True:
            t0 = time.perf_counter()
            s = await fwk.run_bind(state, pod, node)
            self.metrics.extension_point("Bind", s, fwk.profile_name, time.perf_counter() - t0)
            if s is None:
                return None
            code = error_code(s)
            self.metrics.bind_request_errors.labels(code).inc()
            if attempt > 1 and assigned_node(s) == node:
                # An earlier attempt landed (it failed or timed out on our side only).
                log.info("pod %s: an earlier bind to %s succeeded (%s)", pod.key, node, s.message())
                return None
            if not is_transient(s) or attempt >= policy.attempts:
                return s
            delay = retry_delay(policy, attempt, s)
            log.warning(
                "pod %s: bind to %s failed (%s), retry %d in %.1f s",
                pod.key,
                node,
                s.message(),
                attempt,
                delay,
            )
            self.metrics.bind_retries.labels(code).inc()
            await asyncio.sleep(delay)
            attempt += 1

    async def _binding_cycle(
        self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, assumed: Pod, cycle: int
    ) -> None:
        t0 = time.perf_counter()
        s = fwk.run_pre_bind_pre_flights(state, assumed, assumed.node_name)
        self.metrics.extension_point(
            "PreBindPreFlight", s, fwk.profile_name, time.perf_counter() - t0
        )
        if s is not None and s.code == Code.ERROR:
            fwk.reject_waiting_pod(assumed.uid, s.plugin, s.message())
        else:
            if s is None or fwk.will_wait_on_permit(assumed):
                await self._nominate_expected(assumed)
            s = await fwk.wait_on_permit(assumed)
        self._binding += 1
        try:
            await self._bind_cycle_after_permit(fwk, state, qpi, assumed, cycle, s)
        finally:
            self._binding -= 1
            if self._binding < MAX_BINDS_IN_FLIGHT:
                self._bind_room.set()
            self.bound_once.set()

    async def _nominate_expected(self, assumed: Pod) -> None:
        """kube-scheduler 1.37's NominatedNodeNameForExpectation (beta, on): a pod that
        waits at Permit or whose PreBind has work (volumes to bind, claims to write) gets
        ``status.nominatedNodeName`` set to its node first, so that the cluster autoscaler
        sees it is about to land there and adds no node for it. The API server clears it
        at the bind. A failure is logged; the binding goes on."""
        node = assumed.node_name
        if assumed.nominated_node_name == node:
            return
        try:
            await self.cluster.patch_pod_status(assumed, nominated_node_name=node)
        except NotFound:
            pass
        except Exception as e:
            log.warning("pod %s: nominatedNodeName %s not set: %s", assumed.key, node, e)

    async def _bind_cycle_after_permit(
        self,
        fwk: Framework,
        state: CycleState,
        qpi: QueuedPodInfo,
        assumed: Pod,
        cycle: int,
        s: Status | None,
    ) -> None:
        node = assumed.node_name
        point = "Permit"
        if s is None:
            point, t0 = "PreBind", time.perf_counter()
            s = await fwk.run_pre_bind(state, assumed, node)
            self.metrics.extension_point(point, s, fwk.profile_name, time.perf_counter() - t0)
        if s is None:
            point = "Bind"
            s = await self._bind(fwk, state, assumed, node)
        if s is not None:
            self.metrics.bind_errors.labels(point, fwk.profile_name).inc()
            fwk.run_unreserve(state, assumed, node)
            self.cache.forget_pod(assumed)
            self.queues.move_all_to_active_or_backoff(ASSIGNED_POD_DELETE, assumed, None)
            if point == "Permit":
                s = one_node_rejection(assumed, node, s)
            if isinstance(s.error, NotFound) or (point == "Bind" and isinstance(s.error, Conflict)):
                # The pod is gone, or (409 at Bind: "already assigned") someone else bound
                # it -- another replica's last binds during a failover: the watch brings
                # its node. Nothing to requeue; only the vanished pod gets an event.
                if isinstance(s.error, Conflict):
                    log.info("pod %s was bound by someone else: %s", assumed.key, s.error)
                elif point == "Bind":
                    # Deleted between its cycle and its bind. kube-scheduler still records
                    # FailedScheduling (the Event outlives the pod): say why it never ran.
                    log.info("pod %s was deleted before its bind: %s", assumed.key, s.error)
                    self._spawn(self._report_gone(fwk, assumed, s.message()))
                self.stats.outcomes.pop(assumed.uid, None)
                self._attempt_start.pop(assumed.uid, None)
                return
            self._fail(fwk, qpi, s, cycle)
            return
        self.cache.finish_binding(assumed)
        self.nominator.delete(assumed)
        self.stats.scheduled += 1
        self.stats.last_bind = time.perf_counter()
        self.metrics.attempt("scheduled", fwk.profile_name, self._attempt_seconds(assumed.uid))
        first = qpi.initial_attempt_timestamp
        self.metrics.scheduled(
            qpi.attempts,
            None if first is None else asyncio.get_running_loop().time() - first,
            flushed=qpi.flushed,
        )
        self.stats.outcomes[assumed.uid] = PodOutcome(node, "Scheduled", "", qpi.attempts)
        t0 = time.perf_counter()
        fwk.run_post_bind(state, assumed, node)
        # kube-scheduler records PostBind as a success always, plugins or none
        self.metrics.extension_point("PostBind", None, fwk.profile_name, time.perf_counter() - t0)
        with contextlib.suppress(NotFound):
            await self.cluster.record_event(
                assumed,
                event_type="Normal",
                reason="Scheduled",
                action="Binding",
                message=f"Successfully assigned {assumed.key} to {node}",
                reporting_controller=fwk.profile_name,
            )


def _preemption_ran(fwk: Framework, s: Status | None) -> bool:
    """Whether DefaultPreemption's PostFilter ran (kube-scheduler counts
    ``scheduler_preemption_attempts_total`` in it): it is in the chain, and no plugin
    before it ended the phase (succeeded, or said UnschedulableAndUnresolvable or Error)."""
    names = [p.name for p in fwk.chain.post_filter]
    if "DefaultPreemption" not in names:
        return False
    if s is None or s.code in (Code.SUCCESS, Code.UNSCHEDULABLE) or s.plugin not in names:
        return True
    return names.index(s.plugin) >= names.index("DefaultPreemption")
