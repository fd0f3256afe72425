"""The structured allocator, as kube-scheduler 1.37's ``incubating`` variant (the one
NewAllocator picks with 1.37's default gates: AdminAccess, PrioritizedList,
PartitionableDevices, DeviceTaints, DeviceBindingConditions+ResourceClaimDeviceStatus,
ConsumableCapacity, FractionalCapacityRange). DeviceTaintRules (GA, on) reach it as
taints on the slices' devices (``taint_rules.patch_slices``), as kube's slice tracker
hands them over.

For one node: claims in order, each claim's requests in order, each request's devices
one by one, candidates in pool order (driver, pool name), slice name, slice order.
The first complete solution wins (backtracking; combinations, never permutations,
within a request; ``firstAvailable`` subrequests tried in order). So where the choice
is determined, the same devices as kube-scheduler's.

Outcomes, as the DynamicResources plugin reads them:
- a list of AllocationResult (one per claim): allocated;
- ``None``: the node cannot satisfy the claims -> Unschedulable ``CANNOT_ALLOCATE``;
- ``NodeAllocationError``: Unschedulable with its message (invalid pools met);
- ``AllocationError``: the claims themselves are broken (CEL compile or runtime error,
  missing class, ...) -> an Error status with its message;
- ``AllocationTimeout`` (:mod:`.deadline`): the search passed the caller's deadline.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial
from typing import Any

from kubesched.framework.dra.capacity import consumed_from_request, fits_capacity
from kubesched.framework.dra.cel import CelCache, CelRuntimeError, enhance_runtime_error
from kubesched.framework.dra.deadline import Deadline, TimeLimit
from kubesched.framework.dra.node_cache import NodePools, Outcomes, PoolCache, outcome_key
from kubesched.framework.dra.pools import (
    NodeLike,
    Pool,
    available_counters,
    gather_pools,
    node_matches,
)
from kubesched.framework.dra.results import (
    NodeSelectorError,
    allocation_result,
    local_to_node,
    node_selector_for,
)
from kubesched.framework.dra.state import AllocatedState, Constraint, DeviceID, taint_prevents
from kubesched.framework.dra.types import (
    ALL,
    AllocationResult,
    Device,
    DeviceClass,
    DeviceResult,
    ExactRequest,
    ResourceClaim,
    ResourceSlice,
)

__all__ = [
    "CANNOT_ALLOCATE",
    "AllocatedState",
    "AllocationError",
    "Allocator",
    "DeviceID",
    "NodeAllocationError",
]

CANNOT_ALLOCATE = "cannot allocate all claims"
ALLOCATION_RESULTS_MAX_SIZE = 32


class AllocationError(Exception):
    """The claims cannot be allocated anywhere (kube returns it as a Filter error)."""


class NodeAllocationError(Exception):
    """Allocation failed on this node only (kube's ErrFailedAllocationOnNode)."""


class _MaxSizeExceeded(Exception):
    pass


@dataclass(slots=True)
class _Req:
    request: ExactRequest
    parent: str | None
    cls: DeviceClass
    num_devices: int = 0
    all_devices: list[tuple[DeviceID, Device, ResourceSlice, Pool]] = field(default_factory=list)
    selected_sub: int = 0

    @property
    def full_name(self) -> str:
        return f"{self.parent}/{self.request.name}" if self.parent else self.request.name


class Allocator:
    """Holds the cluster's classes, slices and devices in use; ``allocate`` per node."""

    def __init__(
        self,
        classes: Mapping[str, DeviceClass],
        slices: Sequence[ResourceSlice],
        state: AllocatedState,
        cel_cache: CelCache,
        pool_cache: PoolCache | None = None,
    ) -> None:
        self.classes = classes
        self.state = state
        self.cel = cel_cache
        self.pool_cache = PoolCache() if pool_cache is None else pool_cache
        self.all_slices = slices
        self._on_node, self._shared = self.pool_cache.index(slices)
        self._counters: dict[str, dict[str, dict[str, Fraction]]] = {}
        self._outcomes = Outcomes()

    def allocate(
        self, node: NodeLike, claims: Sequence[ResourceClaim]
    ) -> list[AllocationResult] | None:
        return _Run(self, node, claims).run()

    def try_allocate(
        self, node: NodeLike, claims: Sequence[ResourceClaim], limit: TimeLimit | None = None
    ) -> Callable[[], list[AllocationResult]] | None:
        """``allocate`` with the results built only when asked for (Filter keeps them
        for every feasible node, Reserve reads one node's): same outcome, same errors
        raised here (a node selector that cannot be made), not by the returned call.
        The search stops with ``AllocationTimeout`` once it runs past ``limit``. A node
        alike one already searched gets its answer (:mod:`.node_cache`), and its results
        are searched for when asked for."""
        key = outcome_key(self._entry(node), claims, self.state)
        if key is not None:
            known = self._outcomes.get(key)
            if known is not None:
                return partial(self._results, node, claims) if known else None
        run = _Run(self, node, claims, limit)
        if not run.search():
            if key is not None:
                self._outcomes.put(key, False, claims)
            return None
        for ci, picked in enumerate(run.results):
            if picked and not local_to_node(picked[0][1], picked[0][2]):
                run._node_selector(ci)  # may raise; a local first device never does
        if key is not None:
            self._outcomes.put(key, True, claims)
        run.forget_search()  # kept per feasible node until the cycle ends: keep it small
        return run.build

    def _results(self, node: NodeLike, claims: Sequence[ResourceClaim]) -> list[AllocationResult]:
        got = self.allocate(node, claims)
        if got is None:  # a node alike had them: cannot happen
            raise AllocationError(f"node {node.name}: the allocation found earlier is gone")
        return got

    def pools(self, node: NodeLike) -> list[Pool]:
        """The pools reachable from ``node``, in the order devices are tried."""
        return self._entry(node).pools

    def _entry(self, node: NodeLike) -> NodePools:
        return self.pool_cache.entry(node, self.all_slices, self._gather)

    def _gather(self, node: NodeLike) -> list[Pool]:
        reach = [*self._on_node.get(node.name, ()), *self._shared]
        return gather_pools(reach, node, self.all_slices)

    def available_counters(self, pool: Pool) -> dict[str, dict[str, Fraction]]:
        got = self._counters.get(pool.id)
        if got is None:
            allocated = [
                (s.driver, s.pool, d.name)
                for s in (*pool.slices, *pool.slices_not_targeting_node)
                for d in s.devices
                if self.state.is_allocated((s.driver, s.pool, d.name))
            ]
            got = self._counters[pool.id] = available_counters(pool, allocated)
        return got


@dataclass(slots=True)
class _Undo:
    """Takes one device back out of a claim's results: everything ``_allocate_device``
    did, in reverse (results, capacity in flight, the in-flight mark, constraints,
    counters)."""

    run: _Run
    ci: int
    did: DeviceID
    dev: Device
    pool: Pool
    base: str
    sub: str
    reserved: bool
    nres: int
    added: list[Constraint] = field(default_factory=list)
    marked: bool = False
    cap_inserted: dict[str, Fraction] | None = None
    cap_existed: bool = False

    def __call__(self) -> None:
        run = self.run
        del run.results[self.ci][self.nres :]
        if self.cap_inserted is not None:
            cur = run.allocating_capacity[self.did]
            for k, v in self.cap_inserted.items():
                cur[k] -= v
            if not self.cap_existed:
                del run.allocating_capacity[self.did]
        if self.marked:
            run.allocating[self.did].discard(self.ci)
        for c in reversed(self.added):
            c.remove(self.base, self.sub)
        if self.reserved:
            run._give_counters(self.pool, self.dev)


class _Run:
    def __init__(
        self,
        a: Allocator,
        node: NodeLike,
        claims: Sequence[ResourceClaim],
        limit: TimeLimit | None = None,
    ) -> None:
        self.a = a
        self.deadline = None if limit is None else Deadline(limit)
        self.node = node
        self.claims = claims
        self.pools = a.pools(node)
        self.reqs: dict[tuple[int, int, int], _Req] = {}
        self.constraints: list[list[Constraint]] = []
        self.matches: dict[tuple[DeviceID, int, int, int], bool] = {}
        self.allocating: dict[DeviceID, set[int]] = {}
        self.allocating_capacity: dict[DeviceID, dict[str, Fraction]] = {}
        self.consumed_counters: dict[str, dict[str, dict[str, Fraction]]] = {}
        self.results: list[list[tuple[DeviceResult, ResourceSlice, Device]]] = []

    # -- setup ---------------------------------------------------------------------------
    def _validate(
        self, ci: int, req: ExactRequest, parent: str | None, key: tuple[int, int, int]
    ) -> _Req:
        claim = self.claims[ci]
        cls = self.a.classes.get(req.device_class_name)
        if cls is None:
            raise AllocationError(
                f"claim {claim.key}, request {req.name}: could not retrieve device class "
                f'{req.device_class_name}: deviceclass.resource.k8s.io "{req.device_class_name}" not found'
            )
        rd = _Req(req, parent, cls)
        if req.allocation_mode != ALL:
            rd.num_devices = req.count
            return rd
        for pool in self.pools:
            if pool.incomplete:
                raise AllocationError(
                    f"claim {claim.key}, request {req.name}: asks for all devices, but resource pool {pool.id} is currently being updated"
                )
            if pool.invalid:
                raise AllocationError(
                    f"claim {claim.key}, request {req.name}: asks for all devices, but resource pool {pool.id} is currently invalid"
                )
            for s in pool.slices:
                for d in s.devices:
                    did = (s.driver, s.pool, d.name)
                    if self._selectable(key, rd, s, d, did) and fits_capacity(
                        {}, req.capacity, d.capacity, {}
                    ):
                        rd.all_devices.append((did, d, s, pool))
        rd.num_devices = len(rd.all_devices)
        return rd

    def run(self) -> list[AllocationResult] | None:
        return self.build() if self.search() else None

    def forget_search(self) -> None:
        """Drop what only the search needed (``build`` reads claims, requests, results)."""
        self.pools = []
        self.constraints = []
        self.matches = {}
        self.allocating = {}
        self.allocating_capacity = {}
        self.consumed_counters = {}

    def build(self) -> list[AllocationResult]:
        """The allocation results of a successful ``search``."""
        return [self._result(ci) for ci in range(len(self.claims))]

    def search(self) -> bool:
        """Whether the claims fit on the node (``results`` then holds the devices);
        raises as ``Allocator.allocate`` does."""
        for ci, claim in enumerate(self.claims):
            min_total = 0
            for ri, r in enumerate(claim.requests):
                if r.exactly is not None:
                    rd = self.reqs[(ci, ri, 0)] = self._validate(ci, r.exactly, None, (ci, ri, 0))
                    n = rd.num_devices
                else:
                    n = 1 << 62
                    for si, sub in enumerate(r.first_available):
                        rd = self.reqs[(ci, ri, si)] = self._validate(ci, sub, r.name, (ci, ri, si))
                        n = min(n, rd.num_devices)
                if n > ALLOCATION_RESULTS_MAX_SIZE - min_total:
                    raise AllocationError(
                        f"claim {claim.key}, request {r.name}: adding {n} devices exceeds the claim limit "
                        f"of {ALLOCATION_RESULTS_MAX_SIZE}, with {min_total} already accounted for"
                    )
                min_total += n
            cons = []
            for i, c in enumerate(claim.constraints):
                if c.match_attribute:
                    cons.append(Constraint(c.requests, c.match_attribute, False))
                elif c.distinct_attribute:
                    cons.append(Constraint(c.requests, c.distinct_attribute, True))
                else:
                    raise AllocationError(
                        f"claim {claim.key}, constraint #{i}: empty constraint (unsupported constraint type?)"
                    )
            self.constraints.append(cons)
            self.results.append([])
        try:
            done = self._one(0, 0, 0, 0, False, (0, 0, 0))
        except _MaxSizeExceeded:
            done = False
        if not done and any(p.invalid for p in self.pools):
            raise NodeAllocationError("invalid resource pools were encountered")
        return done

    # -- search --------------------------------------------------------------------------
    def _one(
        self, ci: int, ri: int, si: int, di: int, in_sub: bool, start: tuple[int, int, int]
    ) -> bool:
        if (dl := self.deadline) is not None:
            dl.left -= 1
            if dl.left <= 0:
                dl.check()
        if ci >= len(self.claims):
            return True
        claim = self.claims[ci]
        if ri >= len(claim.requests):
            try:
                return self._one(ci + 1, 0, 0, 0, False, (0, 0, 0))
            except _MaxSizeExceeded:
                return False
        rd = self.reqs[(ci, ri, si)]
        if not in_sub and rd.parent is not None:
            all_exceeded = True
            sub = 0
            while (ci, ri, sub) in self.reqs:
                try:
                    ok = self._one(ci, ri, sub, 0, True, (0, 0, 0))
                except _MaxSizeExceeded:
                    sub += 1
                    continue
                all_exceeded = False
                if ok:
                    self.reqs[(ci, ri, 0)].selected_sub = sub
                    return True
                sub += 1
            if all_exceeded:
                raise _MaxSizeExceeded
            return False
        req = rd.request
        do_all = req.allocation_mode == ALL
        if do_all and not rd.all_devices:
            return False
        if di >= rd.num_devices:
            return self._one(ci, ri + 1, 0, 0, False, (0, 0, 0))
        if rd.num_devices - di > ALLOCATION_RESULTS_MAX_SIZE - len(self.results[ci]):
            raise _MaxSizeExceeded
        if do_all:
            did, dev, s, pool = rd.all_devices[di]
            undo = self._allocate_device(ci, ri, si, rd, did, dev, s, pool, must=True)
            if undo is None:
                return False
            try:
                ok = self._one(ci, ri, si, di + 1, in_sub, (0, 0, 0))
            except BaseException:
                undo()
                raise
            if not ok:
                undo()
            return ok
        admin = bool(req.admin_access)
        key = (ci, ri, si)
        for pi in range(start[0], len(self.pools)):
            pool = self.pools[pi]
            if pool.incomplete or pool.invalid:
                continue
            s0 = start[1] if pi == start[0] else 0
            for sli in range(s0, len(pool.slices)):
                s = pool.slices[sli]
                d0 = start[2] if pi == start[0] and sli == start[1] else 0
                for dvi in range(d0, len(s.devices)):
                    dev = s.devices[dvi]
                    did = (pool.driver, pool.name, dev.name)
                    if admin:
                        if ci in self.allocating.get(did, ()):
                            continue
                    elif self._in_use(did):
                        continue
                    if not self._selectable(key, rd, s, dev, did):
                        continue
                    if not self._fits(req, did, dev):
                        continue
                    undo = self._allocate_device(ci, ri, si, rd, did, dev, s, pool, must=False)
                    if undo is None:
                        continue
                    try:
                        ok = self._one(ci, ri, si, di + 1, in_sub, (pi, sli, dvi + 1))
                    except BaseException:
                        undo()
                        raise
                    if ok:
                        return True
                    undo()
        return False

    def _in_use(self, did: DeviceID) -> bool:
        return did in self.a.state.devices or bool(self.allocating.get(did))

    def _fits(self, req: ExactRequest, did: DeviceID, dev: Device) -> bool:
        plain = dev.plain_capacity
        if plain is None:
            plain = dev.plain_capacity = all(
                cap.policy is None and cap.value >= 0 for cap in dev.capacity.values()
            )
        if (
            plain
            and not req.capacity
            and did not in self.a.state.aggregated_capacity
            and did not in self.allocating_capacity
        ):
            return True  # fits_capacity's common case, without its Fraction comparisons
        return fits_capacity(
            self.a.state.aggregated_capacity.get(did, {}),
            req.capacity,
            dev.capacity,
            self.allocating_capacity.get(did, {}),
        )

    def _selectable(
        self, key: tuple[int, int, int], rd: _Req, s: ResourceSlice, dev: Device, did: DeviceID
    ) -> bool:
        mk = (did, *key)
        got = self.matches.get(mk)
        if got is not None:
            return got
        ok = (
            self._selectors(key[0], dev, did, rd.cls, rd.cls.selectors)
            and self._selectors(key[0], dev, did, None, rd.request.selectors)
            and (
                not s.per_device_node_selection
                or node_matches(self.node, dev.node_name, dev.all_nodes, dev.node_selector)
            )
        )
        self.matches[mk] = ok
        return ok

    def _selectors(
        self, ci: int, dev: Device, did: DeviceID, cls: DeviceClass | None, exprs: Sequence[str]
    ) -> bool:
        who = f"class {cls.name}" if cls is not None else f"claim {self.claims[ci].key}"
        for i, e in enumerate(exprs):
            c = self.a.cel.get(e)
            if c.error is not None:
                raise AllocationError(f"{who}: selector #{i}: CEL compile error: {c.error}")
            try:
                ok = c.matches(dev, did[0])
            except CelRuntimeError as err:
                raise AllocationError(
                    f"{who}: selector #{i} on device {'/'.join(did)}: CEL runtime error: "
                    f"{enhance_runtime_error(str(err))}"
                ) from None
            if not ok:
                return False
        return True

    def _capacity_in_use(self, did: DeviceID) -> bool:
        st = self.a.state
        return (
            did in st.aggregated_capacity
            or any(s[0] == did for s in st.shared_ids)
            or did in self.allocating_capacity
        )

    def _allocate_device(
        self,
        ci: int,
        ri: int,
        si: int,
        rd: _Req,
        did: DeviceID,
        dev: Device,
        s: ResourceSlice,
        pool: Pool,
        *,
        must: bool,
    ) -> Callable[[], None] | None:
        """Add ``dev`` to claim ``ci``'s results for request ``rd``; the way back, or
        None (nothing changed) when it cannot be added."""
        req = rd.request
        multi = bool(dev.allow_multiple_allocations)
        admin = bool(req.admin_access)
        if not multi and admin and ci in self.allocating.get(did, ()):
            return None
        if not admin and self._in_use(did):
            return None
        if taint_prevents(dev, req):
            return None
        reserved = False
        if dev.consumes_counters and not (multi and self._capacity_in_use(did)):
            if not self._take_counters(pool, dev):
                return None
            reserved = True
        base, sub = (rd.parent, req.name) if rd.parent else (req.name, "")
        undo = _Undo(self, ci, did, dev, pool, base, sub, reserved, len(self.results[ci]))
        for c in self.constraints[ci]:
            if not c.add(base, sub, dev, did):
                undo()
                if must:
                    raise AllocationError(
                        f"claim {self.claims[ci].key}, request {req.name}: cannot add device "
                        f"{'/'.join(did)} because a claim constraint would not be satisfied"
                    )
                return None
            undo.added.append(c)
        if not multi:
            self.allocating.setdefault(did, set()).add(ci)
            undo.marked = True
        if not self._fits(req, did, dev):
            undo()
            return None
        consumed: dict[str, Fraction] | None = None
        share: str | None = None
        if multi:
            consumed = consumed_from_request(req.capacity, dev.capacity)
            share = str(uuid.uuid4())
            undo.cap_existed = did in self.allocating_capacity
            cur = self.allocating_capacity.setdefault(did, {})
            for k, v in consumed.items():
                cur[k] = cur.get(k, Fraction(0)) + v
            undo.cap_inserted = consumed
        result = DeviceResult(
            request=rd.full_name,
            driver=did[0],
            pool=did[1],
            device=did[2],
            admin_access=True if admin else None,
            share_id=share,
            consumed_capacity=consumed or None,
            tolerations=req.tolerations,
            binding_conditions=dev.binding_conditions,
            binding_failure_conditions=dev.binding_failure_conditions,
        )
        self.results[ci].append((result, s, dev))
        return undo

    def _take_counters(self, pool: Pool, dev: Device) -> bool:
        avail = self.a.available_counters(pool)
        used = self.consumed_counters.setdefault(pool.id, {})
        for set_name, counters in dev.consumes_counters:
            u = used.setdefault(set_name, {})
            for c, v in counters.items():
                u[c] = u.get(c, Fraction(0)) + v
        for set_name, counters in avail.items():
            u = used.get(set_name, {})
            if any(v < u.get(c, 0) for c, v in counters.items()):
                self._give_counters(pool, dev)
                return False
        return True

    def _give_counters(self, pool: Pool, dev: Device) -> None:
        used = self.consumed_counters[pool.id]
        for set_name, counters in dev.consumes_counters:
            for c, v in counters.items():
                used[set_name][c] -= v

    # -- result --------------------------------------------------------------------------
    def _result(self, ci: int) -> AllocationResult:
        chosen: list[tuple[DeviceClass, str]] = []
        for ri in range(len(self.claims[ci].requests)):
            rd = self.reqs[(ci, ri, 0)]
            if rd.parent is not None:
                rd = self.reqs[(ci, ri, rd.selected_sub)]
            chosen.append((rd.cls, rd.full_name))
        devices = [r for r, _, _ in self.results[ci]]
        return allocation_result(self.claims[ci], chosen, devices, self._node_selector(ci))

    def _node_selector(self, ci: int) -> dict[str, Any] | None:
        try:
            return node_selector_for(self.results[ci], self.node.name, self.claims[ci].name)
        except NodeSelectorError as e:
            raise AllocationError(str(e)) from None
