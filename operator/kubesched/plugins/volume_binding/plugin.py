"""VolumeBinding: PersistentVolumeClaims a pod can use on a node, and the binding of
WaitForFirstConsumer claims, as kube-scheduler v1.37's plugin of that name.

- PreFilter: Skip for pods without PVC (or generic ephemeral) volumes. A missing claim,
  a ``Lost`` claim or one being deleted: UnschedulableAndUnresolvable with kube's
  message (``persistentvolumeclaim "data" not found``, ...). A claim that is not fully
  bound (``spec.volumeName`` plus the ``pv.kubernetes.io/bind-completed`` annotation)
  and not of a WaitForFirstConsumer StorageClass: UnschedulableAndUnresolvable
  ``pod has unbound immediate PersistentVolumeClaims``. It does not narrow the nodes
  (kube-scheduler 1.37 no longer narrows them to the hosts a bound local PV names: its
  Filter says why each other node does not fit).
- Filter (all UnschedulableAndUnresolvable): a bound PV's node affinity rejects the node
  ``node(s) didn't match PersistentVolume's node affinity`` (1.37's wording); a
  WaitForFirstConsumer claim finds neither an available matching PV (class, capacity,
  access and volume modes, selector, PV node affinity; the smallest wins, claims matched
  smallest first) nor dynamic provisioning (a provisioner other than
  ``kubernetes.io/no-provisioner`` whose ``allowedTopologies`` admit the node), or was
  already provisioned for another node: ``node(s) didn't find available persistent
  volumes to bind``; a bound claim's PV is
  gone: ``node(s) unavailable due to one or more pvc(s) bound to non-existent pv(s)``;
  a claim to provision through a CSIDriver with ``storageCapacity: true`` finds no
  CSIStorageCapacity of its class that selects the node (``nodeTopology``) and holds it
  (``maximumVolumeSize``, else ``capacity``): ``node(s) did not have enough free
  storage``.
- Score (StorageCapacityScoring, beta and on by default since v1.37): on a node where
  the pod would bind claims to existing PVs, per StorageClass the utilization
  ``requested * 100 / capacity`` (summed over those claims and PVs; 100 when over or
  without capacity) is mapped through ``shape`` (default: 0 % -> 10, 100 % -> 0, scores
  scaled by 10), and the node scores the rounded mean over classes: the PV that fits
  the claim most loosely wins. A node that binds none but provisions claims where a
  CSIStorageCapacity holds them scores the same way, against that capacity's
  ``capacity`` (once per class): the node with the most room wins. Other nodes score 0.
- Reserve assumes the chosen bindings (other pods see the PV as taken from the next
  cycle on); Unreserve reverts them; PreBind writes them through
  ``ClusterPort.bind_volume`` (static: the PV's claimRef; dynamic: the claim's
  ``volume.kubernetes.io/selected-node``).

Deliberate differences from kube-scheduler:

- Of several CSIStorageCapacity objects that hold a claim on a node, Score reads the
  first in the store's order (kube: the first its informer lists, in no fixed order);
  one without ``capacity`` scores as full (kube would dereference nil).
- PreBind does not wait (``bindTimeoutSeconds``) for the PV controller or an external
  provisioner to finish: it returns once the writes are accepted.
- In-tree to CSI migration of PV node affinity is not translated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from kubesched.framework.cluster_port import ClusterError, ObjectStore
from kubesched.framework.cycle_state import CycleState, StateKey
from kubesched.framework.helpers import broken_linear_function, go_round_div
from kubesched.framework.interface import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    EventResource,
    FilterPlugin,
    Handle,
    PreBindPlugin,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ReservePlugin,
    ScorePlugin,
)
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.status import Status
from kubesched.framework.storage import (
    PV,
    PVC,
    STORAGE_CLASS,
    ephemeral_owner_error,
    is_pvc_fully_bound,
    not_found,
    pod_claims,
    pv_capacity,
    pv_class,
    pvc_class,
    pvc_request,
    quantity_bytes,
)
from kubesched.framework.types import Pod
from kubesched.plugins.volume_binding.binder import (
    AffinityCache,
    AssumeCache,
    Capacities,
    DynamicProvision,
    PodVolumeClaims,
    PodVolumes,
    bind_volume_to_claim,
    find_pod_volumes,
    volume_limit,
    with_selected_node,
)

if TYPE_CHECKING:
    import numpy as np
    import numpy.typing as npt

__all__ = ["ERR_REASON_UNBOUND_IMMEDIATE", "NAME", "Args", "VolumeBinding", "new"]

NAME = "VolumeBinding"
STATE_KEY: StateKey[StateData] = StateKey(NAME)

ERR_REASON_UNBOUND_IMMEDIATE = "pod has unbound immediate PersistentVolumeClaims"

Obj = Mapping[str, Any]


MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10
"""Shape scores are given in 0..10 and scaled to 0..100."""


class UtilizationShapePoint(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    utilization: int
    """Storage utilization in percent (x axis), 0..100."""
    score: int
    """Score at that utilization (y axis), 0..10; scaled to 0..100."""


def default_shape() -> list[UtilizationShapePoint]:
    """kube-scheduler's default with StorageCapacityScoring: 0 % -> 10, 100 % -> 0."""
    return [
        UtilizationShapePoint(utilization=0, score=MAX_CUSTOM_PRIORITY_SCORE),
        UtilizationShapePoint(utilization=MAX_UTILIZATION, score=0),
    ]


