"""Filter with nominated pods: kube-scheduler's two passes, and the node as the first one
sees it, with the pods nominated there added.

On a node that holds pods nominated at the incoming pod's priority or above (preemptors
waiting for their victims to go), kube-scheduler runs Filter twice: with them added (they
will land there), then without them (they may not); the first pass's failure is the
answer, and an AddPod that fails on one of them is an Error. :class:`NominatedFilter` is
that, for one :class:`~kubesched.framework.runtime.Framework`.

kube-scheduler's first Filter pass on a node that holds nominated pods (of the incoming
pod's priority or above) runs on a copy of the node with those pods added, and on a copy
of the cycle state that every PreFilter extension's AddPod has updated. Once many
preemptors wait nominated for their victims to go, every cycle makes that copy on every
such node, and making it cost more than the Filter calls on it.

Two facts let most of that go:

- The copy of the node depends only on the node (its pods, as ``generation`` tells) and on
  the pods added. :class:`NominatedViews` keeps the last one per node and hands it out
  again while both are unchanged; Filter plugins only read a NodeInfo.
- The copy of the state differs from the state only by what AddPod wrote. When no PreFilter
  extension runs this cycle (none configured, or their PreFilter said Skip, as
  InterPodAffinity, PodTopologySpread and VolumeRestrictions do for a pod they have
  nothing to check), the state itself is what the first pass would read.

And on a node every vector Filter mask of the cycle passed, the pass without the nominated
pods needs only the plugins with no mask, and the pass with them can skip the masked
plugins that read only the Node object (``filter_reads_node_only``): the pods added do not
change their answer. There, the first plugin the first pass runs may answer from the
node's figures with the nominated pods counted in (``filter_as_if``: NodeResourcesFit),
without the copy: its rejection is the pass's answer, as Filter on the copy would give it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from kubesched.framework.cycle_state import CycleState, StateKey
from kubesched.framework.interface import FilterAsIf, FilterPlugin
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod

if TYPE_CHECKING:
    from kubesched.framework.runtime import Framework

__all__ = ["NominatedFilter", "NominatedViews"]

_MASKED_NODE_FILTERS: StateKey[frozenset[str]] = StateKey("framework/masked-node-filters")
"""What the first pass on a node every mask passed skips."""


_LEAD_AS_IF: StateKey[tuple[FilterAsIf | None]] = StateKey("framework/lead-filter-as-if")
"""What :meth:`NominatedFilter._lead_as_if` found this cycle."""


def _named(plugin: str, as_if: FilterAsIf) -> FilterAsIf:
    """``as_if`` whose rejection carries the plugin's name, as the Filter phase returns it."""

    def call(*args: Any) -> Status | None:
        st = as_if(*args)
        if st is None or st.code == Code.SUCCESS:
            return None
        return st if st.plugin == plugin else st.with_plugin(plugin)

    return call


class NominatedViews:
    """Per node name: (the node it was made from, that node's generation then, the pods
    added, the view). A view is made again when any of the three changed; entries of
    nodes that hold no nominated pod any more go once the table has doubled since it was
    last swept (``nominated_nodes``: the nodes that hold some now)."""

    __slots__ = ("_nominated_nodes", "_sweep_at", "_views")

    def __init__(self, nominated_nodes: Callable[[], Sequence[str]]) -> None:
        self._views: dict[str, tuple[NodeInfo, int, Sequence[Pod], NodeInfo]] = {}
        self._nominated_nodes = nominated_nodes
        self._sweep_at = 64

    def view(self, node_info: NodeInfo, pods: Sequence[Pod]) -> NodeInfo:
        """``node_info`` with ``pods`` added; to be read, never changed."""
        hit = self._views.get(node_info.name)
        if (
            hit is not None
            and hit[0] is node_info
            and hit[1] == node_info.generation
            and len(hit[2]) == len(pods)
            and all(a is b for a, b in zip(hit[2], pods, strict=True))
        ):
            return hit[3]
        out = node_info.clone()
        for p in pods:
            out.add_pod(p)
        self._views[node_info.name] = (node_info, node_info.generation, pods, out)
        if len(self._views) > self._sweep_at:
            self._sweep()
        return out

    def _sweep(self) -> None:
        keep = set(self._nominated_nodes())
        self._views = {n: v for n, v in self._views.items() if n in keep}
        self._sweep_at = max(64, 2 * len(self._views))

    def __len__(self) -> int:
        return len(self._views)


