"""DynamicResources' binding side: Reserve, Unreserve, PreBind, and the claim writes
they and PostFilter make (:class:`ClaimWrites`, mixed into :class:`.plugin.DynamicResources`).

- Reserve: the node's allocations become in-flight in the claim tracker's ``pending``
  (no other pod gets those devices); a PodGroup claim's sibling allocation is shared,
  the pod added to the pods holding it.
- Unreserve: the pod's share of its in-flight allocations is given up, its implicit
  extended-resource claim deleted if PreBind created it, and the pod removed from its
  claims' ``reservedFor``.
- PreBind: ``status.allocation`` and ``status.reservedFor`` are written through
  ``ClusterPort.update_claim_status`` (a PodGroup claim once, by the first member; see
  :mod:`.pod_group`), then the implicit claim is created (:mod:`.extended`); written
  allocations are no longer in flight.
- PostFilter's deallocation, the deletion of a stale implicit claim and Unreserve's
  ``reservedFor`` removal run as tasks on the running loop; a failure is logged.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING, Any

from kubesched.framework.cluster_port import ClusterError
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import Handle, PreBindPlugin, ReservePlugin
from kubesched.framework.status import Status
from kubesched.framework.types import Pod
from kubesched.plugins.dynamic_resources import machinery as dra
from kubesched.plugins.dynamic_resources.claims import (
    allocation_dict,
    claim_id,
    claim_key,
    is_reserved_for,
)
from kubesched.plugins.dynamic_resources.pod_group import group_of
from kubesched.plugins.dynamic_resources.state import NAME, STATE_KEY, ClaimInfo, StateData

if TYPE_CHECKING:
    from kubesched.framework.dra import AllocationResult
    from kubesched.plugins.dynamic_resources.tracker import ClaimTracker, Obj

__all__ = ["ClaimWrites"]

log = logging.getLogger("kubesched.plugins.dynamic_resources")


class ClaimWrites(ReservePlugin, PreBindPlugin):
    """DynamicResources' Reserve, Unreserve and PreBind; the plugin sets the attributes
    below and provides ``tracker``."""

    _handle: Handle
    _tasks: set[asyncio.Task[None]]
    """The claim writes started in the background (:meth:`_spawn`), until done."""
    _group_lock: asyncio.Lock
    """One PodGroup member at a time writes a shared claim (:meth:`_bind_group_claim`)."""

    if TYPE_CHECKING:

        @property
        def tracker(self) -> ClaimTracker: ...

    # -- Reserve / Unreserve -----------------------------------------------------------------
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        data: StateData | None = state.get(STATE_KEY)
        if data is None:
            return Status.as_error(f"cannot read {STATE_KEY!r} from cycleState", plugin=NAME)
        if not data.claims and data.extended is None:
            return None  # nothing to hold in flight (and the claim tracker stays unmade)
        pending = self.tracker.pending
        for index, info in enumerate(data.claims):
            if info.shared is None:
                continue
            shared = pending.get(claim_id(info.claim))
            if shared is None or shared.allocation is not info.shared:
                self._release(data, pod.uid)
                return Status.as_error(
                    f"internal error, the pending allocation of claim {info.claim.name} "
                    "shared by the PodGroup is gone",
                    plugin=NAME,
                )
            shared.pods.add(pod.uid)
            data.reserved[index] = info.shared
        variant = None if data.extended is None else data.extended.by_node.get(node_name)
        if not data.to_allocate and variant is None:
            return None
        allocations = data.results_for(node_name)
        if not allocations:
            return Status.as_error("claim allocation not found for node", plugin=NAME)
        if variant is not None:
            assert data.extended is not None
            allocations, last = allocations[:-1], allocations[-1]
            if (err := data.extended.reserve(self.tracker, pod, variant, last)) is not None:
                return Status.as_error(err, plugin=NAME)
        if len(allocations) != len(data.to_allocate):
            return Status.as_error(
                f"internal error, have {len(allocations)} allocations, "
                f"{len(data.to_allocate)} claims to allocate, want {len(data.to_allocate)} claims",
                plugin=NAME,
            )
        for index, alloc in zip(data.to_allocate, allocations, strict=True):
            info = data.claims[index]
            if claim_id(info.claim) in pending:
                self._release(data, pod.uid)
                return Status.as_error(
                    f"internal error, couldn't signal allocation for claim {info.claim.name}: "
                    "claim already has a pending allocation",
                    plugin=NAME,
                )
            group = group_of(info.binding)
            pending[claim_id(info.claim)] = dra.Pending(info.claim, alloc, {pod.uid}, group)
            data.reserved[index] = alloc
        return None

    def _release(self, data: StateData, pod_uid: str) -> None:
        """The pod's share of its in-flight allocations given up; one no pod shares any
        more is dropped (kube's MaybeRemoveClaimPendingAllocation)."""
        pending = self.tracker.pending
        for index in list(data.reserved):
            key = claim_id(data.claims[index].claim)
            got = pending.get(key)
            if got is not None:
                got.pods.discard(pod_uid)
                if not got.pods:
                    del pending[key]
            del data.reserved[index]

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        data: StateData | None = state.get(STATE_KEY)
        if data is not None and data.extended is not None:
            created = data.extended.release(self.tracker)
            if created is not None:
                self._spawn(self._delete_claim(created))
        if data is None or not data.claims:
            return
        self._release(data, pod.uid)
        for info in data.claims:
            current = self.tracker.get_claim(info.claim.namespace, info.claim.name)
            raw = current if current is not None else info.raw
            if (raw.get("status") or {}).get("allocation") and is_reserved_for(pod, raw):
                self._spawn(self._unreserve(raw, pod.uid))

    async def _unreserve(self, raw: Obj, uid: str) -> None:
        try:
            await self._handle.cluster.unreserve_claim(raw, uid)
        except ClusterError as e:  # retried when the pod is scheduled again
            log.warning("unreserve of ResourceClaim %s failed: %s", claim_key(raw), e)

    # -- PreBind -----------------------------------------------------------------------------
    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """kube's PreBindPreFlight: PreBind has work when the pod has claims (its own or
        the implicit one of its extended resources): Skip otherwise."""
        data: StateData | None = state.get(STATE_KEY)
        if data is None or (not data.claims and data.extended is None):
            return Status.skip()
        return None

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        data: StateData | None = state.get(STATE_KEY)
        if data is None:
            return Status.as_error(f"cannot read {STATE_KEY!r} from cycleState", plugin=NAME)
        written: list[int] = []
        try:
            for index, info in enumerate(data.claims):
                if group_of(info.binding):
                    async with self._group_lock:
                        await self._bind_group_claim(pod, info, data.reserved.get(index))
                elif is_reserved_for(pod, info.raw):
                    continue
                else:
                    alloc = data.reserved.get(index)
                    updated = await self._handle.cluster.update_claim_status(
                        info.raw, None if alloc is None else allocation_dict(alloc), info.binding
                    )
                    self.tracker.assume(updated)
                written.append(index)
            ext = data.extended
            if ext is not None and ext.reserved is not None:
                await dra.bind_extended(
                    self._handle.cluster, self._handle.store, self.tracker, pod, ext
                )
        except ClusterError as e:
            return Status.as_error(e, plugin=NAME)
        # Written: the allocations are in the (assumed) claims now, no longer in flight.
        for index in written:
            if index in data.reserved:
                self.tracker.pending.pop(claim_id(data.claims[index].claim), None)
                del data.reserved[index]
        if data.extended is not None and data.extended.reserved is not None:
            self.tracker.pending.pop(data.extended.uid, None)
            data.extended.reserved = None
        return None

    async def _bind_group_claim(
        self, pod: Pod, info: ClaimInfo, alloc: AllocationResult | None
    ) -> None:
        """A PodGroup claim: the first member to get here writes the allocation and the
        PodGroup's reservation; the others find both and write nothing (one at a time,
        so two members never both allocate it)."""
        current = self.tracker.get_claim(info.claim.namespace, info.claim.name) or info.raw
        if is_reserved_for(pod, current, accept_pod_group=True):
            return
        if (current.get("status") or {}).get("allocation"):
            alloc = None
        updated = await self._handle.cluster.update_claim_status(
            current, None if alloc is None else allocation_dict(alloc), info.binding
        )
        self.tracker.assume(updated)

    # -- writes in the background -----------------------------------------------------------
    async def _delete_claim(self, raw: Obj) -> None:
        try:
            await self._handle.cluster.delete_claim(raw)
        except ClusterError as e:
            log.warning("deleting ResourceClaim %s failed: %s", claim_key(raw), e)

    async def _deallocate(self, raw: Obj) -> None:
        try:
            await self._handle.cluster.deallocate_claim(raw)
        except ClusterError as e:
            log.warning("deallocating ResourceClaim %s failed: %s", claim_key(raw), e)

    def _spawn(self, coro: Any) -> None:
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            coro.close()
            log.warning("no running event loop: ResourceClaim write skipped")
            return
        task = loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
