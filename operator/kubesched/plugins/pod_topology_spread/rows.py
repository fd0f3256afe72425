"""Per-node columns the plugin reuses across scheduling cycles.

kube-scheduler recounts matching pods on every node in every cycle. Here a column (the
domain of each node for a topology key, or the number of pods a selector matches on
each node) is kept per node list and refreshed only for nodes whose
``NodeInfo.generation`` moved since the column was last read: the cache bumps it on
every pod added, assumed, removed and on every node update. A new node list (the
snapshot was rebuilt because nodes came or went) starts afresh.

Columns are replaced, never written in place, so an array handed to a cycle's state
stays valid for that cycle.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

import numpy as np
import numpy.typing as npt

from kubesched.framework.labels import LabelSelector
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.plugins.pod_topology_spread.constraints import count_matching

__all__ = ["Domains", "Rows"]

I64 = npt.NDArray[np.int64]

MAX_COLUMNS = 128
"""Columns kept at most; the least recently used go first (pods with unique selectors,
e.g. from matchLabelKeys on a pod-template hash, must not grow memory without bound)."""


class Domains:
    """Topology values of one key: value <-> small integer id (ids only grow)."""

    __slots__ = ("ids", "values")

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.values: list[str] = []

    def id_of(self, value: str) -> int:
        i = self.ids.get(value)
        if i is None:
            i = self.ids[value] = len(self.values)
            self.values.append(value)
        return i


class _Column:
    __slots__ = ("data", "gens")

    def __init__(self, data: I64, gens: I64) -> None:
        self.data = data
        self.gens = gens


class Rows:
    def __init__(self) -> None:
        self._infos: Sequence[NodeInfo] | None = None
        self._gens: I64 = np.zeros(0, dtype=np.int64)
        self._cols: dict[Hashable, _Column] = {}
        self.domains: dict[str, Domains] = {}

    @property
    def infos(self) -> Sequence[NodeInfo] | None:
        return self._infos

    def sync(self, infos: Sequence[NodeInfo]) -> None:
        """Make ``infos`` the current node list and note each node's generation."""
        n = len(infos)
        gens = np.fromiter((ni.generation for ni in infos), dtype=np.int64, count=n)
        if infos is not self._infos or len(self._gens) != n:
            self._infos = infos
            self._cols.clear()
        self._gens = gens

    def _column(self, key: Hashable, fn: Callable[[NodeInfo], int]) -> I64:
        infos = self._infos
        assert infos is not None, "sync() first"
        col = self._cols.pop(key, None)
        if col is None:
            data = np.fromiter((fn(ni) for ni in infos), dtype=np.int64, count=len(infos))
            col = _Column(data, self._gens)
            if len(self._cols) >= MAX_COLUMNS:
                del self._cols[next(iter(self._cols))]
        elif col.gens is not self._gens:
            changed = np.flatnonzero(col.gens != self._gens)
            if len(changed):
                data = col.data.copy()
                for r in changed.tolist():
                    data[r] = fn(infos[r])
                col.data = data
            col.gens = self._gens
        self._cols[key] = col  # most recently used last
        return col.data

    def domain_ids(self, key: str) -> I64:
        """Per node: the id of its value for label ``key`` in ``self.domains[key]``, -1
        where the node lacks the label."""
        doms = self.domains.get(key)
        if doms is None:
            doms = self.domains[key] = Domains()
        d = doms

        def fn(ni: NodeInfo) -> int:
            node = ni.node
            if node is None:
                return -1
            v = node.labels.get(key)
            return -1 if v is None else d.id_of(v)

        return self._column(("key", key), fn)

    def pod_counts(self, namespace: str, sel_key: Hashable, selector: LabelSelector) -> I64:
        """Per node: pods in ``namespace`` (not terminating) that ``selector`` matches."""

        def fn(ni: NodeInfo) -> int:
            return count_matching(ni, selector, namespace)

        return self._column(("pods", namespace, sel_key), fn)

    def flags(self, key: Hashable, fn: Callable[[NodeInfo], int]) -> I64:
        """A per-node column of ``fn`` (which must depend on the NodeInfo alone)."""
        return self._column(("flag", key), fn)
