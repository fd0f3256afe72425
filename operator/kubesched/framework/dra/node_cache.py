"""What the allocators keep per node from one pod to the next, and the answer Filter
gives nodes whose devices look alike.

- ``PoolCache``: each node's pools (``gather_pools``), kept while the slice list and the
  node are the same objects (the list is compared by identity: its owner hands out the
  same list while no slice changed), with the slices indexed by node once per list.
  ``gather_pools`` was about a sixth of DynamicResources' Filter under scheduler_perf's
  DRA workload, and its answer changes only with them.
- ``NodeShape``: what the search sees of a node's pools but their names, one object per
  distinct shape (equal shapes are the same object while the slice list lasts).
- ``Outcomes``: Filter's answer per (claims, shape, devices in use), for one allocator
  (one pod). Whether a node can take the claims depends on its pools (their devices,
  counters, node selection, in order), on which of their devices are in use, and on the
  claims and classes; not on the node's or the pools' names (a device's identity only
  says whether it is in use; CEL sees the driver and the device, never its pool). So a
  node alike one already searched gets that answer, and only the node picked is searched
  again, to build its results. Alike means the same parsed objects: slices sharing a
  parsed body (:mod:`.slice_bodies`) have the same device list, so its ``id`` stands for
  its content while the cache holds the slices.

Never compared (the node is searched): pools with per-device node selection (the node
decides which devices count), pools whose devices are shared with consumed capacity
(what is left of a device is not a name). A search that raises (a CEL error, invalid
pools, ...) is not kept: the next node alike raises the same on its own.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kubesched.framework.dra.pools import NodeLike, Pool
from kubesched.framework.dra.state import AllocatedState
from kubesched.framework.dra.types import ResourceClaim, ResourceSlice

__all__ = ["NodePools", "NodeShape", "OutcomeKey", "Outcomes", "PoolCache", "outcome_key"]

OutcomeKey = tuple[object, ...]


class NodeShape:
    """Stands for one shape of a node's pools (compared by identity)."""

    __slots__ = ()


@dataclass(slots=True, eq=False)
class NodePools:
    node: NodeLike
    pools: list[Pool]
    shape: NodeShape | None
    """None: not comparable, the node is always searched."""
    pool_keys: tuple[tuple[str, str], ...]
    """(driver, pool) of each pool, to look up the devices in use."""


class PoolCache:
    def __init__(self) -> None:
        self._slices: object = None
        self._index: tuple[dict[str, list[ResourceSlice]], list[ResourceSlice]] = ({}, [])
        self._by_node: dict[str, NodePools] = {}
        self._shapes: dict[tuple[object, ...], NodeShape] = {}

    def _follow(self, slices: Sequence[ResourceSlice]) -> None:
        if slices is self._slices:
            return
        self._slices = slices
        self._by_node = {}
        self._shapes = {}
        on_node: dict[str, list[ResourceSlice]] = {}
        shared: list[ResourceSlice] = []
        for s in slices:
            if s.node_name:
                on_node.setdefault(s.node_name, []).append(s)
            else:
                shared.append(s)
        self._index = (on_node, shared)

    def index(
        self, slices: Sequence[ResourceSlice]
    ) -> tuple[dict[str, list[ResourceSlice]], list[ResourceSlice]]:
        """The slices with a node name by that name, and the others."""
        self._follow(slices)
        return self._index

    def entry(
        self,
        node: NodeLike,
        slices: Sequence[ResourceSlice],
        build: Callable[[NodeLike], list[Pool]],
    ) -> NodePools:
        """``node``'s pools (``build(node)`` when not known) and their shape."""
        if slices is not self._slices:
            self._follow(slices)
        got = self._by_node.get(node.name)
        if got is None or got.node is not node:
            pools = build(node)
            keys = tuple((p.driver, p.name) for p in pools)
            got = self._by_node[node.name] = NodePools(node, pools, self._shape(pools), keys)
        return got

    def _shape(self, pools: Sequence[Pool]) -> NodeShape | None:
        parts = []
        for p in pools:
            shape = _pool_shape(p)
            if shape is None:
                return None
            parts.append(shape)
        key = tuple(parts)
        got = self._shapes.get(key)
        if got is None:
            got = self._shapes[key] = NodeShape()
        return got


def _pool_shape(pool: Pool) -> tuple[object, ...] | None:
    if pool.incomplete or pool.invalid:
        return (pool.driver, pool.incomplete, pool.invalid)
    parts: list[object] = []
    for group in (pool.slices, pool.slices_not_targeting_node):
        for s in group:
            if s.per_device_node_selection:
                return None
            sel = 0 if s.node_selector_raw is None else id(s.node_selector_raw)
            parts.append((id(s.devices), bool(s.node_name), s.all_nodes, sel))
        parts.append(None)
    counters = tuple((name, id(cs)) for name, cs in pool.counter_sets.items())
    return (pool.driver, tuple(parts), counters)


def outcome_key(
    entry: NodePools, claims: Sequence[ResourceClaim], state: AllocatedState
) -> OutcomeKey | None:
    """Equal for two nodes the search answers alike (same claims, same devices in use);
    None when the node must be searched."""
    if entry.shape is None:
        return None
    used = state.pools_use(entry.pool_keys)
    if used is None:
        return None
    return (tuple(map(id, claims)), entry.shape, used)


class Outcomes:
    """Answers by key for one allocator (one pod: its claims, the devices in use)."""

    __slots__ = ("_claims", "_known")

    def __init__(self) -> None:
        self._known: dict[OutcomeKey, bool] = {}
        self._claims: dict[object, tuple[ResourceClaim, ...]] = {}
        """The claims of the keys (by their ids, ``key[0]``), kept alive so that their
        ids stay theirs."""

    def get(self, key: OutcomeKey) -> bool | None:
        return self._known.get(key)

    def put(self, key: OutcomeKey, feasible: bool, claims: Sequence[ResourceClaim]) -> None:
        if key[0] not in self._claims:
            self._claims[key[0]] = tuple(claims)
        self._known[key] = feasible
