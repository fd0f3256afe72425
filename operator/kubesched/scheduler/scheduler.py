"""The scheduling loop: serial scheduling cycles, concurrent binding cycles.

``schedule_one`` is synchronous from pop to Permit (the snapshot cannot change under
it); the binding cycle (WaitOnPermit, PreBind, Bind, PostBind) runs as an asyncio task
so a slow API server never stalls the next cycle. Failures anywhere run Unreserve,
forget the assumed pod and requeue it, as kube-scheduler does; a transient Bind failure
(429, 5xx, timeout) is first retried in place (:mod:`kubesched.scheduler.bindretry`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import time
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from kubesched.api.profile import ProfileSpec
from kubesched.backend.cache import Cache
from kubesched.backend.nominator import Nominator
from kubesched.backend.queue import SchedulingQueue
from kubesched.backend.queue_set import QueueSet
from kubesched.framework.cluster_port import (
    ClusterPort,
    Conflict,
    NotFound,
    ObjectStore,
    PodCondition,
)
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ActionType, ClusterEvent, EventResource
from kubesched.framework.nodeinfo import QueuedPodInfo
from kubesched.framework.registry import Registry
from kubesched.framework.runtime import Framework, FrameworkServices
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.profiles import CompiledProfile, compile_profile, default_profile_spec
from kubesched.scheduler.algorithm import Algorithm, FitError, StatusError
from kubesched.scheduler.batch import BatchMetrics, OpportunisticBatch
from kubesched.scheduler.bindretry import (
    BindRetryPolicy,
    assigned_node,
    error_code,
    is_transient,
    retry_delay,
)
from kubesched.scheduler.gang_cycle import GangCycle
from kubesched.scheduler.metrics import SchedulerMetrics, status_label

__all__ = ["PodOutcome", "Scheduler"]

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
    status: str = "Pending"  # Scheduled | Unschedulable | Waiting | Pending
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


def _arrival(qpi: QueuedPodInfo) -> tuple[float, int]:
    return (qpi.timestamp, qpi.seq)


class Scheduler:
    def __init__(
        self,
        cluster: ClusterPort,
        store: ObjectStore | None = None,
        *,
        profiles: Sequence[ProfileSpec] | None = None,
        registry: Registry | None = None,
        seed: int | None = None,
        metrics: SchedulerMetrics | None = None,
        opportunistic_batching: bool = True,
    ) -> None:
        self.cluster = cluster
        self.store = store
        self.cache = Cache()
        self.nominator = Nominator()
        self.queues = QueueSet()
        self.algorithm = Algorithm(random.Random(seed))
        self.profiles: dict[str, CompiledProfile] = {}
        self.stats = Stats()
        self._tasks: set[asyncio.Task[Any]] = set()
        self._binding = 0
        """Binding cycles past Permit (PreBind, Bind, the Event): see MAX_BINDS_IN_FLIGHT."""
        self._bind_room = asyncio.Event()
        self.bound_once = asyncio.Event()
        """Set when the first binding cycle past Permit ends (bound or not): ``run``
        opens the watches that can wait once the first bind is out (operator/run.py)."""
        self.unscheduled: dict[str, Pod] = {}
        """Pods this scheduler serves that exist and are not assigned (latest versions)."""
        self.unserved: dict[str, Pod] = {}
        """Unassigned pods whose schedulerName no profile serves (yet): a profile added
        later for that name picks them up."""
        self._wake = asyncio.Event()
        self.registry = registry
        self.metrics = metrics or SchedulerMetrics()
        """Prometheus metrics (``self.metrics.registry`` is what /metrics serves)."""
        self.metrics.watch_queues(self.queues)
        self.algorithm.on_extension_point = self.metrics.extension_point
        self._attempt_start: dict[str, float] = {}
        self.opportunistic_batching = opportunistic_batching
        """kube-scheduler's OpportunisticBatching feature gate (on by default since 1.35):
        reuse a pod's Filter/Score work for the next pod of the same signature
        (:mod:`kubesched.scheduler.batch`)."""
        self._batch_metrics = BatchMetrics(self.metrics.registry)
        self._batches: dict[str, OpportunisticBatch] = {}
        self._cycle_count = 0
        self.bind_retry = BindRetryPolicy()
        """Transient Bind failures retried in place (:mod:`kubesched.scheduler.bindretry`)."""
        self.gangs = GangCycle(self)
        """Whole-group cycles for gangs below their minimum (:mod:`.gang_cycle`)."""
        for spec in profiles or [default_profile_spec()]:
            self.set_profile(compile_profile(spec, self.services(), registry))

    # -- profiles --------------------------------------------------------------------------------
    def services(self) -> FrameworkServices:
        return FrameworkServices(
            cluster=self.cluster,
            store=self.store,
            snapshot=lambda: self.cache.snapshot,
            activate=self._activate,
            nominated_pods_for_node=self.nominator.nominated_pods_for_node,
            nominated_nodes=self.nominator.nodes,
            nominated_nodes_for=self.nominator.nodes_for,
            rng=self.algorithm.rng,
            get_pod=self._get_pod,
            record_plugin=self._record_plugin,
        )

    def _record_plugin(self, plugin: str, point: str, status: Status | None, sec: float) -> None:
        self.metrics.plugin(plugin, point, status_label(status), sec)

    def _get_pod(self, uid: str) -> Pod | None:
        return self.unscheduled.get(uid) or self.cache.get_pod(uid)

    def set_profile(self, profile: CompiledProfile) -> None:
        """Install or swap a profile between cycles. Its queue keeps the pods it holds
        (in their order, with their attempt counts), and pods that waited for a profile
        of this name join it. Pods in a binding cycle finish with the chain that started
        them (a pod waiting at Permit too); if that fails they are requeued here."""
        fwk = profile.framework
        chain = fwk.chain
        spec = profile.spec
        name = spec.scheduler_name
        old = self.queues.queue(name)
        queue_sort = chain.queue_sort
        if queue_sort is None:  # compile_profile never builds such a chain
            raise ValueError(f"profile {name!r} has no queueSort plugin")
        q = SchedulingQueue(
            sort_key=getattr(queue_sort, "sort_key", None),
            less=queue_sort.less,
            pre_enqueue=chain.pre_enqueue,
            events=fwk.events,
            initial_backoff=spec.backoff.initial_seconds,
            max_backoff=spec.backoff.max_seconds,
            max_unschedulable_duration=spec.backoff.max_unschedulable_seconds,
        )
        if old is not None:
            self.queues.remove_queue(name)
            pending = sorted((qpi for qpi, _ in old.pending_pods()), key=_arrival)
            for qpi in pending:
                q.add(qpi.pod)
                moved = q.get(qpi.pod.uid)
                if moved is not None:
                    moved.attempts = qpi.attempts
                    moved.initial_attempt_timestamp = qpi.initial_attempt_timestamp
            old.close()
        self.queues.add_queue(name, q)
        self.profiles[name] = profile
        waiting = [p for p in self.unserved.values() if p.scheduler_name == name]
        for pod in sorted(waiting, key=lambda p: (p.creation_timestamp or "", p.uid)):
            del self.unserved[pod.uid]
            self.unscheduled[pod.uid] = pod
            if pod.nominated_node_name:
                self.nominator.add(pod)
            q.add(pod)

    def remove_profile(self, name: str) -> None:
        """Stop scheduling pods of schedulerName ``name``. Its pods stay pending,
        untouched (no event, no status change); a later profile of that name picks them
        up. Pods in a binding cycle (or waiting at Permit) finish it."""
        old = self.queues.remove_queue(name)
        self.profiles.pop(name, None)
        if old is not None:
            old.close()
        for uid, pod in list(self.unscheduled.items()):
            if pod.scheduler_name == name:
                del self.unscheduled[uid]
                self.unserved[uid] = pod
                self.nominator.delete(pod)

    def framework_for(self, pod: Pod) -> Framework | None:
        p = self.profiles.get(pod.scheduler_name)
        return p.framework if p is not None else None

    def responsible_for(self, pod: Pod) -> bool:
        return pod.scheduler_name in self.profiles

    def _activate(self, pods: Iterable[Pod]) -> None:
        pods = list(pods)
        for q in self.queues.queues().values():
            q.activate(pods)

    # -- the loop ----------------------------------------------------------------------------------
    async def _room_to_bind(self) -> None:
        """Until fewer than :data:`MAX_BINDS_IN_FLIGHT` binding cycles are past Permit."""
        while self._binding >= MAX_BINDS_IN_FLIGHT:
            self._bind_room.clear()
            await self._bind_room.wait()

    async def run(self) -> None:
        """Schedule until cancelled."""
        qtask = asyncio.create_task(self.queues.run())
        try:
            while True:
                await self._room_to_bind()
                name, qpi = await self.queues.pop()
                self.schedule_one(name, qpi)
                await asyncio.sleep(0)
        finally:
            qtask.cancel()
            await asyncio.gather(qtask, return_exceptions=True)

    async def run_until_idle(self) -> None:
        """Schedule until nothing is left to do: no pod active or backing off, no binding
        or write in flight, no pod waiting at Permit (the simulator's driver)."""
        qtask = asyncio.create_task(self.queues.run())
        try:
            while True:
                await self._room_to_bind()
                item = self.queues.pop_nowait()
                if item is not None:
                    self.schedule_one(*item)
                    await asyncio.sleep(0)
                    continue
                if self.idle():
                    return
                pop = asyncio.ensure_future(self.queues.pop())
                self._wake.clear()
                wake = asyncio.ensure_future(self._wake.wait())
                await asyncio.wait({pop, wake}, return_when=asyncio.FIRST_COMPLETED)
                wake.cancel()
                if pop.done():
                    self.schedule_one(*pop.result())
                else:
                    pop.cancel()
                    await asyncio.gather(pop, return_exceptions=True)
        finally:
            qtask.cancel()
            await asyncio.gather(qtask, return_exceptions=True)

    def idle(self) -> bool:
        return not self._tasks and all(q.idle() for q in self.queues.queues().values())

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

    # -- one scheduling cycle ------------------------------------------------------------------------
    def schedule_one(self, profile_name: str, qpi: QueuedPodInfo) -> None:
        if self.gangs.schedule(profile_name, qpi):
            self._cycle_count += 1  # a gang's cycle between two pods ends their batch
            return  # a gang member: its whole gang was scheduled as one unit
        queue = self.queues.queue(profile_name)
        prof = self.profiles.get(profile_name)
        pod = qpi.pod
        if queue is None or prof is None:
            return
        fwk = prof.framework
        try:
            if pod.deletion_timestamp or self.cache.is_assumed(pod.uid):
                return
            start = time.perf_counter()
            self._attempt_start[pod.uid] = start
            batch = self._batch(fwk, pod)
            if self.stats.first_cycle is None:
                self.stats.first_cycle = start
            cycle = queue.scheduling_cycle()
            state = CycleState()
            state.record_plugin_metrics = self.metrics.sample_cycle()
            snap = self.cache.update_snapshot()
            try:
                result = self.algorithm.schedule_pod(fwk, state, pod, snap, batch)
                self.metrics.scheduling_algorithm_duration.observe(time.perf_counter() - start)
            except FitError as e:
                if batch is not None:
                    batch.finish(False)
                self._post_filter_and_fail(fwk, state, qpi, e, cycle)
                return
            except StatusError as e:
                if batch is not None:
                    batch.finish(False)
                self._fail(fwk, qpi, e.status, cycle)
                return
            assumed = pod.assigned_to(result.node_name)
            self.cache.assume_pod(assumed)
            t0 = time.perf_counter()
            s = fwk.run_reserve(state, assumed, result.node_name)
            t1 = time.perf_counter()
            self.metrics.extension_point("Reserve", s, fwk.profile_name, t1 - t0)
            if s is None:
                s = fwk.run_permit(state, assumed, result.node_name)
                self.metrics.extension_point(
                    "Permit", s, fwk.profile_name, time.perf_counter() - t1
                )
            if batch is not None:
                batch.finish(s is None or s.is_wait())
            if s is not None and not s.is_wait():
                fwk.run_unreserve(state, assumed, result.node_name)
                self.cache.forget_pod(assumed)
                self._fail(fwk, qpi, s, cycle)
                return
            if s is not None:
                self.stats.outcomes[pod.uid] = PodOutcome(
                    result.node_name, "Waiting", s.message(), qpi.attempts
                )
            self._spawn(self._binding_cycle(fwk, state, qpi, assumed, cycle))
        finally:
            queue.done(pod.uid)

    def _batch(self, fwk: Framework, pod: Pod) -> OpportunisticBatch | None:
        """The profile's batch, begun for this cycle (None: batching is off)."""
        if not self.opportunistic_batching:
            return None
        batch = self._batches.get(fwk.profile_name)
        if batch is None:
            batch = OpportunisticBatch(fwk.profile_name, self._batch_metrics)
            self._batches[fwk.profile_name] = batch
        self._cycle_count += 1
        batch.begin(fwk, pod, self._cycle_count)
        return batch

    def _attempt_seconds(self, uid: str) -> float:
        start = self._attempt_start.pop(uid, None)
        return 0.0 if start is None else time.perf_counter() - start

    def _post_filter_and_fail(
        self, fwk: Framework, state: CycleState, qpi: QueuedPodInfo, err: FitError, cycle: int
    ) -> None:
        diag = err.diagnosis
        nominated: str | None = None
        if fwk.chain.post_filter and not diag.pre_filter_msg.startswith("no nodes"):
            t0 = time.perf_counter()
            res, s = fwk.run_post_filter(state, qpi.pod, diag.node_to_status)
            self.metrics.extension_point(
                "PostFilter", s, fwk.profile_name, time.perf_counter() - t0
            )
            if any(p.name == "DefaultPreemption" for p in fwk.chain.post_filter):
                self.metrics.preemption_attempts.inc()
            if s is not None and s.code == Code.ERROR:
                self._fail(fwk, qpi, s, cycle)
                return
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
        nominated_node: str | None = None,
    ) -> None:
        """kube-scheduler's handleSchedulingFailure: requeue, event, condition."""
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
            log.warning("error scheduling pod %s: %s", pod.key, msg)
        qpi.message = msg
        self.stats.outcomes[pod.uid] = PodOutcome(None, "Unschedulable", msg, qpi.attempts)
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

    async def _report_failure(
        self, fwk: Framework, pod: Pod, reason: str, msg: str, nominated_node: str | None
    ) -> None:
        try:
            await self.cluster.record_event(
                pod,
                event_type="Warning",
                reason="FailedScheduling",
                action="Scheduling",
                message=msg,
                reporting_controller=fwk.profile_name,
            )
            await self.cluster.patch_pod_status(
                pod,
                condition=PodCondition("PodScheduled", "False", reason, msg),
                nominated_node_name=nominated_node,
            )
        except NotFound:
            pass

    async def _report_gone(self, fwk: Framework, pod: Pod, msg: str) -> None:
        with contextlib.suppress(NotFound):
            await self.cluster.record_event(
                pod,
                event_type="Warning",
                reason="FailedScheduling",
                action="Scheduling",
                message=msg,
                reporting_controller=fwk.profile_name,
            )

    # -- binding cycle ----------------------------------------------------------------------------------
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
        s = await fwk.wait_on_permit(assumed)
        self._binding += 1
        try:
            await self._bind_cycle_after_permit(fwk, state, qpi, assumed, cycle, s)
        finally:
            self._binding -= 1
            if self._binding < MAX_BINDS_IN_FLIGHT:
                self._bind_room.set()
            self.bound_once.set()

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
            if point == "Bind" and not isinstance(s.error, NotFound | Conflict):
                # kube-scheduler's message for a failed bind (handleBindingCycleError)
                s = Status(
                    s.code, f"Binding rejected: {s.message()}", plugin=s.plugin, error=s.error
                )
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
                    self._spawn(self._report_gone(fwk, assumed, f"Binding rejected: {s.message()}"))
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
        )
        self.stats.outcomes[assumed.uid] = PodOutcome(node, "Scheduled", "", qpi.attempts)
        fwk.run_post_bind(state, assumed, node)
        with contextlib.suppress(NotFound):
            await self.cluster.record_event(
                assumed,
                event_type="Normal",
                reason="Scheduled",
                action="Binding",
                message=f"Successfully assigned {assumed.key} to {node}",
                reporting_controller=fwk.profile_name,
            )