class Args(BaseModel):
    """kube-scheduler's VolumeBindingArgs."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    bind_timeout_seconds: int = Field(600, alias="bindTimeoutSeconds", ge=0)
    """How long kube-scheduler's PreBind waits for bindings to complete (default 600).
    Accepted for compatibility; kubesched's PreBind does not wait."""
    shape: list[UtilizationShapePoint] = Field(default_factory=default_shape)
    """StorageCapacityScoring's utilization -> score points (empty: the default,
    0 % -> 10 and 100 % -> 0, which prefers the loosest-fitting PV)."""

    @field_validator("shape")
    @classmethod
    def _valid_shape(cls, v: list[UtilizationShapePoint]) -> list[UtilizationShapePoint]:
        # kube's validateFunctionShape, run on the defaulted value.
        if not v:
            return default_shape()
        errors: list[str] = []
        for i in range(1, len(v)):
            if v[i - 1].utilization >= v[i].utilization:
                errors.append(f"[{i}].utilization: values must be sorted in increasing order")
                break
        for i, point in enumerate(v):
            if not 0 <= point.utilization <= MAX_UTILIZATION:
                errors.append(f"[{i}].utilization: not in valid range [0, {MAX_UTILIZATION}]")
            if not 0 <= point.score <= MAX_CUSTOM_PRIORITY_SCORE:
                errors.append(f"[{i}].score: not in valid range [0, {MAX_CUSTOM_PRIORITY_SCORE}]")
        if errors:
            raise ValueError("; ".join(errors))
        return v


@dataclass(slots=True)
class StateData:
    claims: PodVolumeClaims | None = None
    bound_pvs: list[tuple[Obj, Obj | None]] = field(default_factory=list)
    by_node: dict[str, PodVolumes] = field(default_factory=dict)
    all_bound: bool = False
    capacities: Capacities | None = None


def is_delay_binding(pvc: Obj, store: ObjectStore) -> tuple[bool, str]:
    """(WaitForFirstConsumer?, error). No class or a missing class means Immediate."""
    name = pvc_class(pvc)
    if not name:
        return False, ""
    sc = store.get(STORAGE_CLASS, "", name)
    if sc is None:
        return False, ""
    mode = sc.get("volumeBindingMode")
    if mode is None:
        return False, f'VolumeBindingMode not set for StorageClass "{name}"'
    return mode == "WaitForFirstConsumer", ""


def _after_capacity_change(pod: Pod, old: object, new: object) -> bool:
    """kube's isSchedulableAfterCSIStorageCapacityChange: a new CSIStorageCapacity, or a
    larger volume limit (its class and node topology cannot change)."""
    if old is None:
        return True
    before, after = volume_limit(old), volume_limit(new)
    return after is not None and (before is None or after > before)


