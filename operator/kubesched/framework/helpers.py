"""Helpers the in-tree plugins share: kube-scheduler's integer score arithmetic, resource
name classes and taint matching.

kube-scheduler computes scores with Go ``int64`` arithmetic, whose division truncates
toward zero; Python's ``//`` floors. :func:`go_div` and :func:`go_div_array` keep the Go
result wherever an operand may be negative (e.g. a falling RequestedToCapacityRatio shape).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.resources import CPU, EPHEMERAL_STORAGE, MEMORY, PODS
from kubesched.framework.types import Pod, Taint, Toleration

if TYPE_CHECKING:
    from kubesched.framework.snapshot import Snapshot

__all__ = [
    "DO_NOT_SCHEDULE_EFFECTS",
    "allocatable_and_requested",
    "allocatable_and_requested_rows",
    "broken_linear_function",
    "default_normalize_score",
    "find_matching_untolerated_taint",
    "go_div",
    "go_div_array",
    "go_round_div",
    "is_extended_resource_name",
    "is_prefixed_native_resource",
    "is_scalar_resource_name",
    "pod_resource_request",
    "tolerations_tolerate_taint",
]

I64 = npt.NDArray[np.int64]

DO_NOT_SCHEDULE_EFFECTS = frozenset(("NoSchedule", "NoExecute"))
"""Taint effects Filter enforces; PreferNoSchedule is a scoring matter."""

_DEFAULT_NAMESPACE_PREFIX = "kubernetes.io/"
_REQUESTS_PREFIX = "requests."


# -- Go integer arithmetic --------------------------------------------------------------------
def go_div(a: int, b: int) -> int:
    """``a / b`` on Go integers: the quotient truncated toward zero."""
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


def go_div_array(a: I64, b: I64 | int) -> I64:
    """Element-wise :func:`go_div`; ``b`` must be non-zero where the result is used."""
    b_arr = np.asarray(b, dtype=np.int64)
    safe = np.where(b_arr == 0, 1, b_arr)
    q = np.abs(a) // np.abs(safe)
    return np.where((a >= 0) == (safe >= 0), q, -q).astype(np.int64)


def broken_linear_function(shape: Sequence[tuple[int, int]]) -> Callable[[int], int]:
    """kube's ``BuildBrokenLinearFunction``: the piecewise linear function through
    ``(utilization, score)`` points, flat before the first and after the last point, Go
    integer interpolation between (NodeResourcesFit's RequestedToCapacityRatio and
    VolumeBinding's StorageCapacityScoring)."""

    def f(p: int) -> int:
        for i, (u, s) in enumerate(shape):
            if p <= u:
                if i == 0:
                    return s
                pu, ps = shape[i - 1]
                return ps + go_div((s - ps) * (p - pu), u - pu)
        return shape[-1][1]

    return f


def go_round_div(n: int, d: int) -> int:
    """``int64(math.Round(float64(n) / float64(d)))`` for ``n >= 0, d > 0``: halves round up.

    Exact in integers; equal to the float form for any score-sized operands.
    """
    q, r = divmod(n, d)
    return q + 1 if 2 * r >= d else q


def default_normalize_score(max_priority: int, reverse: bool, scores: I64) -> None:
    """kube-scheduler's ``helper.DefaultNormalizeScore``, in place.

    Scales ``scores`` so the highest becomes ``max_priority`` (``max * s / highest``,
    truncated); with ``reverse`` each becomes ``max_priority - scaled``. When every score
    is zero (or there are none), reversed scores all become ``max_priority`` and
    non-reversed ones stay zero.
    """
    if scores.size == 0:
        return
    highest = int(scores.max())
    if highest <= 0:
        if reverse:
            scores[:] = max_priority
        return
    scaled = go_div_array(scores * max_priority, highest)
    if reverse:
        scaled = max_priority - scaled
    scores[:] = scaled


# -- resource names ---------------------------------------------------------------------------
def is_prefixed_native_resource(name: str) -> bool:
    """A resource in the ``kubernetes.io/`` namespace."""
    return _DEFAULT_NAMESPACE_PREFIX in name


def is_extended_resource_name(name: str) -> bool:
    """An extended resource (``vendor.example/gpu``): a domain-prefixed name outside the
    ``kubernetes.io/`` namespace and not a quota ``requests.`` name. Only these can be
    ignored through NodeResourcesFit's ``ignoredResources``/``ignoredResourceGroups``."""
    if "/" not in name or is_prefixed_native_resource(name):
        return False
    return not name.startswith(_REQUESTS_PREFIX)


def is_scalar_resource_name(name: str) -> bool:
    """Extended, hugepages, prefixed native and attachable-volume resources: everything
    that is not cpu, memory, ephemeral-storage or pods."""
    return name not in (CPU, MEMORY, EPHEMERAL_STORAGE, PODS)


# -- resource allocation (NodeResourcesFit scoring, NodeResourcesBalancedAllocation) --------
def pod_resource_request(pod: Pod, name: str, *, non_zero: bool) -> int:
    """The pod's request of ``name``; with ``non_zero``, cpu and memory count containers
    without a request as 100m / 200Mi (kube-scheduler's scoring defaults)."""
    if non_zero:
        if name == CPU:
            return pod.non_zero_cpu
        if name == MEMORY:
            return pod.non_zero_memory
    return pod.requests.get(name)


def allocatable_and_requested(
    node_info: NodeInfo, name: str, pod_request: int, *, use_requested: bool
) -> tuple[int, int]:
    """``(allocatable, requested + pod_request)`` of one resource on one node, as
    kube-scheduler's resource allocation scorers see it.

    cpu and memory count the node's non-zero requests unless ``use_requested``;
    ephemeral-storage and scalar resources always count plain requests. ``(0, 0)``
    (the resource is left out of the score) for a scalar resource the pod does not
    request, one the node does not have, and for ``pods``.
    """
    if pod_request == 0 and is_scalar_resource_name(name):
        return 0, 0
    alloc = node_info.allocatable
    if name == CPU:
        used = node_info.requested if use_requested else node_info.non_zero_requested
        return alloc.milli_cpu, used.milli_cpu + pod_request
    if name == MEMORY:
        used = node_info.requested if use_requested else node_info.non_zero_requested
        return alloc.memory, used.memory + pod_request
    if name == EPHEMERAL_STORAGE:
        return alloc.ephemeral_storage, node_info.requested.ephemeral_storage + pod_request
    if name != PODS and name in alloc.scalar:
        return alloc.scalar[name], node_info.requested.scalar.get(name, 0) + pod_request
    return 0, 0


def allocatable_and_requested_rows(
    snapshot: Snapshot,
    rows: npt.NDArray[np.intp],
    name: str,
    pod_request: int,
    *,
    use_requested: bool,
) -> tuple[I64, I64] | None:
    """:func:`allocatable_and_requested` for the snapshot ``rows`` at once;
    ``None`` where every row would give ``(0, 0)``."""
    if pod_request == 0 and is_scalar_resource_name(name):
        return None
    if name == CPU:
        used = snapshot.req_cpu if use_requested else snapshot.nz_cpu
        return snapshot.alloc_cpu[rows], used[rows] + pod_request
    if name == MEMORY:
        used = snapshot.req_mem if use_requested else snapshot.nz_mem
        return snapshot.alloc_mem[rows], used[rows] + pod_request
    if name == EPHEMERAL_STORAGE:
        return snapshot.alloc_eph[rows], snapshot.req_eph[rows] + pod_request
    if name == PODS:
        return None
    return (
        snapshot.scalar_allocatable(name)[rows],
        snapshot.scalar_requested(name)[rows] + pod_request,
    )


# -- taints -----------------------------------------------------------------------------------
def tolerations_tolerate_taint(tolerations: Iterable[Toleration], taint: Taint) -> bool:
    return any(t.tolerates(taint) for t in tolerations)


def find_matching_untolerated_taint(
    taints: Sequence[Taint],
    tolerations: Sequence[Toleration],
    include: Callable[[Taint], bool] | None = None,
) -> Taint | None:
    """The first taint (in node order) that ``include`` selects and no toleration tolerates."""
    for taint in taints:
        if include is not None and not include(taint):
            continue
        if not tolerations_tolerate_taint(tolerations, taint):
            return taint
    return None
