"""The Framework: one compiled profile's plugin chain and the code that runs it.

It runs each extension point in configured order with kube-scheduler's rules (skip
sets from PreFilter/PreScore, first failing Filter wins, weighted normalized scores,
Reserve rolled back by Unreserve in reverse order, Permit waits with per-plugin
timeouts). It is also the :class:`Handle` its plugins receive. This module owns the
chain (:class:`PluginChain`), what the scheduler gives a framework
(:class:`FrameworkServices`), the Handle, Reserve/Permit and the binding cycle; the
Filter phase (PreFilter, Filter, PostFilter) is :mod:`kubesched.framework.filter_phase`,
the Score phase (PreScore, Score, NormalizeScore, weights) is
:mod:`kubesched.framework.score_phase`, both mixed into :class:`Framework`.

A framework built for a scheduler holds its plugins twice: the plain chain, and the same
plugins wrapped with a stopwatch (:mod:`kubesched.framework.instrumented`), both built
once when the profile is compiled. Each run of an extension point picks one from the
cycle's sampling decision (``CycleState.record_plugin_metrics``): the ~10 % sampled
cycles run the wrapped plugins and record each call's duration; every other cycle,
preemption's dry runs in it included (they run on clones of the cycle's state, which keep
the decision), calls the plain plugins with no wrapper in between. :attr:`Framework.chain`
is the plain chain (names, listings, plugin hooks outside the extension points);
:meth:`Framework.chain_for` is the cycle's choice.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from kubesched.framework.cluster_port import ClusterPort, ObjectStore
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.filter_phase import FilterPhase
from kubesched.framework.implements import implements
from kubesched.framework.interface import (
    BindPlugin,
    ClusterEventWithHint,
    FilterPlugin,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterPlugin,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
    VectorFilterPlugin,
    VectorScorePlugin,
)
from kubesched.framework.nominated import NominatedFilter
from kubesched.framework.score_phase import ScorePhase
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status, plugin_error
from kubesched.framework.types import Pod
from kubesched.framework.waiting import PodInPreBind, WaitingPodImpl

__all__ = ["Framework", "FrameworkServices", "PluginChain"]


@dataclass(slots=True)
class PluginChain:
    """Resolved plugins per extension point, in order (what a profile compiles into).
    Each field holds its point's Protocol, so only a plugin mypy knows implements the
    point can be put there (the profile compiler narrows with ``isinstance`` once)."""

    queue_sort: QueueSortPlugin | None = None
    pre_enqueue: list[PreEnqueuePlugin] = field(default_factory=list)
    pre_filter: list[PreFilterPlugin] = field(default_factory=list)
    filter: list[FilterPlugin] = field(default_factory=list)
    post_filter: list[PostFilterPlugin] = field(default_factory=list)
    pre_score: list[PreScorePlugin] = field(default_factory=list)
    score: list[tuple[ScorePlugin, int]] = field(default_factory=list)
    reserve: list[ReservePlugin] = field(default_factory=list)
    permit: list[PermitPlugin] = field(default_factory=list)
    pre_bind: list[PreBindPlugin] = field(default_factory=list)
    bind: list[BindPlugin] = field(default_factory=list)
    post_bind: list[PostBindPlugin] = field(default_factory=list)

    def names(self) -> dict[str, list[str]]:
        """Extension point -> plugin names (weights as ``name:weight`` for score)."""
        out: dict[str, list[str]] = {}
        if self.queue_sort is not None:
            out["queueSort"] = [self.queue_sort.name]
        for point in (
            "pre_enqueue",
            "pre_filter",
            "filter",
            "post_filter",
            "pre_score",
            "reserve",
            "permit",
            "pre_bind",
            "bind",
            "post_bind",
        ):
            plugins = getattr(self, point)
            if plugins:
                camel = point.split("_")[0] + "".join(w.title() for w in point.split("_")[1:])
                out[camel] = [p.name for p in plugins]
        if self.score:
            out["score"] = [f"{p.name}:{w}" for p, w in self.score]
        return out


class FrameworkServices:
    """What the scheduler gives a framework: the cluster, the store, the snapshot and
    callbacks into the queue and nominator. Defaults make a framework usable alone
    (tests, `validate`)."""

    def __init__(
        self,
        *,
        cluster: ClusterPort | None = None,
        store: ObjectStore | None = None,
        snapshot: Callable[[], Snapshot] | None = None,
        activate: Callable[[Iterable[Pod]], None] | None = None,
        nominated_pods_for_node: Callable[[str], list[Pod]] | None = None,
        nominated_nodes: Callable[[], list[str]] | None = None,
        nominated_nodes_for: Callable[[int, str], list[str]] | None = None,
        clock: Callable[[], float] | None = None,
        rng: random.Random | None = None,
        get_pod: Callable[[str], Pod | None] | None = None,
        record_plugin: Callable[[str, str, Status | None, float], None] | None = None,
        preemption_victims: Callable[[int], None] | None = None,
    ) -> None:
        self.cluster = cluster
        self.store = store
        self.snapshot = snapshot or (lambda: Snapshot())
        self.activate = activate or (lambda pods: None)
        self.nominated_pods_for_node = nominated_pods_for_node or (lambda name: [])
        self.nominated_nodes = nominated_nodes or (lambda: [])
        self.nominated_nodes_for = nominated_nodes_for or self._nominated_nodes_for
        """(priority, uid) -> nodes where another pod is nominated at that priority or
        above (the nominator answers it without going over every nominated pod)."""
        self.clock = clock or (lambda: asyncio.get_running_loop().time())
        self.rng = rng or random.Random()
        """The scheduler's seeded random source (preemption's dry-run offset)."""
        self.get_pod = get_pod or (lambda uid: None)
        """uid -> the latest version of a pod the scheduler knows (Handle.get_pod)."""
        self.record_plugin = record_plugin
        """Where sampled cycles report each plugin call's duration; when set, the
        profile compiles an instrumented copy of its chain, which the framework runs in
        sampled cycles only (:mod:`kubesched.framework.instrumented`)."""
        self.preemption_victims = preemption_victims or (lambda count: None)
        """Where a preemption reports how many victims it chose (the
        ``scheduler_preemption_victims`` histogram)."""

    def _nominated_nodes_for(self, priority: int, uid: str) -> list[str]:
        return [
            n
            for n in self.nominated_nodes()
            if any(p.priority >= priority and p.uid != uid for p in self.nominated_pods_for_node(n))
        ]


@dataclass(frozen=True, slots=True)
class _Runnable:
    """A chain and the lookups its runs read per cycle."""

    chain: PluginChain
    vector_filter: dict[str, VectorFilterPlugin | None]
    """Filter plugin name -> the plugin if it also filters vectors."""
    vector_score: dict[str, VectorScorePlugin | None]
    """Score plugin name -> the plugin if it also scores vectors."""

    @classmethod
    def of(cls, chain: PluginChain) -> _Runnable:
        return cls(
            chain,
            {p.name: p if implements(p, VectorFilterPlugin) else None for p in chain.filter},
            {p.name: p if implements(p, VectorScorePlugin) else None for p, _ in chain.score},
        )


class Framework(FilterPhase, ScorePhase):
    """A compiled profile. Plugins are created by :meth:`kubesched.profiles` code and
    attached with :meth:`set_chain`; the framework is their handle. Its Filter and Score
    phases are mixed in (:class:`FilterPhase`, :class:`ScorePhase`)."""

    def __init__(
        self,
        profile_name: str,
        services: FrameworkServices | None = None,
        *,
        percentage_of_nodes_to_score: int | None = None,
    ) -> None:
        self.profile_name_ = profile_name
        self.services = services or FrameworkServices()
        self.percentage_of_nodes_to_score = percentage_of_nodes_to_score
        self.chain = PluginChain()
        """The plain plugins: what the profile lists, and what unsampled cycles run."""
        self.events: dict[str, list[ClusterEventWithHint]] = {}
        self.waiting_pods: dict[str, WaitingPodImpl] = {}
        self.pods_in_pre_bind: dict[str, PodInPreBind] = {}
        """Pods whose PreBind plugins are running, by uid (preemption cancels them)."""
        self._plain = _Runnable.of(self.chain)
        self._timed = self._plain
        """What sampled cycles run: the instrumented chain, or the plain one if none."""
        self._nominated = NominatedFilter(self)

    def set_chain(
        self,
        chain: PluginChain,
        events: dict[str, list[ClusterEventWithHint]],
        *,
        timed: PluginChain | None = None,
    ) -> None:
        """Attach the profile's plugins; ``timed`` is the same plugins instrumented,
        run instead of ``chain`` in sampled cycles (None: sampled cycles run ``chain``)."""
        self.chain = chain
        self.events = events
        self._plain = _Runnable.of(chain)
        self._timed = self._plain if timed is None else _Runnable.of(timed)

    def chain_for(self, state: CycleState) -> PluginChain:
        """The chain this cycle runs: instrumented if ``state`` is sampled, else plain."""
        return self._runnable(state).chain

    def _runnable(self, state: CycleState) -> _Runnable:
        return self._timed if state.record_plugin_metrics else self._plain

    # -- Handle -------------------------------------------------------------------------------
    @property
    def snapshot(self) -> Snapshot:
        return self.services.snapshot()

    @property
    def cluster(self) -> ClusterPort:
        if self.services.cluster is None:
            raise RuntimeError("this framework is not connected to a cluster")
        return self.services.cluster

    @property
    def store(self) -> ObjectStore:
        if self.services.store is None:
            raise RuntimeError("this framework has no object store")
        return self.services.store

    @property
    def profile_name(self) -> str:
        return self.profile_name_

    def now(self) -> float:
        return self.services.clock()

    @property
    def rng(self) -> random.Random:
        return self.services.rng

    def get_waiting_pod(self, uid: str) -> WaitingPodImpl | None:
        return self.waiting_pods.get(uid)

    def get_pod_in_pre_bind(self, uid: str) -> PodInPreBind | None:
        return self.pods_in_pre_bind.get(uid)

    def iterate_waiting_pods(self) -> list[WaitingPodImpl]:
        return list(self.waiting_pods.values())

    def reject_waiting_pod(self, uid: str, plugin: str = "", message: str = "removed") -> bool:
        wp = self.waiting_pods.get(uid)
        if wp is None:
            return False
        wp.reject(plugin, message)
        return True

    def activate(self, pods: Iterable[Pod]) -> None:
        self.services.activate(pods)

    def nominated_pods_for_node(self, node_name: str) -> list[Pod]:
        return self.services.nominated_pods_for_node(node_name)

    def get_pod(self, uid: str) -> Pod | None:
        return self.services.get_pod(uid)

    def observe_preemption_victims(self, count: int) -> None:
        self.services.preemption_victims(count)

    # -- Reserve / Permit ---------------------------------------------------------------------------
    def run_reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        for p in self.chain_for(state).reserve:
            try:
                s: Status | None = p.reserve(state, pod, node_name)
            except Exception as e:
                return plugin_error("Reserve", p.name, Status.as_error(e))
            if s is not None and s.code != Code.SUCCESS:
                if s.is_rejected():
                    return s.with_plugin(p.name)
                return plugin_error("Reserve", p.name, s)
        return None

    def run_unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for p in reversed(self.chain_for(state).reserve):
            with contextlib.suppress(Exception):
                p.unreserve(state, pod, node_name)

    def run_permit(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """Success (None), a rejection, or Wait (the pod is then a waiting pod)."""
        timeouts: dict[str, float] = {}
        for p in self.chain_for(state).permit:
            try:
                res: tuple[Status | None, float] = p.permit(state, pod, node_name)
                s, timeout = res
            except Exception as e:
                return plugin_error("Permit", p.name, Status.as_error(e))
            if s is None or s.code == Code.SUCCESS:
                continue
            if s.code == Code.WAIT:
                timeouts[p.name] = max(0.0, float(timeout))
                continue
            if s.is_rejected():
                return s.with_plugin(p.name)
            return plugin_error("Permit", p.name, s)
        if timeouts:
            self.waiting_pods[pod.uid] = WaitingPodImpl(
                pod, node_name, timeouts, self._forget_waiting
            )
            return Status.wait(f"waiting on permit plugin(s) {_plugins_list(list(timeouts))}")
        return None

    def _forget_waiting(self, uid: str) -> None:
        self.waiting_pods.pop(uid, None)

    async def wait_on_permit(self, pod: Pod) -> Status | None:
        wp = self.waiting_pods.get(pod.uid)
        if wp is None:
            return None
        try:
            s = await wp.wait()
        finally:
            self.waiting_pods.pop(pod.uid, None)
        if s is None or s.is_rejected():
            return s
        # kube's WaitOnPermit: anything but a rejection (preemption's) is an error
        return Status.as_error(f"waiting on permit for pod: {s.message()}", plugin=s.plugin)

    def will_wait_on_permit(self, pod: Pod) -> bool:
        """Whether ``pod`` is held at Permit (kube's WillWaitOnPermit)."""
        return pod.uid in self.waiting_pods

    # -- binding cycle ------------------------------------------------------------------------------
    def run_pre_bind_pre_flights(
        self, state: CycleState, pod: Pod, node_name: str
    ) -> Status | None:
        """kube's RunPreBindPreFlights: None when a PreBind plugin will do something for
        the pod on ``node_name`` (bind volumes, write claims), Skip when none will, an
        Error (``running PreBindPreFlight "X": ...``) when one failed to say."""
        result: Status | None = Status.skip()
        for p in self.chain.pre_bind:
            pre_flight = getattr(p, "pre_bind_pre_flight", None)  # PreBindPreFlightPlugin
            if pre_flight is None:
                result = None
                continue
            try:
                s: Status | None = pre_flight(state, pod, node_name)
            except Exception as e:
                s = Status.as_error(e)
            if s is None or s.code == Code.SUCCESS:
                result = None
            elif s.code != Code.SKIP:
                return Status.as_error(
                    f'running PreBindPreFlight "{p.name}": {s.message()}', plugin=p.name
                )
        return result

    async def run_pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """PreBind, the pod held in :attr:`pods_in_pre_bind` meanwhile: cancelled there by
        preemption, it fails with kube's cause (``preempted by DefaultPreemption``)."""
        entry = self.pods_in_pre_bind[pod.uid] = PodInPreBind()
        try:
            s = await self._run_pre_bind_plugins(state, pod, node_name)
        finally:
            self.pods_in_pre_bind.pop(pod.uid, None)
        if s is None and not entry.mark_prebound():
            return Status.as_error(entry.cause)
        return s

    async def _run_pre_bind_plugins(
        self, state: CycleState, pod: Pod, node_name: str
    ) -> Status | None:
        for p in self.chain.pre_bind:
            try:
                s: Status | None = await p.pre_bind(state, pod, node_name)
            except Exception as e:
                s = Status.as_error(e)
            if s is None or s.code in (Code.SUCCESS, Code.SKIP):
                continue
            if s.is_rejected():
                return s.with_plugin(p.name)
            return plugin_error("PreBind", p.name, s)
        return None

    async def run_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        if not self.chain.bind:
            return Status.as_error("no bind plugin is enabled")
        for p in self.chain.bind:
            try:
                s: Status | None = await p.bind(state, pod, node_name)
            except Exception as e:
                s = Status.as_error(e)
            if s is not None and s.code == Code.SKIP:
                continue
            return None if s is None or s.code == Code.SUCCESS else plugin_error("Bind", p.name, s)
        return Status.as_error("every bind plugin skipped the pod")

    def run_post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for p in self.chain.post_bind:
            with contextlib.suppress(Exception):
                p.post_bind(state, pod, node_name)


def _plugins_list(names: list[str]) -> str:
    return "[" + ", ".join(names) + "]"
