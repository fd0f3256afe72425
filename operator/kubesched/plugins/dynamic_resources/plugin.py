"""DynamicResources: devices for pods through ResourceClaims (resource.k8s.io/v1), as
kube-scheduler v1.37.2's plugin of that name with its default feature gates.

Reasons are kube's; every rejection below is UnschedulableAndUnresolvable (kube's
``statusUnschedulable``) unless it says Error.

- PreEnqueue: every claim of ``spec.resourceClaims`` must exist. A template's claim
  not yet named in ``status.resourceClaimStatuses``: ``pod "<ns>/<pod>": ResourceClaim
  not created yet``; a named claim missing: ``could not find ResourceClaim
  "<ns>/<claim>"``; being deleted: ``resourceclaim "<claim>" is being deleted``; a
  template's claim not controlled by the pod: ``ResourceClaim ... (Pod is not owner)``.
- PreFilter: the same checks; pods without claims Skip. An unallocated claim whose
  request names a missing class: ``request <req>: device class <class> does not
  exist``; one being allocated for another pod: ``resource claim <ns>/<claim> is in the
  process of being allocated``. Builds the allocator over the slices, classes and the
  devices in use (allocated claims plus in-flight allocations).
- Filter: allocated claims must be available on the node (their allocation's node
  selector): ``resourceclaim not available on the node``; the others are allocated by
  the structured allocator: ``cannot allocate all claims``, its node errors
  (``invalid resource pools were encountered``) or an Error with its message (a CEL
  compile or runtime error, a missing class); a search past ``filterTimeout`` (default
  10s) is an Error ``node <node>: timed out trying to allocate devices``
  (:mod:`.filter_timeout`).
- PostFilter: a claim that was not available on some node and is reserved for nobody
  (or only this pod) is deallocated (``deallocation of ResourceClaim completed``), so a
  later attempt may allocate it elsewhere; pods without claims: nothing. When an earlier
  PreFilter rejected the pod (ours never ran), kube's plugin fails on its missing state
  and preemption is not tried: the message ends ``. not found``, here too.
- Score (DRAPrioritizedList, GA): ``firstAvailable`` subrequests score ``8 - index``;
  scores are normalised to 0..100 (pods without such requests score 0 everywhere,
  in one vector).
- Reserve: the node's allocations become in-flight (no other pod gets those devices);
  Unreserve drops them and removes the pod from claims' ``reservedFor``.
- PreBind: ``status.allocation`` and ``status.reservedFor`` are written through
  ``ClusterPort.update_claim_status``. Reserve, Unreserve, PreBind and the claim writes
  (PostFilter's too) are :class:`.writes.ClaimWrites`, which the plugin mixes in.
- PodGroup claims (DRAWorkloadResourceClaims, :mod:`.pod_group`): a claim a member
  shares with its PodGroup is reserved for the PodGroup. The first member's in-flight
  allocation is reused by its siblings (kube: within the PodGroup cycle; here while it is
  in flight), so the gang cycle places them all on the same devices or none; PreBind
  writes allocation and reservation once, the other members find them there.

- Extended resources backed by DRA (DRAExtendedResource, GA): an implicit claim per
  pod, allocated after its own claims and created in PreBind (:mod:`.extended`).

Deliberate differences: PreBind does not wait for device binding conditions
(``bindingTimeout``); PostFilter picks the first unavailable claim in claim order
(kube: a random one). Like kube's, the plugin has no
PreFilterExtensions: preemption does not free a victim's devices (a node whose claims
cannot be allocated is unresolvable there, so preemption never evaluates it).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.helpers import default_normalize_score
from kubesched.framework.interface import (
    MAX_NODE_SCORE,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    EventResource,
    FilterPlugin,
    Handle,
    PostFilterPlugin,
    PostFilterResult,
    PreEnqueuePlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    ScorePlugin,
    VectorScorePlugin,
)
from kubesched.framework.labels import compile_node_selector
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.signature import SignFragment, SignPlugin, unsignable
from kubesched.framework.status import Status
from kubesched.framework.types import ObjectError, Pod
from kubesched.plugins.dynamic_resources import machinery as dra
from kubesched.plugins.dynamic_resources.claims import (
    ClaimNameError,
    claim_id,
    claim_key,
    is_for_pod,
    names_claim,
    pod_claim_names,
)
from kubesched.plugins.dynamic_resources.filter_timeout import (
    check_filter_timeout,
    time_limit,
    timed_out,
)
from kubesched.plugins.dynamic_resources.pod_group import (
    bind_to,
    group_claims_enabled,
    is_own_pod_group_change,
    pod_group_name,
    shared_allocation,
)
from kubesched.plugins.dynamic_resources.state import NAME, STATE_KEY, ClaimInfo, StateData
from kubesched.plugins.dynamic_resources.writes import ClaimWrites

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

    from kubesched.framework.dra import AllocationResult
    from kubesched.framework.dra.deadline import TimeLimit
    from kubesched.framework.snapshot import Snapshot
    from kubesched.plugins.dynamic_resources.tracker import ClaimTracker, Obj

__all__ = [
    "ERR_NOT_AVAILABLE",
    "NAME",
    "Args",
    "DynamicResources",
    "new",
]

ERR_NOT_AVAILABLE = "resourceclaim not available on the node"
DEALLOCATED = "deallocation of ResourceClaim completed"
STATE_NOT_FOUND = "not found"
"""kube's framework.ErrNotFound, what its PostFilter says without PreFilter state."""
FIRST_AVAILABLE_MAX = 8
"""resource.k8s.io/v1 FirstAvailableDeviceRequestMaxSize: Score's base."""


