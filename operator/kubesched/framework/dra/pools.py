"""Resource pools reachable from a node (structured/internal/incubating pools).

A pool is all slices of one (driver, pool name) with the newest generation. It counts
only when complete (``resourceSliceCount`` slices of that generation exist, the ones
not reaching this node included); an incomplete pool is kept as a marker (``All``
requests fail on it), an invalid one (duplicate device names, unknown counter sets) too.
Pools come sorted by driver then pool name, pools with binding conditions last; a pool's
slices sorted by name: this is the order in which the allocator tries devices.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Protocol

from kubesched.framework.dra.types import CounterSet, ResourceSlice
from kubesched.framework.labels import NodeSelector

__all__ = ["NodeLike", "Pool", "gather_pools", "node_matches"]


class NodeLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def labels(self) -> Mapping[str, str]: ...


@dataclass(slots=True, eq=False)
class Pool:
    driver: str
    name: str
    incomplete: bool = False
    invalid: bool = False
    invalid_reason: str = ""
    slices: list[ResourceSlice] = field(default_factory=list)
    slices_not_targeting_node: list[ResourceSlice] = field(default_factory=list)
    counter_sets: dict[str, CounterSet] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"


def node_matches(
    node: NodeLike, node_name: str, all_nodes: bool, selector: NodeSelector | None
) -> bool:
    if node_name:
        return node.name == node_name
    if all_nodes:
        return True
    if selector is not None:
        return selector.matches(node.labels, node.name)
    return False


def _relevant(s: ResourceSlice, node: NodeLike) -> bool:
    if s.node_name or s.all_nodes or s.node_selector is not None:
        return node_matches(node, s.node_name, s.all_nodes, s.node_selector)
    if s.per_device_node_selection:
        return any(node_matches(node, d.node_name, d.all_nodes, d.node_selector) for d in s.devices)
    return False


def gather_pools(
    slices_for_node: Iterable[ResourceSlice], node: NodeLike, all_slices: Sequence[ResourceSlice]
) -> list[Pool]:
    by_id: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in slices_for_node:
        # DRADeviceCompatibilityGroups is off: such slices are ignored (pool incomplete).
        if s.uses_compatibility_groups or not _relevant(s, node):
            continue
        key = (s.driver, s.pool)
        cur = by_id.get(key)
        if cur is None or s.generation > cur[0].generation:
            by_id[key] = [s]
        elif s.generation == cur[0].generation:
            cur.append(s)
    result: list[Pool] = []
    with_binding: list[Pool] = []
    for (driver, name), ss in by_id.items():
        want = ss[0].resource_slice_count
        if len(ss) == want:
            pool = _build(driver, name, ss, ())
        else:
            gen = ss[0].generation
            same = [x for x in all_slices if x.driver == driver and x.pool == name]
            if any(x.generation > gen for x in same):
                continue  # obsolete: a newer generation exists elsewhere
            all_for_pool = [
                x for x in same if x.generation == gen and not x.uses_compatibility_groups
            ]
            if len(all_for_pool) != want:
                result.append(Pool(driver, name, incomplete=True))
                continue
            pool = _build(driver, name, ss, all_for_pool)
        if any(d.binding_conditions for s in pool.slices for d in s.devices):
            with_binding.append(pool)
        else:
            result.append(pool)
    result.sort(key=lambda p: (p.driver, p.name))
    with_binding.sort(key=lambda p: (p.driver, p.name))
    return result + with_binding


def _build(
    driver: str, name: str, ss: list[ResourceSlice], all_for_pool: Sequence[ResourceSlice]
) -> Pool:
    ss = sorted(ss, key=lambda s: s.name)
    device_slices = [s for s in ss if not s.shared_counters]
    counter_slices = [s for s in ss if s.shared_counters]
    not_targeting: list[ResourceSlice] = []
    if len(ss) < len(all_for_pool):
        names = {s.name for s in ss}
        for s in all_for_pool:
            if s.name in names:
                continue
            (counter_slices if s.shared_counters else not_targeting).append(s)
    seen: set[str] = set()
    for s in device_slices:
        for d in s.devices:
            if d.name in seen:
                return Pool(
                    driver, name, invalid=True, invalid_reason=f"duplicate device name {d.name}"
                )
            seen.add(d.name)
    counter_sets: dict[str, CounterSet] = {}
    for s in counter_slices:
        for cs in s.shared_counters:
            if cs.name in counter_sets:
                return Pool(
                    driver,
                    name,
                    invalid=True,
                    invalid_reason=f"duplicate counter set name {cs.name}",
                )
            counter_sets[cs.name] = cs
    for s in (*device_slices, *not_targeting):
        for d in s.devices:
            for set_name, counters in d.consumes_counters:
                found = counter_sets.get(set_name)
                if found is None:
                    return Pool(
                        driver,
                        name,
                        invalid=True,
                        invalid_reason=f"counter set {set_name} not found",
                    )
                for c in counters:
                    if c not in found.counters:
                        return Pool(
                            driver,
                            name,
                            invalid=True,
                            invalid_reason=f"counter {c} not found in counter set {set_name}",
                        )
    return Pool(
        driver,
        name,
        slices=device_slices,
        slices_not_targeting_node=not_targeting,
        counter_sets=counter_sets,
    )


def available_counters(
    pool: Pool, allocated: Iterable[tuple[str, str, str]]
) -> dict[str, dict[str, Fraction]]:
    """The pool's counters minus what allocated devices (of all nodes) consume."""
    alloc = set(allocated)
    avail = {n: dict(cs.counters) for n, cs in pool.counter_sets.items()}
    for s in (*pool.slices, *pool.slices_not_targeting_node):
        for d in s.devices:
            if (s.driver, s.pool, d.name) not in alloc:
                continue
            for set_name, counters in d.consumes_counters:
                a = avail.get(set_name, {})
                for c, v in counters.items():
                    if c in a:
                        a[c] -= v
    return avail
