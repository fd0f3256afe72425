"""The per-cycle snapshot: nodes in scheduling order plus column arrays of their resources.

The cache owns one Snapshot and refreshes only the rows of nodes that changed since
the last cycle (their ``NodeInfo.generation`` moved); adding or removing a node
rebuilds the order. Vector plugins read the arrays; row ``i`` is ``node_infos[i]``.
A scheduling cycle is synchronous, so the snapshot cannot change under it.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from kubesched.framework.nodeinfo import NodeInfo, PodJournal
from kubesched.framework.types import Node

__all__ = ["Snapshot"]

I64 = npt.NDArray[np.int64]
BOOL = npt.NDArray[np.bool_]

_LABELS_VERSIONS = itertools.count(1)
"""Label versions are unique across Snapshot instances, so a plugin's memo keyed by one
can never be mistaken for another snapshot's."""

_COLUMNS = (
    "alloc_cpu",
    "alloc_mem",
    "alloc_eph",
    "alloc_pods",
    "req_cpu",
    "req_mem",
    "req_eph",
    "req_pods",
    "nz_cpu",
    "nz_mem",
    "node_generation",
)


class Snapshot:
    alloc_cpu: I64
    alloc_mem: I64
    alloc_eph: I64
    alloc_pods: I64
    req_cpu: I64
    req_mem: I64
    req_eph: I64
    req_pods: I64
    nz_cpu: I64
    nz_mem: I64
    node_generation: I64
    """Each row's ``NodeInfo.generation`` as of the last refresh: which nodes changed
    between two cycles (opportunistic batching reuses the others' scores)."""

    def __init__(self, node_infos: Sequence[NodeInfo] = ()) -> None:
        self.node_infos: list[NodeInfo] = []
        self.by_name: dict[str, NodeInfo] = {}
        self.scalar_alloc: dict[str, I64] = {}
        self.scalar_req: dict[str, I64] = {}
        self.unschedulable: BOOL = np.zeros(0, dtype=bool)
        self.hard_taints: BOOL = np.zeros(0, dtype=bool)
        """Rows whose node has a NoSchedule or NoExecute taint."""
        self.soft_taints: BOOL = np.zeros(0, dtype=bool)
        self.has_images: BOOL = np.zeros(0, dtype=bool)
        """Rows whose node reports container images (ImageLocality skips the others)."""
        """Rows whose node has a PreferNoSchedule taint."""
        self.generation = 0
        self._affinity_cache: tuple[int, list[NodeInfo], list[NodeInfo]] | None = None
        self._affinity_flags: dict[int, tuple[bool, bool]] = {}
        """Row -> (has pods with affinity, has pods with required anti-affinity): the
        lists above are rebuilt only when a row's membership changes."""
        self._affinity_rows = [0, 0]
        """How many rows hold each of the two flags (whether any does, without the lists)."""
        self.labels_version = next(_LABELS_VERSIONS)
        """Changes whenever the rows' nodes (names, order, labels) may have changed:
        on :meth:`rebuild` and when :meth:`refresh_row` sees another node object with
        different labels. Plugins memoise per-node label matches keyed by it."""
        self._row_nodes: list[Node | None] = []
        self.journal = PodJournal()
        """Pods added to and removed from this snapshot's NodeInfos (from the cache, or
        directly), in order: what per-domain counts kept across cycles catch up on.
        Only entries of a row's current NodeInfo count, and only while
        ``labels_version`` stays the same (a node relabelled, added or removed changes
        it: recount)."""
        self.rebuild(node_infos)

    def __len__(self) -> int:
        return len(self.node_infos)

    def get(self, name: str) -> NodeInfo | None:
        return self.by_name.get(name)

    # -- maintenance (the cache calls these) --------------------------------------------
    def rebuild(self, node_infos: Sequence[NodeInfo]) -> None:
        self._affinity_cache = None
        self._affinity_flags = {}
        self._affinity_rows = [0, 0]
        n = len(node_infos)
        self.node_infos = list(node_infos)
        self.by_name = {ni.name: ni for ni in self.node_infos}
        for col in _COLUMNS:
            setattr(self, col, np.zeros(n, dtype=np.int64))
        self.scalar_alloc = {}
        self.scalar_req = {}
        self.unschedulable = np.zeros(n, dtype=bool)
        self.hard_taints = np.zeros(n, dtype=bool)
        self.soft_taints = np.zeros(n, dtype=bool)
        self.has_images = np.zeros(n, dtype=bool)
        self._row_nodes = [None] * n
        for i, ni in enumerate(self.node_infos):
            ni.index = i
            ni.journal = self.journal
            self.refresh_row(ni)
        self.generation += 1
        self.labels_version = next(_LABELS_VERSIONS)

    def _scalar_column(self, table: dict[str, I64], name: str) -> I64:
        col = table.get(name)
        if col is None:
            col = table[name] = np.zeros(len(self.node_infos), dtype=np.int64)
        return col

    def refresh_row(self, ni: NodeInfo) -> None:
        i = ni.index
        node = ni.node
        assert node is not None, "only nodes that exist are in the snapshot"
        prev = self._row_nodes[i]
        if prev is not node:
            if prev is not None and prev.labels != node.labels:
                self.labels_version = next(_LABELS_VERSIONS)
            self._row_nodes[i] = node
        a = node.allocatable
        r = ni.requested
        self.alloc_cpu[i] = a.milli_cpu
        self.alloc_mem[i] = a.memory
        self.alloc_eph[i] = a.ephemeral_storage
        self.alloc_pods[i] = a.allowed_pods
        self.req_cpu[i] = r.milli_cpu
        self.req_mem[i] = r.memory
        self.req_eph[i] = r.ephemeral_storage
        self.req_pods[i] = len(ni.pods)
        self.nz_cpu[i] = ni.non_zero_requested.milli_cpu
        self.nz_mem[i] = ni.non_zero_requested.memory
        self.node_generation[i] = ni.generation
        for name, col in self.scalar_alloc.items():
            col[i] = a.scalar.get(name, 0)
        for name, amount in a.scalar.items():
            if name not in self.scalar_alloc:
                self._scalar_column(self.scalar_alloc, name)[i] = amount
        for name, col in self.scalar_req.items():
            col[i] = r.scalar.get(name, 0)
        for name, amount in r.scalar.items():
            if name not in self.scalar_req:
                self._scalar_column(self.scalar_req, name)[i] = amount
        self.unschedulable[i] = node.unschedulable
        hard = soft = False
        for t in node.taints:
            if t.effect == "PreferNoSchedule":
                soft = True
            else:
                hard = True
        self.hard_taints[i] = hard
        self.soft_taints[i] = soft
        self.has_images[i] = bool(ni.image_states)
        flags = (bool(ni.pods_with_affinity), bool(ni.pods_with_required_anti_affinity))
        was = self._affinity_flags.get(i)
        if was != flags:
            self._affinity_flags[i] = flags
            self._affinity_cache = None
            rows = self._affinity_rows
            for k in (0, 1):
                rows[k] += flags[k] - (was[k] if was is not None else False)

    # -- reads ------------------------------------------------------------------------------
    def scalar_allocatable(self, name: str) -> I64:
        col = self.scalar_alloc.get(name)
        return col if col is not None else np.zeros(len(self.node_infos), dtype=np.int64)

    def scalar_requested(self, name: str) -> I64:
        col = self.scalar_req.get(name)
        return col if col is not None else np.zeros(len(self.node_infos), dtype=np.int64)

    def _affinity_lists(self) -> tuple[list[NodeInfo], list[NodeInfo]]:
        c = self._affinity_cache
        if c is None:
            with_aff = [ni for ni in self.node_infos if ni.pods_with_affinity]
            with_anti = [ni for ni in self.node_infos if ni.pods_with_required_anti_affinity]
            c = self._affinity_cache = (self.generation, with_aff, with_anti)
        return c[1], c[2]

    def have_pods_with_affinity(self) -> list[NodeInfo]:
        return self._affinity_lists()[0]

    def any_pods_with_affinity(self) -> bool:
        """Whether :meth:`have_pods_with_affinity` has any (without listing them)."""
        return self._affinity_rows[0] > 0

    def any_pods_with_required_anti_affinity(self) -> bool:
        """Whether :meth:`have_pods_with_required_anti_affinity` has any."""
        return self._affinity_rows[1] > 0

    def have_pods_with_required_anti_affinity(self) -> list[NodeInfo]:
        return self._affinity_lists()[1]
