"""NodeResourcesFit: a pod fits a node only if the node's allocatable resources cover the
pod's requests on top of what is already requested there; among fitting nodes, a
scoring strategy (LeastAllocated by default, MostAllocated, RequestedToCapacityRatio)
ranks them by how allocated they would be.

Filter compares plain requests. An extended resource a DeviceClass serves (DRA
extended resources, GA in 1.37: ``spec.extendedResourceName`` or the implicit
``deviceclass.resource.kubernetes.io/<class>``) is not checked on a node whose allocatable
has none of it: DynamicResources allocates it there (kube's shouldDelegateResourceToDRA).
Such pods are not batched ("signature disabled when dra extended resources are used in
the cluster"). Scoring counts cpu and memory with kube-scheduler's
non-zero defaults (a container without a request counts as 100m cpu / 200Mi memory),
so best-effort pods still spread; a scalar resource the pod does not request is left
out of the score. kube-scheduler's default profile gives this plugin's score weight 1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

import numpy as np

from kubesched.framework.cycle_state import CycleState, StateKey
from kubesched.framework.helpers import (
    allocatable_and_requested,
    allocatable_and_requested_rows,
    broken_linear_function,
    go_round_div,
    is_extended_resource_name,
    pod_resource_request,
)
from kubesched.framework.interface import (
    MAX_NODE_SCORE,
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    EventResource,
    FilterPlugin,
    Handle,
    PreFilterExtensions,
    PreFilterPlugin,
    PreFilterResult,
    PreScorePlugin,
    ScorePlugin,
    VectorDiagnosePlugin,
    VectorFilterPlugin,
    VectorScorePlugin,
)
from kubesched.framework.memo import remember
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.resources import Resource
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Node, Pod
from kubesched.plugins.node_resources_fit.args import (
    MAX_CUSTOM_PRIORITY_SCORE,
    MAX_UTILIZATION,
    Args,
    RequestedToCapacityRatioParam,
    ResourceSpec,
    ScoringStrategy,
    ScoringStrategyType,
    UtilizationShapePoint,
)

if TYPE_CHECKING:
    import numpy.typing as npt

    from kubesched.framework.snapshot import Snapshot

__all__ = [
    "NAME",
    "Args",
    "NodeResourcesFit",
    "ResourceSpec",
    "ScoringStrategy",
    "ScoringStrategyType",
    "UtilizationShapePoint",
    "new",
]

NAME = "NodeResourcesFit"

PRE_FILTER_STATE_KEY: StateKey[Resource] = StateKey("PreFilter" + NAME)
PRE_SCORE_STATE_KEY: StateKey[list[int]] = StateKey("PreScore" + NAME)
DRA_STATE_KEY: StateKey[frozenset[str]] = StateKey("DRAExtendedResources" + NAME)
"""The pod's extended resources a DeviceClass serves (PreFilter's view)."""

REASON_TOO_MANY_PODS = "Too many pods"


# -- scoring functions (kube-scheduler's integer arithmetic) -------------------------------------
def least_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_requested_score(requested: int, capacity: int) -> int:
    if capacity == 0:
        return 0
    # requested can exceed capacity: non-zero defaults count pods that request nothing.
    requested = min(requested, capacity)
    return requested * MAX_NODE_SCORE // capacity


def _rtcr_table(param: RequestedToCapacityRatioParam) -> npt.NDArray[np.int64]:
    scale = MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE
    f = broken_linear_function([(p.utilization, p.score * scale) for p in param.shape])
    return np.array([f(p) for p in range(MAX_UTILIZATION + 1)], dtype=np.int64)


def _utilization(requested: int, capacity: int) -> int:
    if capacity == 0 or requested > capacity:
        return MAX_UTILIZATION
    return requested * MAX_UTILIZATION // capacity


# -- the plugin ---------------------------------------------------------------------------------
class NodeResourcesFit(
    PreFilterPlugin,
    FilterPlugin,
    VectorFilterPlugin,
    VectorDiagnosePlugin,
    PreScorePlugin,
    ScorePlugin,
    VectorScorePlugin,
    EnqueueExtensions,
):
    name = NAME

    def __init__(self, args: Args, handle: Handle | None = None) -> None:
        self.args = args
        self._handle = handle
        self._ignored = frozenset(args.ignored_resources)
        self._ignored_groups = frozenset(args.ignored_resource_groups)
        strategy = args.scoring_strategy
        self.strategy = strategy.type
        self.resources = [(r.name, r.weight) for r in strategy.resources]
        self._table: npt.NDArray[np.int64] | None = None
        if strategy.requested_to_capacity_ratio is not None:
            self._table = _rtcr_table(strategy.requested_to_capacity_ratio)
        self._table_list: list[int] = [] if self._table is None else self._table.tolist()
        self._rejections: dict[tuple[tuple[str, bool], ...], Status] = {}
        """One Status per combination of lacking resources (Statuses are not changed)."""

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # A deleted or scaled-down pod frees resources; a new node or more allocatable adds
        # them. The hints are kube-scheduler v1.37's (DRA extended resources aside).
        return [
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.POD, ActionType.DELETE | ActionType.UPDATE_POD_SCALE_DOWN
                ),
                _after_pod_event,
            ),
            ClusterEventWithHint(
                ClusterEvent(
                    EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_ALLOCATABLE
                ),
                self._after_node_change,
            ),
            # A pod may wait for a class that serves its extended resource.
            ClusterEventWithHint(
                ClusterEvent(EventResource.DEVICE_CLASS, ActionType.ADD | ActionType.UPDATE),
                _after_device_class_change,
            ),
        ]

    def dra_backed(self, pod: Pod) -> frozenset[str]:
        """The pod's non-zero extended resource requests a DeviceClass serves."""
        if self._handle is None or not pod.requests.scalar:
            return frozenset()  # (classes_of's answer, without importing the DRA package)
        from kubesched.framework.dra.extended import classes_of

        return classes_of(self._handle, pod.requests.scalar).backed(pod.requests.scalar)

    def _after_node_change(self, pod: Pod, old: object, new: object) -> bool:
        return _after_node_change(pod, old, new, self.dra_backed(pod))

    # -- PreFilter / Filter ---------------------------------------------------------------
    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        state.write(PRE_FILTER_STATE_KEY, pod.requests)
        state.write(DRA_STATE_KEY, self.dra_backed(pod))
        return None, None

    def pre_filter_extensions(self) -> PreFilterExtensions | None:
        return None

    def _requests(self, state: CycleState, pod: Pod) -> Resource:
        req: Resource | None = state.get(PRE_FILTER_STATE_KEY)
        return pod.requests if req is None else req

    def _dra(self, state: CycleState, pod: Pod) -> frozenset[str]:
        got: frozenset[str] | None = state.get(DRA_STATE_KEY)
        return self.dra_backed(pod) if got is None else got

    def _checked_scalars(self, req: Resource) -> list[tuple[str, int]]:
        """The pod's non-zero scalar requests Filter checks, in name order."""
        out = []
        for name in sorted(req.scalar):
            q = req.scalar[name]
            if q == 0:
                continue
            if is_extended_resource_name(name) and (
                name in self._ignored
                or (self._ignored_groups and name.split("/", 1)[0] in self._ignored_groups)
            ):
                continue
            out.append((name, q))
        return out

    def insufficient_resources(
        self, req: Resource, node_info: NodeInfo, dra: frozenset[str] = frozenset()
    ) -> list[tuple[str, bool]]:
        """``(reason, unresolvable)`` for each resource the node lacks, in kube-scheduler's
        order: pods, cpu, memory, ephemeral-storage, scalar resources. Unresolvable: the
        request exceeds the node's whole allocatable, so no preemption can help. A
        resource of ``dra`` the node has none of is left to DynamicResources."""
        return self._lacking(
            req, node_info.allocatable, len(node_info.pods), node_info.requested, dra
        )

    def filter_as_if(
        self,
        state: CycleState,
        pod: Pod,
        node_info: NodeInfo,
        removed: Sequence[Pod],
        added: Sequence[Pod],
    ) -> Status | None:
        """What ``filter`` returns on a copy of ``node_info`` with ``removed`` (pods on it)
        taken off and ``added`` put on, without the copy: the figures are the ones
        ``NodeInfo.remove_pod``/``add_pod`` change, and no PreFilter extension touches what
        this plugin reads."""
        used = node_info.requested
        if removed or added:
            used = used.copy()
            for p in removed:
                used.add(p.requests, -1)
            for p in added:
                used.add(p.requests)
        count = len(node_info.pods) - len(removed) + len(added)
        lacking = self._lacking(
            self._requests(state, pod), node_info.allocatable, count, used, self._dra(state, pod)
        )
        return self._rejection(lacking) if lacking else None

    def _lacking(
        self, req: Resource, alloc: Resource, pods: int, used: Resource, dra: frozenset[str]
    ) -> list[tuple[str, bool]]:
        """``insufficient_resources`` over figures: the node's allocatable, the number of
        pods on it and their requests."""
        out: list[tuple[str, bool]] = []
        if pods + 1 > alloc.allowed_pods:
            out.append((REASON_TOO_MANY_PODS, False))
        if not (req.milli_cpu or req.memory or req.ephemeral_storage or req.scalar):
            return out
        if req.milli_cpu > 0 and req.milli_cpu > alloc.milli_cpu - used.milli_cpu:
            out.append(("Insufficient cpu", req.milli_cpu > alloc.milli_cpu))
        if req.memory > 0 and req.memory > alloc.memory - used.memory:
            out.append(("Insufficient memory", req.memory > alloc.memory))
        if req.ephemeral_storage > 0 and (
            req.ephemeral_storage > alloc.ephemeral_storage - used.ephemeral_storage
        ):
            out.append(
                ("Insufficient ephemeral-storage", req.ephemeral_storage > alloc.ephemeral_storage)
            )
        for name, q in self._checked_scalars(req) if req.scalar else ():
            a = alloc.scalar.get(name, 0)
            if a <= 0 and name in dra:
                continue
            if q > a - used.scalar.get(name, 0):
                out.append((f"Insufficient {name}", q > a))
        return out

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        lacking = self.insufficient_resources(
            self._requests(state, pod), node_info, self._dra(state, pod)
        )
        return self._rejection(lacking) if lacking else None

    def _rejection(self, lacking: list[tuple[str, bool]]) -> Status:
        key = tuple(lacking)
        st = self._rejections.get(key)
        if st is None:
            code = (
                Code.UNSCHEDULABLE_AND_UNRESOLVABLE
                if any(u for _, u in lacking)
                else Code.UNSCHEDULABLE
            )
            st = Status(code, *(r for r, _ in lacking), plugin=NAME)
            remember(self._rejections, key, st, 256)  # extended resources' names: open-ended
        return st

    def filter_mask(
        self, state: CycleState, pod: Pod, snapshot: Snapshot
    ) -> npt.NDArray[np.bool_] | None:
        req = self._requests(state, pod)
        s = snapshot
        mask: npt.NDArray[np.bool_] = s.req_pods + 1 <= s.alloc_pods
        if req.milli_cpu > 0:
            mask &= req.milli_cpu <= s.alloc_cpu - s.req_cpu
        if req.memory > 0:
            mask &= req.memory <= s.alloc_mem - s.req_mem
        if req.ephemeral_storage > 0:
            mask &= req.ephemeral_storage <= s.alloc_eph - s.req_eph
        dra = self._dra(state, pod)
        for name, q in self._checked_scalars(req):
            alloc = s.scalar_allocatable(name)
            fits = q <= alloc - s.scalar_requested(name)
            mask &= (fits | (alloc <= 0)) if name in dra else fits
        return mask

    def filter_statuses(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: npt.NDArray[np.intp]
    ) -> list[Status | None] | None:
        # insufficient_resources over the columns: each check a bit (lacking) and the bit
        # above it (lacking and unresolvable); one Status per distinct combination.
        req = self._requests(state, pod)
        s = snapshot
        checks: list[tuple[str, npt.NDArray[np.bool_], npt.NDArray[np.bool_] | None]] = [
            (REASON_TOO_MANY_PODS, s.req_pods[rows] + 1 > s.alloc_pods[rows], None)
        ]
        dra = self._dra(state, pod)
        columns = [
            ("Insufficient cpu", req.milli_cpu, s.alloc_cpu, s.req_cpu, False),
            ("Insufficient memory", req.memory, s.alloc_mem, s.req_mem, False),
            (
                "Insufficient ephemeral-storage",
                req.ephemeral_storage,
                s.alloc_eph,
                s.req_eph,
                False,
            ),
        ]
        columns += [
            (
                f"Insufficient {name}",
                q,
                s.scalar_allocatable(name),
                s.scalar_requested(name),
                name in dra,  # left to DynamicResources where the node has none
            )
            for name, q in self._checked_scalars(req)
        ]
        if len(columns) >= 31:
            return None  # more bits than an int64 holds: node by node
        for reason, q, alloc, used, delegated in columns:
            if q > 0:
                a = alloc[rows]
                lacking = q > a - used[rows]
                if delegated:
                    lacking &= a > 0
                checks.append((reason, lacking, q > a))
        codes = np.zeros(len(rows), dtype=np.int64)
        for bit, (_, lacking, unresolvable) in enumerate(checks):
            codes |= lacking.astype(np.int64) << (2 * bit)
            if unresolvable is not None:
                codes |= (lacking & unresolvable).astype(np.int64) << (2 * bit + 1)
        distinct, inverse = np.unique(codes, return_inverse=True)
        table = [self._status_of(int(c), checks) for c in distinct.tolist()]
        return [table[i] for i in inverse.tolist()]

    def _status_of(self, code: int, checks: Sequence[tuple[str, object, object]]) -> Status | None:
        """The Status of one combination of ``filter_statuses``' bits (lacking, and
        unresolvable, per check), as :meth:`_rejection` makes it for ``filter``."""
        if code == 0:
            return None
        return self._rejection(
            [
                (r, bool(code >> (2 * bit + 1) & 1))
                for bit, (r, _, _) in enumerate(checks)
                if code >> (2 * bit) & 1
            ]
        )

    # -- PreScore / Score -----------------------------------------------------------------
    def pod_requests(self, pod: Pod) -> list[int]:
        """The pod's request of each scored resource (cpu/memory with non-zero defaults)."""
        return [pod_resource_request(pod, name, non_zero=True) for name, _ in self.resources]

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        state.write(PRE_SCORE_STATE_KEY, self.pod_requests(pod))
        return None

    def _score_requests(self, state: CycleState, pod: Pod) -> list[int]:
        reqs: list[int] | None = state.get(PRE_SCORE_STATE_KEY)
        return self.pod_requests(pod) if reqs is None else reqs

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        if not self.resources:
            return 0, Status.as_error("resources not found", plugin=NAME)
        reqs = self._score_requests(state, pod)
        node_score = weight_sum = 0
        rtcr = self.strategy is ScoringStrategyType.REQUESTED_TO_CAPACITY_RATIO
        for (name, weight), pod_req in zip(self.resources, reqs, strict=True):
            alloc, requested = allocatable_and_requested(
                node_info, name, pod_req, use_requested=False
            )
            if alloc == 0:
                continue
            if self.strategy is ScoringStrategyType.LEAST_ALLOCATED:
                s = least_requested_score(requested, alloc)
            elif self.strategy is ScoringStrategyType.MOST_ALLOCATED:
                s = most_requested_score(requested, alloc)
            else:
                s = self._table_list[_utilization(requested, alloc)]
                if s <= 0:
                    continue
            node_score += s * weight
            weight_sum += weight
        if weight_sum == 0:
            return 0, None
        if rtcr:
            return go_round_div(node_score, weight_sum), None
        return node_score // weight_sum, None

    def score_vector(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64] | None:
        if not self.resources:
            return None
        reqs = self._score_requests(state, pod)
        n = len(rows)
        node_score = np.zeros(n, dtype=np.int64)
        weight_sum = np.zeros(n, dtype=np.int64)
        for (name, weight), pod_req in zip(self.resources, reqs, strict=True):
            ar = allocatable_and_requested_rows(snapshot, rows, name, pod_req, use_requested=False)
            if ar is None:
                continue
            alloc, requested = ar
            valid = alloc != 0
            safe = np.where(valid, alloc, 1)
            over = requested > alloc
            if self.strategy is ScoringStrategyType.LEAST_ALLOCATED:
                s = np.where(over, 0, (safe - requested) * MAX_NODE_SCORE // safe)
            elif self.strategy is ScoringStrategyType.MOST_ALLOCATED:
                s = np.minimum(requested, alloc) * MAX_NODE_SCORE // safe
            else:
                assert self._table is not None
                util = np.where(over, MAX_UTILIZATION, requested * MAX_UTILIZATION // safe)
                s = self._table[np.clip(util, 0, MAX_UTILIZATION)]
                valid &= s > 0
            node_score += np.where(valid, s * weight, 0)
            weight_sum += np.where(valid, weight, 0)
        has = weight_sum > 0
        safe_w = np.where(has, weight_sum, 1)
        if self.strategy is ScoringStrategyType.REQUESTED_TO_CAPACITY_RATIO:
            q, r = np.divmod(node_score, safe_w)
            out = q + (2 * r >= safe_w)
        else:
            out = node_score // safe_w
        return np.where(has, out, 0).astype(np.int64)

    def score_placement(self, nodes: Sequence[NodeInfo]) -> int:
        """kube-scheduler 1.37's ScorePlacement: the scoring strategy applied to a whole
        topology domain, its allocatable and requested resources summed over its nodes
        (the gang's members already on them), 0-100."""
        node_score = weight_sum = 0
        for name, weight in self.resources:
            alloc = requested = 0
            for ni in nodes:
                a, r = allocatable_and_requested(ni, name, 0, use_requested=False)
                alloc += a
                requested += r
            if alloc == 0:
                continue
            if self.strategy is ScoringStrategyType.LEAST_ALLOCATED:
                s = least_requested_score(requested, alloc)
            elif self.strategy is ScoringStrategyType.MOST_ALLOCATED:
                s = most_requested_score(requested, alloc)
            else:
                s = self._table_list[_utilization(requested, alloc)]
            node_score += s * weight
            weight_sum += weight
        return node_score // weight_sum if weight_sum else 0

    def normalize_score(
        self, state: CycleState, pod: Pod, scores: npt.NDArray[np.int64]
    ) -> Status | None:
        return None


# -- queueing hints -------------------------------------------------------------------------------
def _after_pod_event(pod: Pod, old: object, new: object) -> bool:
    """A deleted pod that was placed or nominated; the pod's own scale-down; another
    placed pod scaled down in a resource this pod requests."""
    if not isinstance(old, Pod):
        return True
    if new is None:
        return bool(old.node_name or old.nominated_node_name)
    if not isinstance(new, Pod):
        return True
    if new.uid == pod.uid:
        return True
    if not new.node_name:
        return False
    want, before, after = pod.requests, old.requests, new.requests
    if want.milli_cpu and before.milli_cpu > after.milli_cpu:
        return True
    if want.memory and before.memory > after.memory:
        return True
    if want.ephemeral_storage and before.ephemeral_storage > after.ephemeral_storage:
        return True
    return any(
        q and before.scalar.get(name, 0) > after.scalar.get(name, 0)
        for name, q in want.scalar.items()
    )


def _fits_empty(req: Resource, alloc: Resource, dra: frozenset[str] = frozenset()) -> bool:
    """kube's isFit: the pod fits the node with nothing on it (no resource ignored; one
    of ``dra`` the node has none of is left to DynamicResources)."""
    if alloc.allowed_pods < 1:
        return False
    if req.milli_cpu > alloc.milli_cpu or req.memory > alloc.memory:
        return False
    if req.ephemeral_storage > alloc.ephemeral_storage:
        return False
    return all(
        q <= alloc.scalar.get(name, 0) or (name in dra and alloc.scalar.get(name, 0) <= 0)
        for name, q in req.scalar.items()
        if q
    )


def _after_node_change(
    pod: Pod, old: object, new: object, dra: frozenset[str] = frozenset()
) -> bool:
    """A node the pod would fit on alone that is new, or whose allocatable grew in the
    pod count or in a resource the pod requests (or has none of a resource of ``dra``,
    which DynamicResources may serve there)."""
    if not isinstance(new, Node):
        return True
    req, alloc = pod.requests, new.allocatable
    if not _fits_empty(req, alloc, dra):
        return False
    if not isinstance(old, Node):
        return True
    before = old.allocatable
    if alloc.allowed_pods > before.allowed_pods:
        return True
    if (
        (req.milli_cpu and alloc.milli_cpu > before.milli_cpu)
        or (req.memory and alloc.memory > before.memory)
        or (req.ephemeral_storage and alloc.ephemeral_storage > before.ephemeral_storage)
    ):
        return True
    return any(
        q
        and (
            alloc.scalar.get(name, 0) > before.scalar.get(name, 0)
            or (name in dra and alloc.scalar.get(name, 0) <= 0)
        )
        for name, q in req.scalar.items()
    )


def _after_device_class_change(pod: Pod, old: object, new: object) -> bool:
    """kube's isSchedulableAfterDeviceClassEvent: a class that now serves an extended
    resource the pod requests (its implicit name only on add: a class keeps its name)."""
    if not isinstance(new, Mapping):
        return True
    new_ext = (new.get("spec") or {}).get("extendedResourceName")
    if isinstance(old, Mapping):
        if (old.get("spec") or {}).get("extendedResourceName") == new_ext:
            return False
    else:
        from kubesched.framework.dra.extended import DEVICE_CLASS_PREFIX

        name = (new.get("metadata") or {}).get("name")
        if pod.requests.scalar.get(f"{DEVICE_CLASS_PREFIX}{name}") is not None:
            return True
    return bool(new_ext) and pod.requests.scalar.get(str(new_ext)) is not None


def new(args: Args, handle: Handle) -> NodeResourcesFit:
    return NodeResourcesFit(args, handle)
