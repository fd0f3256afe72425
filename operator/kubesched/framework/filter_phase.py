"""The Filter phase of a :class:`~kubesched.framework.runtime.Framework`: PreFilter,
Filter and PostFilter, run with kube-scheduler's rules.

:class:`FilterPhase` is mixed into the Framework, which it runs on (its chain for the
cycle, its nominated-pods filter); it owns PreFilter's skip set and merged node set, the
per-node Filter (first failure wins) and the vector one (``filter_mask``, one call for all
nodes, ANDed), the two passes on nodes with nominated pods (through
:mod:`kubesched.framework.nominated`), PreFilter extensions' AddPod/RemovePod, and
PostFilter until one plugin succeeds. :func:`go_list` formats plugin names in kube's
messages.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from kubesched.framework.cycle_state import CycleState, StateKey
from kubesched.framework.interface import (
    FilterAsIf,
    FilterPlugin,
    PostFilterResult,
    PreFilterExtensions,
    PreFilterResult,
)
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status, plugin_error, wrap_error
from kubesched.framework.types import Pod

if TYPE_CHECKING:
    from kubesched.framework.nominated import NominatedFilter
    from kubesched.framework.runtime import PluginChain, _Runnable

__all__ = ["FilterPhase", "go_list"]

_REJECTION_CHECKS: StateKey[tuple[FilterAsIf, ...]] = StateKey("framework/rejection-checks")
"""The ``filter_as_if`` of the cycle's Filter plugins that PreFilter did not skip."""

_PRE_FILTER_EXTENSIONS: StateKey[tuple[tuple[str, PreFilterExtensions], ...]] = StateKey(
    "framework/pre-filter-extensions"
)


class FilterPhase:
    """PreFilter, Filter and PostFilter: methods of the Framework, which mixes them in."""

    if TYPE_CHECKING:  # what the Framework provides
        chain: PluginChain
        _nominated: NominatedFilter

        def chain_for(self, state: CycleState) -> PluginChain: ...

        def _runnable(self, state: CycleState) -> _Runnable: ...

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
                return None, plugin_error("PreFilter", p.name, Status.as_error(e)), narrowing
            if s is not None:
                if s.code == Code.SKIP:
                    skip.add(p.name)
                    continue
                if s.code == Code.UNSCHEDULABLE:
                    # Like kube-scheduler, the remaining PreFilters still run: preemption
                    # needs their cycle state (kubernetes/kubernetes#119770).
                    unschedulable = s.with_plugin(p.name)
                    continue
                if s.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE:
                    return None, s.with_plugin(p.name), narrowing
                if s.code != Code.SUCCESS:
                    return None, plugin_error("PreFilter", p.name, s), narrowing
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

    def filter_rejects_as_if(
        self, state: CycleState, pod: Pod, node_info: NodeInfo, removed: Sequence[Pod]
    ) -> bool:
        """True when Filter on ``node_info`` with ``removed`` (pods on it) taken off, and
        the pods nominated there at ``pod``'s priority or above put on, rejects ``pod``
        for certain: a Filter plugin PreFilter did not skip says so (``filter_as_if``).
        False when none can tell. Asked before a copy of the node is made."""
        checks = state.get(_REJECTION_CHECKS)
        if checks is None:
            skip = state.skip_filter_plugins
            checks = tuple(
                check
                for p in self.chain_for(state).filter
                if p.name not in skip and (check := getattr(p, "filter_as_if", None)) is not None
            )
            state.write(_REJECTION_CHECKS, checks)
        if not checks:
            return False
        added = self._nominated.to_add(pod, node_info)
        for check in checks:
            try:
                st = check(state, pod, node_info, removed, added)
            except Exception:  # cannot tell: the dry run answers it
                continue
            if st is not None and st.code != Code.SUCCESS:
                return True
        return False

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
        is returned (with the plugin's name). What is not a rejection (an error, an
        exception, a Skip) is an Error status worded as kube-scheduler's RunFilterPlugins
        words it: ``running "<plugin>" filter plugin: <error>``."""
        for p in plugins:
            if skip and p.name in skip:
                continue
            try:
                s: Status | None = p.filter(state, pod, node_info)
            except Exception as e:
                return _filter_error(p.name, Status.as_error(e))
            if s is not None and s.code != Code.SUCCESS:
                if not s.is_rejected():
                    return _filter_error(p.name, s)
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


def go_list(names: Iterable[str]) -> str:
    """A list of names as Go's ``%v`` prints a ``[]string``: ``[A B]`` (kube's messages)."""
    return "[" + " ".join(names) + "]"


def _filter_error(plugin: str, s: Status) -> Status:
    """A Filter plugin's status that is no rejection, as kube-scheduler words it."""
    return wrap_error(f'running "{plugin}" filter plugin', s, plugin)