class NominatedFilter:
    """The two passes for one framework (its plugins, its nominator)."""

    __slots__ = ("_fwk", "views")

    def __init__(self, fwk: Framework) -> None:
        self._fwk = fwk
        self.views = NominatedViews(lambda: fwk.services.nominated_nodes())

    def two_passes(
        self,
        state: CycleState,
        pod: Pod,
        node_info: NodeInfo,
        scalar: Sequence[FilterPlugin] | None = None,
    ) -> Status | None:
        """Filter on the node with, then without, the nominated pods. ``scalar``: the node
        passed every vector mask of this cycle, and these are the plugins with none."""
        fwk = self._fwk
        nominated = self.to_add(pod, node_info)
        if nominated:
            if self._extensions_run(state):
                _, state_n, info_n, error = self.add(state, pod, node_info, nominated)
                if error is not None:
                    return error
            else:
                if scalar is not None:
                    lead = self._lead_as_if(state, scalar)
                    if lead is not None:
                        try:
                            first = lead(state, pod, node_info, (), nominated)
                        except Exception:  # the long way answers it
                            first = None
                        if first is not None:
                            return first
                state_n, info_n = state, self.views.view(node_info, nominated)
            skip = None if scalar is None else self._masked_node_filters(state, scalar)
            status = fwk.run_filter(state_n, pod, info_n, skip)
            if status is not None:
                return status
        if scalar is None:
            return fwk.run_filter(state, pod, node_info)
        return fwk.run_scalar_filters(scalar, state, pod, node_info)

    def to_add(self, pod: Pod, node_info: NodeInfo) -> list[Pod]:
        """The pods nominated to the node that ``pod`` must leave room for."""
        return [
            p
            for p in self._fwk.nominated_pods_for_node(node_info.name)
            if p.priority >= pod.priority and p.uid != pod.uid
        ]

    def add(
        self, state: CycleState, pod: Pod, node_info: NodeInfo, nominated: list[Pod]
    ) -> tuple[bool, CycleState, NodeInfo, Status | None]:
        """Clones of ``state`` and ``node_info`` with ``nominated`` added, each followed by
        the PreFilter extensions' AddPod (True); the originals if there is none to add, or
        with the Error of an AddPod that failed (False)."""
        if not nominated:
            return False, state, node_info, None
        state_out = state.clone()
        info_out = node_info.clone()
        for p in nominated:
            info_out.add_pod(p)
            s = self._fwk.run_pre_filter_extension_add_pod(state_out, pod, p, info_out)
            if s is not None:
                return False, state, node_info, s
        return True, state_out, info_out, None

    def _extensions_run(self, state: CycleState) -> bool:
        """Would an AddPod run this cycle?"""
        return bool(self._fwk.pre_filter_extensions_of(state))

    def _lead_as_if(self, state: CycleState, scalar: Sequence[FilterPlugin]) -> FilterAsIf | None:
        """On a node every mask passed, the first pass runs first the first Filter plugin
        not in :meth:`_masked_node_filters`: its ``filter_as_if`` (the node with the
        nominated pods added, without the copy), whose rejection is then the pass's
        answer; None when it has none. Asked once per cycle."""
        known = state.get(_LEAD_AS_IF)
        if known is None:
            skip = self._masked_node_filters(state, scalar)
            lead = next((p for p in self._fwk.chain_for(state).filter if p.name not in skip), None)
            as_if = None if lead is None else getattr(lead, "filter_as_if", None)
            known = (None,) if as_if is None else (_named(lead.name, as_if),)  # type: ignore[union-attr]
            state.write(_LEAD_AS_IF, known)
        return known[0]

    def _masked_node_filters(
        self, state: CycleState, scalar: Sequence[FilterPlugin]
    ) -> frozenset[str]:
        """PreFilter's skip set and the plugins that read only the Node object and had a
        mask this cycle (not in ``scalar``; asked once per cycle: the scan's ``scalar``
        is the cycle's)."""
        known = state.get(_MASKED_NODE_FILTERS)
        if known is None:
            unmasked = {p.name for p in scalar}
            known = frozenset(state.skip_filter_plugins).union(
                p.name
                for p in self._fwk.chain_for(state).filter
                if p.name not in unmasked and getattr(p, "filter_reads_node_only", False)
            )
            state.write(_MASKED_NODE_FILTERS, known)
        return known