class Args(BaseModel):
    """kube-scheduler's DynamicResourcesArgs."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    filter_timeout: str | None = Field(None, alias="filterTimeout")
    """How long Filter may search one node for devices, a Go duration (unset: 10s, as
    kube's default; ``0``: no limit; negative: refused). See :mod:`.filter_timeout`."""
    binding_timeout: str | None = Field(None, alias="bindingTimeout")
    """How long kube's PreBind waits for device binding conditions (default 10m).
    Accepted for compatibility; kubesched's PreBind does not wait."""

    _filter_timeout = field_validator("filter_timeout")(check_filter_timeout)


class DynamicResources(
    PreEnqueuePlugin,
    PreFilterPlugin,
    FilterPlugin,
    PostFilterPlugin,
    ScorePlugin,
    VectorScorePlugin,
    ClaimWrites,
    EnqueueExtensions,
    SignPlugin,
):
    name = NAME

    def __init__(self, args: Args, handle: Handle) -> None:
        self.args = args
        self._handle = handle
        self._tracker: ClaimTracker | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._group_lock = asyncio.Lock()

    @functools.cached_property
    def _limit(self) -> TimeLimit | None:
        """Filter's time limit, made on the first Filter that allocates (see .machinery)."""
        return time_limit(self.args.filter_timeout, self._handle)

    @property
    def tracker(self) -> ClaimTracker:
        if self._tracker is None:
            self._tracker = dra.tracker_for(self._handle.store)
        return self._tracker

    # -- events ------------------------------------------------------------------------------
    def events_to_register(self) -> list[ClusterEventWithHint]:
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE,
                    ActionType.ADD
                    | ActionType.UPDATE_NODE_LABEL
                    | ActionType.UPDATE_NODE_ALLOCATABLE,
                ),
                ungates=False,
            ),
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.RESOURCE_CLAIM,
                    ActionType.ADD | ActionType.UPDATE | ActionType.DELETE,
                ),
                self._claim_changed,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.DEVICE_CLASS, ActionType.ADD | ActionType.UPDATE),
                ungates=False,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.POD_GROUP, ActionType.ADD | ActionType.UPDATE),
                is_own_pod_group_change,
            ),
            ClusterEventWithHint(
                ClusterEvent(EventResource.RESOURCE_SLICE, ActionType.ADD | ActionType.UPDATE),
                ungates=False,
            ),
            # kube's TargetPod registration: the pod's own status names its generated
            # claims. (A pod PreEnqueue holds runs it again at any update of its own.)
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.UNSCHEDULED_POD, ActionType.UPDATE_POD_GENERATED_RESOURCE_CLAIM
                ),
                self._own_claims_named,
                ungates=False,
            ),
        ]  # PreEnqueue reads claims and PodGroups only: nodes, classes, slices never ungate

    def _own_claims_named(self, pod: Pod, old_obj: object, new_obj: object) -> bool:
        """kube's isSchedulableAfterTargetPodUpdate: every claim of the updated pod can
        now be found (named, in the store, not being deleted, its own)."""
        target = new_obj if isinstance(new_obj, Pod) else pod
        try:
            self._pod_claims(target)
        except ClaimNameError:
            return False
        return True

    def _claim_changed(self, pod: Pod, old_obj: object, new_obj: object) -> bool:
        """kube's isSchedulableAfterClaimChange."""
        old = old_obj if isinstance(old_obj, Mapping) else None
        new = new_obj if isinstance(new_obj, Mapping) else None
        if new is None:
            return bool(old is not None and (old.get("status") or {}).get("allocation"))
        meta = new.get("metadata") or {}
        uid = meta.get("uid")
        if not _deallocated(old, new) and not names_claim(pod, meta):
            return False  # what the lookup below says, without looking up every claim
        uses = False
        try:
            for _, raw, _ in self._pod_claims(pod):
                if (raw.get("metadata") or {}).get("uid") == uid:
                    uses = True
        except ClaimNameError:
            return False
        if _deallocated(old, new):
            return True  # devices were freed
        if not uses:
            return False
        if old is None:
            return True
        return (old.get("status") or {}) != (new.get("status") or {})

    def sign_pod(self, pod: Pod) -> tuple[list[SignFragment], Status | None]:
        if pod.spec.get("resourceClaims"):
            return unsignable("pods with dra resource claims are not signable")
        return [], None

    # -- claims of a pod ---------------------------------------------------------------------
    def _pod_claims(self, pod: Pod) -> list[tuple[str, Obj, dict[str, Any]]]:
        """kube's foreachPodResourceClaim, each claim with the consumer it is reserved
        for (kube's podResourceClaimBindings); ``ClaimNameError`` says why one is
        missing."""
        group_name = pod_group_name(pod)
        group = None if group_name is None else self.tracker.pod_group(pod.namespace, group_name)
        accept_group = group_claims_enabled(group)
        entries = {
            str(e.get("name") or ""): e
            for e in pod.spec.get("resourceClaims") or ()
            if isinstance(e, Mapping)
        }
        out: list[tuple[str, Obj, dict[str, Any]]] = []
        for pod_claim, name, check_owner in pod_claim_names(pod):
            raw = self.tracker.get_claim(pod.namespace, name)
            if raw is None:
                raise ClaimNameError(f'could not find ResourceClaim "{pod.namespace}/{name}"')
            if (raw.get("metadata") or {}).get("deletionTimestamp"):
                raise ClaimNameError(f'resourceclaim "{name}" is being deleted')
            if check_owner and (err := is_for_pod(pod, raw, accept_group)) is not None:
                raise ClaimNameError(err)
            out.append((pod_claim, raw, bind_to(pod, group, entries.get(pod_claim, {}))))
        return out

    def pre_enqueue(self, pod: Pod) -> Status | None:
        if not pod.spec.get("resourceClaims"):
            return None
        try:
            self._pod_claims(pod)
        except ClaimNameError as e:
            return Status.unresolvable(str(e), plugin=NAME)
        return None

    # -- PreFilter ---------------------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        data = StateData()
        state.write(STATE_KEY, data)
        found: list[tuple[str, Obj, dict[str, Any]]] = []
        if pod.spec.get("resourceClaims"):
            try:
                found = self._pod_claims(pod)
            except ClaimNameError as e:
                return None, Status.unresolvable(str(e), plugin=NAME)
        if not found and not pod.requests.scalar:
            return None, Status.skip()  # no claim, no extended resource: no DRA imported
        # Only a pod with a scalar request reads the store for DeviceClasses; a
        # framework without an object store reads none (see classes_of).
        data.extended = dra.find_extended_claim(pod, self._handle, lambda: self.tracker)
        if not found and data.extended is None:
            return None, Status.skip()
        tracker = self.tracker
        for index, (_, raw, binding) in enumerate(found):
            try:
                claim = tracker.parse_claim(raw)
                info = ClaimInfo(raw, claim, binding=binding)
                alloc = claim.allocation or shared_allocation(
                    tracker.pending.get(claim_id(claim)), binding
                )
                if alloc is not None:
                    if claim.allocation is None:
                        info.shared = alloc
                    if alloc.node_selector is not None:
                        info.available_on = compile_node_selector(
                            alloc.node_selector, "status.allocation.nodeSelector"
                        )
                    data.claims.append(info)
                    continue
            except ObjectError as e:
                return None, Status.as_error(f"resourceclaim {claim_key(raw)}: {e}", plugin=NAME)
            data.claims.append(info)
            data.to_allocate.append(index)
            if claim_id(claim) in tracker.pending:
                return None, Status.unresolvable(
                    f"resource claim {claim.key} is in the process of being allocated",
                    plugin=NAME,
                )
            for req in claim.requests:
                subs = (
                    [(req.name, req.exactly)]
                    if req.exactly is not None
                    else [(f"{req.name}/{s.name}", s) for s in req.first_available]
                )
                for qual, ex in subs:
                    status = self._validate_class(qual, ex.device_class_name)
                    if status is not None:
                        return None, status
        data.prepare_filter()
        if data.to_allocate or data.extended is not None:
            try:
                data.allocator = dra.Allocator(
                    tracker.classes(),
                    tracker.slices(),
                    tracker.allocated_state(),
                    tracker.cel,
                    tracker.pools,
                )
            except ObjectError as e:
                return None, Status.as_error(str(e), plugin=NAME)
        return None, None

    def _validate_class(self, request: str, class_name: str) -> Status | None:
        if not class_name:
            return Status.as_error(f"request {request}: unsupported request type", plugin=NAME)
        try:
            cls = self.tracker.device_class(class_name)
        except ObjectError as e:
            return Status.as_error(f"deviceclass {class_name}: {e}", plugin=NAME)
        if cls is None:
            return Status.unresolvable(
                f"request {request}: device class {class_name} does not exist", plugin=NAME
            )
        return None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    # -- Filter ------------------------------------------------------------------------------
    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        data: StateData | None = state.get(STATE_KEY)
        if data is None:
            return Status.as_error(f"cannot read {STATE_KEY!r} from cycleState", plugin=NAME)
        if not data.claims and data.extended is None:
            return None
        node = node_info.node
        if node is None:
            return Status.as_error("node not found", plugin=NAME)
        variant, status = dra.node_variant(data.extended, pod, node_info, NAME)
        if status is not None:
            return status
        if variant is None and not data.claims:
            return None  # device plugins serve all of the pod's extended resources here
        unavailable = (
            [i for i, sel in data.available_on if not sel.matches(node.labels, node.name)]
            if data.available_on
            else None
        )
        results: Callable[[], list[AllocationResult]] | None = None
        if data.allocator is not None:
            claims = data.allocating if variant is None else [*data.allocating, variant.claim]
            try:
                results = data.allocator.try_allocate(node, claims, self._limit)
            except dra.AllocationTimeout:
                return timed_out(node.name, NAME)
            except dra.NodeAllocationError as e:
                return Status.unresolvable(str(e), plugin=NAME)
            except dra.AllocationError as e:
                return Status.as_error(str(e), plugin=NAME)
            if results is None:
                return Status.unresolvable(dra.CANNOT_ALLOCATE, plugin=NAME)
        if unavailable:
            data.unavailable.update(unavailable)
            return Status.unresolvable(ERR_NOT_AVAILABLE, plugin=NAME)
        if results is not None:
            data.by_node[node.name] = results
            data.built.pop(node.name, None)
        if data.extended is not None:
            data.extended.set_variant(node.name, variant)
        return None

    def explain_filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> list[str]:
        """For ``kubesched explain``: which claim or request this node cannot satisfy
        and why (see :mod:`.explain`); empty when Filter had nothing to allocate."""
        data: StateData | None = state.get(STATE_KEY)
        node = node_info.node
        if data is None or data.allocator is None or node is None:
            return []
        claims = [data.claims[i].claim for i in data.to_allocate]
        variant, status = dra.node_variant(data.extended, pod, node_info, NAME)
        if status is not None:
            return [status.message()]
        if variant is not None:
            claims.append(variant.claim)
        return dra.explain_node(data.allocator, node, claims)

    # -- PostFilter --------------------------------------------------------------------------
    def post_filter(
        self, state: CycleState, pod: Pod, statuses: dict[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        data: StateData | None = state.get(STATE_KEY)
        if data is None:
            # An earlier PreFilter rejected the pod, so ours never ran: kube's PostFilter
            # fails to read its state and that error ("not found") ends the PostFilter
            # phase, preemption untried; the pod's message ends ". not found" as kube's.
            return None, Status.as_error(STATE_NOT_FOUND, plugin=NAME)
        if not data.claims and data.extended is None:
            return None, Status.unschedulable()
        for index in sorted(data.unavailable):
            raw = data.claims[index].raw
            reserved = (raw.get("status") or {}).get("reservedFor") or []
            if not reserved or (len(reserved) == 1 and reserved[0].get("uid") == pod.uid):
                self._spawn(self._deallocate(raw))
                return None, Status.unschedulable(DEALLOCATED, plugin=NAME)
        if data.extended is not None and data.extended.stale:
            self._spawn(self._delete_claim(data.extended.raw))
            return None, Status.unschedulable(dra.DELETED, plugin=NAME)
        return None, Status.unschedulable()

    # -- Score -------------------------------------------------------------------------------
    def score_vector(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64] | None:
        """Zeros at once unless a claim has a ``firstAvailable`` request (the only thing
        Score counts); otherwise ``score`` per node."""
        data: StateData | None = state.get(STATE_KEY)
        if data is not None and any(
            req.first_available for info in data.claims for req in info.claim.requests
        ):
            return None
        import numpy as np

        return np.zeros(len(rows), dtype=np.int64)

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        data: StateData | None = state.get(STATE_KEY)
        if data is None or not data.claims:
            return 0, None
        allocations = data.results_for(node_info.name)
        if allocations is None:
            return 0, None
        total = 0
        fresh = iter(allocations)
        for info in data.claims:
            alloc = info.claim.allocation or info.shared
            if alloc is None:
                alloc = next(fresh, None)
                if alloc is None:
                    return 0, Status.as_error(
                        f"number of allocations {len(allocations)} is smaller than number "
                        "of claims needing allocation",
                        plugin=NAME,
                    )
            chosen = {r.request for r in alloc.devices if r.request.count("/") == 1}
            for req in info.claim.requests:
                for i, sub in enumerate(req.first_available):
                    if f"{req.name}/{sub.name}" in chosen:
                        total += FIRST_AVAILABLE_MAX - i
        return total, None

    def normalize_score(
        self, state: CycleState, pod: Pod, scores: npt.NDArray[np.int64]
    ) -> Status | None:
        default_normalize_score(MAX_NODE_SCORE, False, scores)
        return None


def _deallocated(old: Mapping[str, Any] | None, new: Mapping[str, Any]) -> bool:
    return bool(
        old is not None
        and (old.get("status") or {}).get("allocation")
        and not (new.get("status") or {}).get("allocation")
    )


def new(args: Args, handle: Handle) -> DynamicResources:
    return DynamicResources(args, handle)
