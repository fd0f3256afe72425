"""The nominator: pods nominated to a node (preemptors waiting for their victims to go).

Filter treats their requests as taken on that node for pods of lower or equal
priority, so later cycles do not steal the room preemption made.
"""

from __future__ import annotations

import heapq

from kubesched.framework.types import Pod

__all__ = ["Nominator"]


class Nominator:
    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, Pod]] = {}
        self._node_of: dict[str, str] = {}
        self._top: dict[str, tuple[int, int | None]] = {}
        """node -> the two highest priorities nominated there (the second None for one
        pod), made when asked and dropped when the node's nominations change."""

    def add(self, pod: Pod, node_name: str = "") -> None:
        """Nominate ``pod`` to ``node_name`` (or to its status.nominatedNodeName)."""
        node = node_name or pod.nominated_node_name
        self.delete(pod)
        if not node:
            return
        self._by_node.setdefault(node, {})[pod.uid] = pod
        self._node_of[pod.uid] = node
        self._top.pop(node, None)

    def update(self, old: Pod, new: Pod) -> None:
        # An update where neither version has nominatedNodeName keeps an in-memory
        # nomination made by this scheduler (its status patch may not have landed yet);
        # one that removes the field removes the nomination (kube's updateNominatedPod).
        keep = not new.node_name and not old.nominated_node_name
        node = new.nominated_node_name or (self._node_of.get(new.uid, "") if keep else "")
        self.add(new, node)

    def delete(self, pod: Pod) -> None:
        node = self._node_of.pop(pod.uid, None)
        if node is None:
            return
        pods = self._by_node.get(node)
        self._top.pop(node, None)
        if pods is not None:
            pods.pop(pod.uid, None)
            if not pods:
                del self._by_node[node]

    def nominated_pods_for_node(self, node_name: str) -> list[Pod]:
        pods = self._by_node.get(node_name)
        return list(pods.values()) if pods else []

    def nominated_node(self, uid: str) -> str:
        return self._node_of.get(uid, "")

    def nodes(self) -> list[str]:
        return list(self._by_node)

    def nodes_for(self, priority: int, uid: str) -> list[str]:
        """Nodes where a pod other than ``uid`` is nominated at ``priority`` or above: those
        whose room a pod of that priority must leave (Filter's first pass)."""
        out = []
        top_of = self._top
        for node, pods in self._by_node.items():
            top = top_of.get(node)
            if top is None:
                ranked = heapq.nlargest(2, (p.priority for p in pods.values()))
                top = top_of[node] = (ranked[0], ranked[1] if len(ranked) > 1 else None)
            first, second = top
            own = pods.get(uid)
            # The best of the others: the second if the pod itself holds the first place.
            best = second if own is not None and own.priority == first else first
            if best is not None and best >= priority:
                out.append(node)
        return out
