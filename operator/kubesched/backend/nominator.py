"""The nominator: pods nominated to a node (preemptors waiting for their victims to go).

Filter treats their requests as taken on that node for pods of lower or equal
priority, so later cycles do not steal the room preemption made.
"""

from __future__ import annotations

from kubesched.framework.types import Pod

__all__ = ["Nominator"]


class Nominator:
    def __init__(self) -> None:
        self._by_node: dict[str, dict[str, Pod]] = {}
        self._node_of: dict[str, str] = {}

    def add(self, pod: Pod, node_name: str = "") -> None:
        """Nominate ``pod`` to ``node_name`` (or to its status.nominatedNodeName)."""
        node = node_name or pod.nominated_node_name
        self.delete(pod)
        if not node:
            return
        self._by_node.setdefault(node, {})[pod.uid] = pod
        self._node_of[pod.uid] = node

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
