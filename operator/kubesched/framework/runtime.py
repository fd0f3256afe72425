"""The Framework: one compiled profile's plugin chain and the code that runs it.

It runs each extension point in configured order with kube-scheduler's rules (skip
sets from PreFilter/PreScore, first failing Filter wins, weighted normalized scores,
Reserve rolled back by Unreserve in reverse order, Permit waits with per-plugin
timeouts). It is also the :class:`Handle` its plugins receive.

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
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from kubesched.framework.cluster_port import ClusterPort, ObjectStore
from kubesched.framework.cycle_state import CycleState, StateKey
from kubesched.framework.interface import (
    MAX_NODE_SCORE,
    BindPlugin,
    ClusterEventWithHint,
    FilterPlugin,
    PermitPlugin,
    PostBindPlugin,
    PostFilterPlugin,
    PostFilterResult,
    PreBindPlugin,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    QueueSortPlugin,
    ReservePlugin,
    ScorePlugin,
    VectorFilterPlugin,
    VectorScorePlugin,
)
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.nominated import NominatedFilter
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.framework.waiting import WaitingPodImpl

__all__ = ["Framework", "FrameworkServices", "PluginChain"]

_PRE_FILTER_EXTENSIONS: StateKey[tuple[tuple[str, PreFilterExtensions], ...]] = StateKey(
    "framework/pre-filter-extensions"
)


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
            {p.name: p if isinstance(p, VectorFilterPlugin) else None for p in chain.filter},
            {p.name: p if isinstance(p, VectorScorePlugin) else None for p, _ in chain.score},
        )


class Framework:
    """A compiled profile. Plugins are created by :meth:`kubesched.profiles` code and
    attached with :meth:`set_chain`; the framework is their handle."""

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

    # -- PreFilter / Filter -------------------------------------------------------------------
    def has_filter_plugins(self) -> bool:
        return bool(self.chain.filter)

    def run_pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None, list[str]]:
        """Returns (merged result, first failure, plugins that narrowed the node set)."""
        result: PreFilterResult | None = None
        narrowing: list[str] = []
        unschedulable: Status | None = None
        skip = state.skip_filter_plugins
        for p in self.chain_for(state).pre_filter:
            try:
                r, s = p.pre_filter(state, pod, nodes)
            except Exception as e:  # a plugin bug must not crash the loop
                return None, Status.as_error(e, plugin=p.name), narrowing
            if s is not None:
                if s.code == Code.SKIP:
                    skip.add(p.name)
                    continue
                if s.code == Code.UNSCHEDULABLE:
                    # Like kube-scheduler, the remaining PreFilters still run: preemption
                    # needs their cycle state (kubernetes/kubernetes#119770).
                    unschedulable = s.with_plugin(p.name)
                    continue
                if s.code != Code.SUCCESS:
                    return None, s.with_plugin(p.name), narrowing
            if r is not None and r.node_names is not None:
                narrowing.append(p.name)
                result = r if result is None else result.merge(r)
                if not result.node_names:
                    names = sorted(narrowing)
                    msg = (
                        f"node(s) didn't satisfy plugin {names[0]}"
                        if len(names) == 1
                        else f"node(s) didn't satisfy plugin(s) {go_list(names)} simultaneously"
                    )
                    return result, Status.unresolvable(msg, plugin=p.name), narrowing
        return result, unschedulable, narrowing

    def run_filter(
        self,
        state: CycleState,
        pod: Pod,
        node_info: NodeInfo,
        skip: Collection[str] | None = None,
    ) -> Status | None:
        """All Filter plugins on one node but those in ``skip`` (default: those PreFilter
        said to skip); the first failure is returned."""
        chain = self._runnable(state).chain
        return self.run_scalar_filters(
            chain.filter, state, pod, node_info, state.skip_filter_plugins if skip is None else skip
        )

    def skip_with_node_filters(self, state: CycleState) -> frozenset[str]:
        return frozenset(state.skip_filter_plugins).union(
            p.name
            for p in self._runnable(state).chain.filter
            if getattr(p, "filter_reads_node_only", False)
        )

    def filter_masks(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> tuple[npt.NDArray[np.bool_] | None, list[FilterPlugin], dict[str, npt.NDArray[np.bool_]]]:
        """Vector filters over every node: (AND of masks or None, scalar-only plugins,
        per-plugin masks for diagnosis)."""
        combined: npt.NDArray[np.bool_] | None = None
        scalar: list[FilterPlugin] = []
        masks: dict[str, npt.NDArray[np.bool_]] = {}
        skip = state.skip_filter_plugins
        run = self._runnable(state)
        for p in run.chain.filter:
            if skip and p.name in skip:
                continue
            vector = run.vector_filter[p.name]
            m = vector.filter_mask(state, pod, snapshot) if vector is not None else None
            if m is None:
                scalar.append(p)
                continue
            masks[p.name] = m
            combined = m.copy() if combined is None else np.logical_and(combined, m, out=combined)
        return combined, scalar, masks

    def run_scalar_filters(
        self,
        plugins: Sequence[FilterPlugin],
        state: CycleState,
        pod: Pod,
        node_info: NodeInfo,
        skip: Collection[str] = (),
    ) -> Status | None:
        """``plugins``' Filter on one node, but those named in ``skip``; the first failure
        is returned (with the plugin's name), an exception as an Error status."""
        for p in plugins:
            if skip and p.name in skip:
                continue
            try:
                s: Status | None = p.filter(state, pod, node_info)
            except Exception as e:
                return Status.as_error(e, plugin=p.name)
            if s is not None and s.code != Code.SUCCESS:
                return s.with_plugin(p.name)
        return None

    def run_filter_plugins_with_nominated_pods(
        self, state: CycleState, pod: Pod, node_info: NodeInfo
    ) -> Status | None:
        """kube-scheduler's two passes: with nominated pods of equal or higher priority
        added to the node (they will land there), then without them (they may not)
        (:mod:`kubesched.framework.nominated`)."""
        return self._nominated.two_passes(state, pod, node_info)

    def run_nominated_passes_after_mask(
        self,
        state: CycleState,
        pod: Pod,
        node_info: NodeInfo,
        scalar: Sequence[FilterPlugin],
    ) -> Status | None:
        """The same on a node that every vector Filter mask of this cycle passed
        (``scalar``: the plugins with no mask), skipping what the masks already said."""
        return self._nominated.two_passes(state, pod, node_info, scalar)

    def add_nominated_pods(
        self, state: CycleState, pod: Pod, node_info: NodeInfo
    ) -> tuple[bool, CycleState, NodeInfo, Status | None]:
        """Clones of ``state`` and ``node_info`` with the pods nominated to the node at
        ``pod``'s priority or above added (True), or the originals (False: none, or a
        PreFilter extension's AddPod failed, whose failure is then the Error returned)."""
        return self._nominated.add(state, pod, node_info, self._nominated.to_add(pod, node_info))

    def run_pre_filter_extension_add_pod(
        self, state: CycleState, pod: Pod, pod_to_add: Pod, node_info: NodeInfo
    ) -> Status | None:
        return self._run_pre_filter_extensions("add_pod", state, pod, pod_to_add, node_info)

    def run_pre_filter_extension_remove_pod(
        self, state: CycleState, pod: Pod, pod_to_remove: Pod, node_info: NodeInfo
    ) -> Status | None:
        return self._run_pre_filter_extensions("remove_pod", state, pod, pod_to_remove, node_info)

    def pre_filter_extensions_of(
        self, state: CycleState
    ) -> tuple[tuple[str, PreFilterExtensions], ...]:
        """The AddPod/RemovePod extensions of the PreFilter plugins that ran (not skipped)
        this cycle, in order (the plain plugins: not timed). Found once per cycle:
        PreFilter's skip set does not change after it."""
        known = state.get(_PRE_FILTER_EXTENSIONS)
        if known is None:
            known = tuple(
                (p.name, ext)
                for p in self.chain.pre_filter
                if p.name not in state.skip_filter_plugins
                and (ext := p.pre_filter_extensions()) is not None
            )
            state.write(_PRE_FILTER_EXTENSIONS, known)
        return known

    def _run_pre_filter_extensions(
        self, method: str, state: CycleState, pod: Pod, other: Pod, node_info: NodeInfo
    ) -> Status | None:
        """AddPod/RemovePod of :meth:`pre_filter_extensions_of`. A failure is an Error, in
        kube's words: ``running AddPod on PreFilter plugin "X": <its message>``."""
        for name, ext in self.pre_filter_extensions_of(state):
            s: Status | None = getattr(ext, method)(state, pod, other, node_info)
            if s is not None and s.code != Code.SUCCESS:
                point = "AddPod" if method == "add_pod" else "RemovePod"
                return Status.as_error(
                    f'running {point} on PreFilter plugin "{name}": {s.message()}'
                )
        return None

    def run_post_filter(
        self, state: CycleState, pod: Pod, statuses: dict[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        """Runs PostFilter plugins until one succeeds (or says UnschedulableAndUnresolvable).
        On failure the result is the last one a rejecting plugin returned (e.g. an empty
        nomination from preemption, which clears the pod's nominatedNodeName)."""
        reasons: list[str] = []
        result: PostFilterResult | None = None
        for p in self.chain_for(state).post_filter:
            try:
                r, s = p.post_filter(state, pod, statuses)
            except Exception as e:
                return None, Status.as_error(e, plugin=p.name)
            if s is None or s.code == Code.SUCCESS:
                # The message stays: kube's FitError carries it (e.g. DefaultPreemption's
                # "preemption: found a potential placement for pod on node ...").
                return r, s
            if s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                return r, s.with_plugin(p.name)
            if s.code != Code.UNSCHEDULABLE:
                return None, s.with_plugin(p.name)
            if r is not None:
                result = r
            reasons.extend(s.reasons)
        return result, Status.unschedulable(*reasons) if reasons else Status.unschedulable()

    # -- PreScore / Score ------------------------------------------------------------------------
    def run_pre_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        for p in self.chain_for(state).pre_score:
            try:
                s: Status | None = p.pre_score(state, pod, nodes)
            except Exception as e:
                return Status.as_error(e, plugin=p.name)
            if s is None:
                continue
            if s.code == Code.SKIP:
                state.skip_score_plugins.add(p.name)
            elif s.code != Code.SUCCESS:
                return s.with_plugin(p.name)
        return None

    def run_score(
        self,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        rows: npt.NDArray[np.intp],
    ) -> tuple[npt.NDArray[np.int64], dict[str, npt.NDArray[np.int64]], Status | None]:
        """Weighted, normalized total per feasible row and per-plugin weighted scores."""
        raw, s = self.run_raw_score(state, pod, snapshot, rows)
        if s is not None:
            return np.zeros(len(rows), dtype=np.int64), {}, s
        return self.normalize_scores(state, pod, raw, len(rows))

    def run_raw_score(
        self,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        rows: npt.NDArray[np.intp],
        *,
        scalar: bool = False,
    ) -> tuple[dict[str, npt.NDArray[np.int64]], Status | None]:
        """Each non-skipped Score plugin's scores of ``rows``, before normalization.
        ``scalar``: per-node ``score`` even where a vector form exists (cheaper for a
        few rows; the two agree, as the property tests pin)."""
        raw: dict[str, npt.NDArray[np.int64]] = {}
        infos = snapshot.node_infos
        skip = state.skip_score_plugins
        run = self._runnable(state)
        for p, _ in run.chain.score:
            if skip and p.name in skip:
                continue
            vector = None if scalar else run.vector_score[p.name]
            try:
                scores = (
                    vector.score_vector(state, pod, snapshot, rows) if vector is not None else None
                )
                if scores is None:
                    out = np.empty(len(rows), dtype=np.int64)
                    for j, r in enumerate(rows):
                        v, s = p.score(state, pod, infos[r])
                        if s is not None and s.code != Code.SUCCESS:
                            return raw, s.with_plugin(p.name)
                        out[j] = v
                    scores = out
                else:
                    scores = np.asarray(scores, dtype=np.int64)
            except Exception as e:
                return raw, Status.as_error(e, plugin=p.name)
            raw[p.name] = scores
        return raw, None

    def normalize_scores(
        self, state: CycleState, pod: Pod, raw: dict[str, npt.NDArray[np.int64]], n: int
    ) -> tuple[npt.NDArray[np.int64], dict[str, npt.NDArray[np.int64]], Status | None]:
        """NormalizeScore (in place on ``raw``'s arrays), range check and weights: the
        total per row and each plugin's weighted scores."""
        total = np.zeros(n, dtype=np.int64)
        per_plugin: dict[str, npt.NDArray[np.int64]] = {}
        for p, weight in self.chain_for(state).score:
            scores = raw.get(p.name)
            if scores is None:
                continue
            normalize = getattr(p, "normalize_score", None)
            if normalize is not None:
                try:
                    s = normalize(state, pod, scores)
                except Exception as e:
                    return total, per_plugin, Status.as_error(e, plugin=p.name)
                if s is not None and s.code != Code.SUCCESS:
                    return total, per_plugin, s.with_plugin(p.name)
            if len(scores) and (scores.max() > MAX_NODE_SCORE or scores.min() < 0):
                bad = int(scores.max()) if scores.max() > MAX_NODE_SCORE else int(scores.min())
                return (
                    total,
                    per_plugin,
                    Status.as_error(
                        f'plugin "{p.name}" returns an invalid score {bad}, it should in the '
                        f"range of [0, {MAX_NODE_SCORE}] after normalizing",
                        plugin=p.name,
                    ),
                )
            weighted = scores * weight
            per_plugin[p.name] = weighted
            total += weighted
        return total, per_plugin, None

    # -- Reserve / Permit ---------------------------------------------------------------------------
    def run_reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        for p in self.chain_for(state).reserve:
            try:
                s: Status | None = p.reserve(state, pod, node_name)
            except Exception as e:
                return Status.as_error(e, plugin=p.name)
            if s is not None and s.code != Code.SUCCESS:
                return s.with_plugin(p.name)
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
                return Status.as_error(e, plugin=p.name)
            if s is None or s.code == Code.SUCCESS:
                continue
            if s.code == Code.WAIT:
                timeouts[p.name] = max(0.0, float(timeout))
                continue
            return s.with_plugin(p.name)
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
            return await wp.wait()
        finally:
            self.waiting_pods.pop(pod.uid, None)

    # -- binding cycle ------------------------------------------------------------------------------
    async def run_pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        for p in self.chain.pre_bind:
            try:
                s: Status | None = await p.pre_bind(state, pod, node_name)
            except Exception as e:
                return Status.as_error(e, plugin=p.name)
            if s is not None and s.code not in (Code.SUCCESS, Code.SKIP):
                return s.with_plugin(p.name)
        return None

    async def run_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        if not self.chain.bind:
            return Status.as_error("no bind plugin is enabled")
        for p in self.chain.bind:
            try:
                s: Status | None = await p.bind(state, pod, node_name)
            except Exception as e:
                return Status.as_error(e, plugin=p.name)
            if s is not None and s.code == Code.SKIP:
                continue
            return None if s is None or s.code == Code.SUCCESS else s.with_plugin(p.name)
        return Status.as_error("every bind plugin skipped the pod")

    def run_post_bind(self, state: CycleState, pod: Pod, node_name: str) -> None:
        for p in self.chain.post_bind:
            with contextlib.suppress(Exception):
                p.post_bind(state, pod, node_name)


def _plugins_list(names: list[str]) -> str:
    return "[" + ", ".join(names) + "]"


def go_list(names: Iterable[str]) -> str:
    """A list of names as Go's ``%v`` prints a ``[]string``: ``[A B]`` (kube's messages)."""
    return "[" + " ".join(names) + "]"
