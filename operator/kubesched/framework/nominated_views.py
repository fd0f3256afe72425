"""A node as Filter's first pass sees it: with the pods nominated there added.

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
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.types import Pod

__all__ = ["NominatedViews"]


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