class VolumeBinding(
    PreFilterPlugin,
    FilterPlugin,
    PreScorePlugin,
    ScorePlugin,
    ReservePlugin,
    PreBindPlugin,
    EnqueueExtensions,
):
    name = NAME

    def __init__(self, args: Args, handle: Handle) -> None:
        self._handle = handle
        self.args = args
        self.pvc_cache = AssumeCache(lambda: handle.store, PVC, namespaced=True)
        self.pv_cache = AssumeCache(lambda: handle.store, PV, namespaced=False)
        self._affinity = AffinityCache()
        scale = 100 // MAX_CUSTOM_PRIORITY_SCORE
        self._shape = broken_linear_function([(p.utilization, p.score * scale) for p in args.shape])

    def events_to_register(self) -> list[ClusterEventWithHint]:
        add_update = ActionType.ADD | ActionType.UPDATE_OTHER
        return [
            ClusterEventWithHint(ClusterEvent(EventResource.STORAGE_CLASS, add_update)),
            ClusterEventWithHint(ClusterEvent(EventResource.PVC, add_update)),
            ClusterEventWithHint(ClusterEvent(EventResource.PV, add_update)),
            # Labels decide (PV node affinity); taints do not (queueing hints on).
            ClusterEventWithHint(
                ClusterEvent(EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL)
            ),
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_NODE, add_update)),
            ClusterEventWithHint(ClusterEvent(EventResource.CSI_DRIVER, ActionType.UPDATE_OTHER)),
            ClusterEventWithHint(
                ClusterEvent(EventResource.CSI_STORAGE_CAPACITY, add_update),
                _after_capacity_change,
            ),
        ]

    # -- PreFilter ---------------------------------------------------------------------------
    def _claims(self, pod: Pod) -> tuple[list[Obj], Status | None, bool]:
        """The pod's claims (from the assume cache), a failure, and whether it has any."""
        out: list[Obj] = []
        has = False
        for pc in pod_claims(pod):
            has = True
            pvc = self.pvc_cache.get(pod.namespace, pc.claim)
            if pvc is None:
                msg = (
                    "waiting for ephemeral volume controller to create the "
                    f'persistentvolumeclaim "{pc.claim}"'
                    if pc.ephemeral
                    else not_found(PVC, pc.claim)
                )
                return out, Status.unresolvable(msg, plugin=NAME), has
            if (pvc.get("status") or {}).get("phase") == "Lost":
                vname = (pvc.get("spec") or {}).get("volumeName") or ""
                return (
                    out,
                    Status.unresolvable(
                        f'persistentvolumeclaim "{pc.claim}" bound to non-existent '
                        f'persistentvolume "{vname}"',
                        plugin=NAME,
                    ),
                    has,
                )
            if (pvc.get("metadata") or {}).get("deletionTimestamp"):
                return (
                    out,
                    Status.unresolvable(
                        f'persistentvolumeclaim "{pc.claim}" is being deleted', plugin=NAME
                    ),
                    has,
                )
            if pc.ephemeral:
                err = ephemeral_owner_error(pod, pvc)
                if err is not None:
                    return out, Status.unresolvable(err, plugin=NAME), has
            out.append(pvc)
        return out, None, has

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        pvcs, status, has = self._claims(pod)
        if not has:
            state.write(STATE_KEY, StateData(all_bound=True))
            return None, Status.skip()
        if status is not None:
            return None, status
        store = self._handle.store
        claims = PodVolumeClaims()
        for pvc in pvcs:
            if is_pvc_fully_bound(pvc):
                claims.bound.append(pvc)
                continue
            delay, err = is_delay_binding(pvc, store)
            if err:
                return None, Status.as_error(err, plugin=NAME)
            if delay and not (pvc.get("spec") or {}).get("volumeName"):
                claims.unbound_delay.append(pvc)
            else:
                claims.unbound_immediate.append(pvc)
        if claims.unbound_immediate:
            return None, Status.unresolvable(ERR_REASON_UNBOUND_IMMEDIATE, plugin=NAME)
        if claims.unbound_delay:
            all_pvs = self.pv_cache.list()
            for pvc in claims.unbound_delay:
                cls = pvc_class(pvc)
                if cls not in claims.pvs_by_class:
                    claims.pvs_by_class[cls] = [pv for pv in all_pvs if pv_class(pv) == cls]
        data = StateData(claims=claims, capacities=Capacities(store))
        for pvc in claims.bound:
            data.bound_pvs.append((pvc, self.pv_cache.get("", str(pvc["spec"]["volumeName"]))))
        state.write(STATE_KEY, data)
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    # -- Filter ------------------------------------------------------------------------------
    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        data: StateData | None = state.get(STATE_KEY)
        if data is None:
            return Status.as_error(f"cannot read {STATE_KEY!r} from cycleState", plugin=NAME)
        if data.claims is None:
            return None
        node = node_info.node
        if node is None:
            return Status.as_error("node not found", plugin=NAME)
        try:
            found = find_pod_volumes(
                data.claims,
                data.bound_pvs,
                node.name,
                node.labels,
                self._handle.store,
                self._affinity,
                data.capacities or Capacities(self._handle.store),
            )
        except ValueError as e:  # a malformed selector or node affinity
            return Status.as_error(str(e), plugin=NAME)
        if found.error:
            return Status.as_error(found.error, plugin=NAME)
        if found.reasons:
            return Status.unresolvable(*found.reasons, plugin=NAME)
        data.by_node[node.name] = found.volumes
        return None

    # -- PreScore / Score --------------------------------------------------------------------
    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        """Skip unless some node would bind a claim to an existing PV or provision one
        where a CSIStorageCapacity has room: every node scores 0 otherwise, which adds
        nothing."""
        data: StateData | None = state.get(STATE_KEY)
        if data is None or not any(
            v.static_bindings or any(d.capacity is not None for d in v.dynamic_provisions)
            for v in data.by_node.values()
        ):
            return Status.skip()
        return None

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        data: StateData | None = state.get(STATE_KEY)
        if data is None:
            return 0, Status.as_error(f"cannot read {STATE_KEY!r} from cycleState", plugin=NAME)
        volumes = data.by_node.get(node_info.name)
        if volumes is None:
            return 0, None
        per_class: dict[str, list[int]] = {}
        if volumes.static_bindings:
            for b in volumes.static_bindings:
                cls = str((b.pv.get("spec") or {}).get("storageClassName") or "")
                acc = per_class.setdefault(cls, [0, 0])
                acc[0] += pvc_request(b.pvc)
                acc[1] += pv_capacity(b.pv)
        else:
            # kube: the node's capacity for the class, once (two claims of one class
            # share it), against the sum of their requests
            for d in volumes.dynamic_provisions:
                if d.capacity is None:
                    continue
                acc = per_class.setdefault(pvc_class(d.pvc), [0, 0])
                acc[0] += pvc_request(d.pvc)
                acc[1] = quantity_bytes(d.capacity.get("capacity"))
        return self._capacity_score(per_class.values()), None

    def _capacity_score(self, classes: Any) -> int:
        """kube's buildScorerFunction: the rounded mean over classes of shape(utilization)."""
        total = n = 0
        for requested, capacity in classes:
            if capacity == 0 or requested > capacity:
                utilization = MAX_UTILIZATION
            else:
                utilization = requested * MAX_UTILIZATION // capacity
            total += self._shape(utilization)
            n += 1
        return go_round_div(total, n) if n else 0

    def normalize_score(
        self, state: CycleState, pod: Pod, scores: npt.NDArray[np.int64]
    ) -> Status | None:
        return None

    # -- Reserve / Unreserve -----------------------------------------------------------------
    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        data: StateData | None = state.get(STATE_KEY)
        if data is None:
            return Status.as_error(f"cannot read {STATE_KEY!r} from cycleState", plugin=NAME)
        volumes = data.by_node.get(node_name)
        if volumes is None:
            data.all_bound = True
            return None
        if not volumes.static_bindings and not volumes.dynamic_provisions:
            data.all_bound = True
            return None
        for b in volumes.static_bindings:
            b.pv = bind_volume_to_claim(b.pv, b.pvc)
            self.pv_cache.assume(b.pv)
        volumes.dynamic_provisions = [
            DynamicProvision(with_selected_node(d.pvc, node_name), d.capacity)
            for d in volumes.dynamic_provisions
        ]
        for d in volumes.dynamic_provisions:
            self.pvc_cache.assume(d.pvc)
        data.all_bound = False
        return None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        data: StateData | None = state.get(STATE_KEY)
        if data is None:
            return
        volumes = data.by_node.get(node_name)
        if volumes is None:
            return
        for b in volumes.static_bindings:
            self.pv_cache.restore(b.pv)
        for d in volumes.dynamic_provisions:
            self.pvc_cache.restore(d.pvc)

    # -- PreBind -----------------------------------------------------------------------------
    def pre_bind_pre_flight(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        """kube's PreBindPreFlight: PreBind has work unless every claim is bound
        (Skip); an Error when the node has no volume decisions."""
        data: StateData | None = state.get(STATE_KEY)
        if data is None or data.all_bound:
            return Status.skip()
        if node_name not in data.by_node:
            return Status.as_error(f'no pod volumes found for node "{node_name}"', plugin=NAME)
        return None

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        data: StateData | None = state.get(STATE_KEY)
        if data is None:
            return Status.as_error(f"cannot read {STATE_KEY!r} from cycleState", plugin=NAME)
        if data.all_bound:
            return None
        volumes = data.by_node.get(node_name)
        if volumes is None:
            return Status.as_error(f'no pod volumes found for node "{node_name}"', plugin=NAME)
        cluster = self._handle.cluster
        try:
            for b in volumes.static_bindings:
                await cluster.bind_volume(b.pvc, str(b.pv["metadata"]["name"]), None)
            for d in volumes.dynamic_provisions:
                await cluster.bind_volume(d.pvc, None, node_name)
        except ClusterError as e:
            return Status.as_error(e, plugin=NAME)
        return None


def new(args: Args, handle: Handle) -> VolumeBinding:
    return VolumeBinding(args, handle)
