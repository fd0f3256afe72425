"""The scheduling loop: serial scheduling cycles, concurrent binding cycles.

``schedule_one`` is synchronous from pop to Permit (the snapshot cannot change under
it); the binding cycle (WaitOnPermit, PreBind, Bind, PostBind) runs as an asyncio task
so a slow API server never stalls the next cycle. Failures anywhere run Unreserve,
forget the assumed pod and requeue it, as kube-scheduler does; a transient Bind failure
(429, 5xx, timeout) is first retried in place (:mod:`kubesched.scheduler.bindretry`).
This module owns the loop, the profiles and the scheduling cycle up to Permit; the
binding cycle and the failure path are :mod:`kubesched.scheduler.binding_cycle`'s, and a
gang's whole-group cycle :mod:`kubesched.scheduler.gang_cycle`'s.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from kubesched.api.profile import ProfileSpec
from kubesched.backend.cache import Cache
from kubesched.backend.nominator import Nominator
from kubesched.backend.queue import SchedulingQueue
from kubesched.backend.queue_set import QueueSet
from kubesched.framework.cluster_port import (
    ClusterPort,
    ObjectStore,
)
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.nodeinfo import QueuedPodInfo
from kubesched.framework.registry import Registry
from kubesched.framework.runtime import Framework, FrameworkServices
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from kubesched.profiles import CompiledProfile, compile_profile, default_profile_spec
from kubesched.scheduler.algorithm import Algorithm, FitError, StatusError, one_node_rejection
from kubesched.scheduler.batch import BatchMetrics, OpportunisticBatch
from kubesched.scheduler.binding_cycle import BindingCycles, PodOutcome, Stats
from kubesched.scheduler.bindretry import (
    BindRetryPolicy,
)
from kubesched.scheduler.gang_cycle import GangCycle
from kubesched.scheduler.held_pods import HeldPods
from kubesched.scheduler.metrics import SchedulerMetrics, status_label

__all__ = ["Scheduler"]

log = logging.getLogger("kubesched.scheduler")

FIRST_BIND_WITHIN = 1.0
"""How long the start's held pods wait for a first bind past Permit before they are
queued anyway (``kubesched.scheduler.held_pods``)."""


def _arrival(qpi: QueuedPodInfo) -> tuple[float, int]:
    return (qpi.timestamp, qpi.seq)


class Scheduler(BindingCycles):
    """The scheduling loop and its profiles (the module docstring); the binding cycles
    and how an attempt ends are :class:`~kubesched.scheduler.binding_cycle.BindingCycles`'."""

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
        pop_from_backoff: bool = True,
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
        """Binding cycles past Permit (PreBind, Bind, the Event): see
        :data:`~kubesched.scheduler.binding_cycle.MAX_BINDS_IN_FLIGHT`."""
        self._bind_room = asyncio.Event()
        self.held: HeldPods | None = None
        """The pods the start holds back (:meth:`hold_pending`), queued once the first
        cycle is done, or before a profile changes; None when none are."""
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
        self._errors_logged: dict[str, str] = {}
        self.opportunistic_batching = opportunistic_batching
        """kube-scheduler's OpportunisticBatching feature gate (on by default since 1.35):
        reuse a pod's Filter/Score work for the next pod of the same signature
        (:mod:`kubesched.scheduler.batch`)."""
        self.pop_from_backoff = pop_from_backoff
        """kube-scheduler's SchedulerPopFromBackoffQ feature gate (on by default since
        1.33): with activeQ empty, a rejected pod is tried before its backoff is over
        (:mod:`kubesched.backend.queue_backoff`)."""
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
            preemption_victims=lambda count: self.metrics.preemption_victims.observe(count),
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
        self.release_held()
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
            pop_from_backoff=self.pop_from_backoff,
        )
        if old is not None:
            self.queues.remove_queue(name)
            pending = sorted((qpi for qpi, _ in old.pending_pods()), key=_arrival)
            for qpi in pending:
                q.add(qpi.pod)
                moved = q.get(qpi.pod.uid)
                if moved is not None:
                    moved.carry_over(qpi)
            old.close()
        # counted from here: the pods carried over entered a queue before the swap
        q.on_incoming = self.metrics.incoming
        # kube-scheduler records every run of PreEnqueue as a success (its status is
        # never read into the metric), under the pod's scheduler name
        q.pre_enqueue.observe = functools.partial(
            self.metrics.extension_point, "PreEnqueue", None, name
        )
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
        self.release_held()
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

    def hold_pending(self, deliver: Callable[[Mapping[str, Any]], None]) -> HeldPods:
        """Hold back the plain pending pods the start's listing delivers from now on
        (``kubesched.scheduler.held_pods``; ``deliver`` queues one as the listing would
        have), until :meth:`admit_held_heads` ends the listing and :meth:`release_held`
        the hold."""
        self.held = HeldPods(self, deliver)
        return self.held

    def admit_held_heads(self) -> None:
        """The listing is in: each queue gets the held pod it would pop first."""
        held = self.held
        if held is not None:
            held.admit_heads()
            if not held:
                self.release_held()

    def release_held(self) -> None:
        """Queue the pods the start holds back, if any (:attr:`held`; once)."""
        held, self.held = self.held, None
        if held is not None:
            held.release()

    async def run(self) -> None:
        """Schedule until cancelled."""
        qtask = asyncio.create_task(self.queues.run())
        try:
            while True:
                await self._room_to_bind()
                name, qpi = await self.queues.pop()
                self.schedule_one(name, qpi)
                await asyncio.sleep(0)
                if self.held is not None:
                    await self._release_after_first_cycle()
        finally:
            qtask.cancel()
            await asyncio.gather(qtask, return_exceptions=True)

    async def run_until_idle(self) -> None:
        """Schedule until nothing is left to do: no pod active or backing off, no binding
        or write in flight, no pod waiting at Permit (the simulator's driver)."""
        self.release_held()
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

    async def _release_after_first_cycle(self) -> None:
        """The held pods join their queues before the second pop; a first bind past
        Permit goes out first (its request is sent while the loop is free), so the
        fill does not delay it."""
        if self._binding:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(FIRST_BIND_WITHIN):
                    await self.bound_once.wait()
        self.release_held()

    def idle(self) -> bool:
        return not self._tasks and all(q.idle() for q in self.queues.queues().values())

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
            # kube's assume: an assumed pod no longer holds the node it was nominated to
            # (lower pods would otherwise find that node taken while it binds elsewhere)
            self.nominator.delete(pod)
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
                self._fail(fwk, qpi, one_node_rejection(pod, result.node_name, s), cycle)
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
