"""The scheduler cache: nodes, the pods on them, and assumed pods.

Pods are *assumed* on their chosen node at the end of a scheduling cycle so the next
cycle sees the resources as taken, long before the API server confirms the binding.
``finish_binding`` marks the bind call done; the watch event of the bound pod
*confirms* it (``add_pod``/``update_pod``); ``forget_pod`` undoes an assumption whose
binding failed.

Node order in the snapshot follows kube-scheduler's node tree: nodes are grouped by
zone (region + zone labels) and interleaved across zones, so the rotating start offset
of the Filter scan spreads candidates over zones.

Single-threaded (asyncio): no locks. The scheduling cycle is synchronous, so the
snapshot cannot change while a cycle reads it.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from kubesched.framework.nodeinfo import ImageState, NodeInfo
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import Node, Pod

__all__ = ["Cache", "CacheError"]

log = logging.getLogger(__name__)

ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")


class CacheError(RuntimeError):
    pass


def zone_key(node: Node) -> str:
    region = next((node.labels[k] for k in REGION_LABELS if k in node.labels), "")
    zone = next((node.labels[k] for k in ZONE_LABELS if k in node.labels), "")
    return f"{region}:\x00:{zone}" if region or zone else ""


@dataclass(slots=True)
class _PodState:
    pod: Pod
    assumed: bool = False
    binding_finished: bool = False


class Cache:
    def __init__(self) -> None:
        self._nodes: dict[str, NodeInfo] = {}
        self._pods: dict[str, _PodState] = {}
        self._zones: dict[str, list[str]] = {}
        self._images: dict[str, set[str]] = {}
        self._image_size: dict[str, int] = {}
        self._snapshot = Snapshot()
        self._structure_dirty = True
        self._dirty: set[str] = set()

    # -- nodes --------------------------------------------------------------------------------
    def add_node(self, node: Node) -> None:
        ni = self._nodes.get(node.name)
        if ni is None:
            ni = self._nodes[node.name] = NodeInfo(node)
        else:
            if ni.node is not None:
                self._remove_from_tree(ni.node)
                self._remove_images(ni.node)
            ni.node = node
            ni.generation += 1
        self._add_to_tree(node)
        self._add_images(node, ni)
        self._structure_dirty = True

    def update_node(self, old: Node | None, new: Node) -> None:
        ni = self._nodes.get(new.name)
        if ni is None or ni.node is None:
            self.add_node(new)
            return
        if zone_key(ni.node) != zone_key(new):
            self._remove_from_tree(ni.node)
            self._add_to_tree(new)
            self._structure_dirty = True
        self._remove_images(ni.node)
        ni.node = new
        self._add_images(new, ni)
        ni.generation += 1
        self._dirty.add(new.name)

    def remove_node(self, name: str) -> None:
        ni = self._nodes.get(name)
        if ni is None or ni.node is None:
            return
        self._remove_from_tree(ni.node)
        self._remove_images(ni.node)
        if ni.pods:
            # Pods may still be bound there (their deletion events come later): keep the
            # aggregates, but the node leaves the snapshot.
            ni.node = None
        else:
            del self._nodes[name]
        self._structure_dirty = True

    def _add_to_tree(self, node: Node) -> None:
        self._zones.setdefault(zone_key(node), []).append(node.name)

    def _remove_from_tree(self, node: Node) -> None:
        z = zone_key(node)
        names = self._zones.get(z)
        if names and node.name in names:
            names.remove(node.name)
            if not names:
                del self._zones[z]

    def _add_images(self, node: Node, ni: NodeInfo) -> None:
        states: dict[str, ImageState] = {}
        for names, size in node.images:
            for n in names:
                holders = self._images.setdefault(n, set())
                holders.add(node.name)
                # kube-scheduler's cache keeps one size per image name: the size the
                # first node holding it reported, until no node holds it any more
                # (addNodeImageStates); nodes reporting other sizes score with that one
                shared = self._image_size.setdefault(n, size)
                if n not in states:
                    states[n] = ImageState(shared, len(holders))
        ni.image_states = states
        # num_nodes of shared images changed on other nodes too: refresh lazily on read.
        for n in states:
            for other in self._images[n]:
                o = self._nodes.get(other)
                if o is not None and n in o.image_states:
                    o.image_states[n].num_nodes = len(self._images[n])

    def _remove_images(self, node: Node) -> None:
        for names, _ in node.images:
            for n in names:
                holders = self._images.get(n)
                if holders is None:
                    continue
                holders.discard(node.name)
                if not holders:
                    del self._images[n]
                    self._image_size.pop(n, None)
                    continue
                for other in holders:
                    o = self._nodes.get(other)
                    if o is not None and n in o.image_states:
                        o.image_states[n].num_nodes = len(holders)

    def node_tree_order(self) -> list[str]:
        """Node names interleaved across zones (kube-scheduler's nodeTree.list)."""
        zones = list(self._zones.values())
        out: list[str] = []
        i = 0
        while True:
            added = False
            for names in zones:
                if i < len(names):
                    out.append(names[i])
                    added = True
            if not added:
                return out
            i += 1

    # -- pods ----------------------------------------------------------------------------------
    def _info_for(self, node_name: str) -> NodeInfo:
        ni = self._nodes.get(node_name)
        if ni is None:
            # A pod bound to a node we have not seen yet: kube keeps a NodeInfo without node.
            ni = self._nodes[node_name] = NodeInfo(None, node_name)
        return ni

    def _add(self, pod: Pod) -> None:
        ni = self._info_for(pod.node_name)
        ni.add_pod(pod)
        if ni.node is not None:
            self._dirty.add(ni.name)

    def _remove(self, pod: Pod) -> None:
        ni = self._nodes.get(pod.node_name)
        if ni is None:
            return
        ni.remove_pod(pod)
        if ni.node is not None:
            self._dirty.add(ni.name)
        elif not ni.pods:
            del self._nodes[ni.name]

    def assume_pod(self, pod: Pod) -> None:
        """Account ``pod`` (with node_name set) on its node until the binding is confirmed."""
        if pod.uid in self._pods:
            raise CacheError(f"pod {pod.key} is already in the cache")
        self._add(pod)
        self._pods[pod.uid] = _PodState(pod, assumed=True)

    def finish_binding(self, pod: Pod) -> None:
        st = self._pods.get(pod.uid)
        if st is not None and st.assumed:
            st.binding_finished = True

    def forget_pod(self, pod: Pod) -> None:
        """Undo ``assume_pod`` (the binding failed)."""
        st = self._pods.get(pod.uid)
        if st is None or not st.assumed:
            return
        if st.pod.node_name != pod.node_name:
            raise CacheError(
                f"pod {pod.key} was assumed on {st.pod.node_name}, not {pod.node_name}"
            )
        self._remove(st.pod)
        del self._pods[pod.uid]

    def is_assumed(self, uid: str) -> bool:
        st = self._pods.get(uid)
        return st is not None and st.assumed

    def add_pod(self, pod: Pod) -> None:
        """An assigned pod arrived from the watch (confirms an assumed pod)."""
        st = self._pods.get(pod.uid)
        if st is not None:
            if st.assumed and st.pod.node_name != pod.node_name:
                log.warning(
                    "pod %s was assumed on %s but bound to %s",
                    pod.key,
                    st.pod.node_name,
                    pod.node_name,
                )
            self._remove(st.pod)
        self._add(pod)
        self._pods[pod.uid] = _PodState(pod)

    def update_pod(self, old: Pod | None, new: Pod) -> None:
        self.add_pod(new)

    def remove_pod(self, pod: Pod) -> None:
        st = self._pods.pop(pod.uid, None)
        if st is not None:
            self._remove(st.pod)

    def get_pod(self, uid: str) -> Pod | None:
        st = self._pods.get(uid)
        return st.pod if st is not None else None

    # -- reads ----------------------------------------------------------------------------------
    def node_count(self) -> int:
        return sum(1 for ni in self._nodes.values() if ni.node is not None)

    def pod_count(self) -> int:
        return len(self._pods)

    def node_info(self, name: str) -> NodeInfo | None:
        return self._nodes.get(name)

    def update_snapshot(self) -> Snapshot:
        """Bring the snapshot up to date: rows of changed nodes, or a rebuild when nodes
        were added or removed."""
        snap = self._snapshot
        if self._structure_dirty:
            snap.rebuild([self._nodes[n] for n in self.node_tree_order()])
            self._structure_dirty = False
            self._dirty.clear()
        elif self._dirty:
            for name in self._dirty:
                ni = self._nodes.get(name)
                if ni is not None and ni.node is not None and ni.index >= 0:
                    snap.refresh_row(ni)
            self._dirty.clear()
            snap.generation += 1
        return snap

    @property
    def snapshot(self) -> Snapshot:
        return self._snapshot

    def node_infos(self) -> list[NodeInfo]:
        """Every NodeInfo, including those kept only for pods on a deleted node."""
        return list(self._nodes.values())

    def assumed_pods(self) -> list[tuple[Pod, bool]]:
        """Pods assumed and not yet confirmed by the watch, with ``binding_finished``."""
        return [(st.pod, st.binding_finished) for st in self._pods.values() if st.assumed]

    def dump(self) -> dict[str, list[str]]:
        """node -> pod keys (for consistency checks against the API server)."""
        return {name: sorted(p.key for p in ni.pods) for name, ni in self._nodes.items()}
