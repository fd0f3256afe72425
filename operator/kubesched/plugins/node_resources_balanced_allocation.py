"""NodeResourcesBalancedAllocation: prefers nodes whose balance the pod would improve.

A node's balance is ``(1 - std) * 100`` truncated, where ``std`` is the standard
deviation of the fractions requested/allocatable (each capped at 1) of the configured
resources. Since kube-scheduler v1.37 the score compares the balance with the pod
(``with``) and without it (``without``): ``50 + (50 + with - without) / 2`` (integer
division), about 75 when the pod changes little, towards 100 when it evens the node
out, towards 50 when it skews it. It counts plain requests (no non-zero defaults), and
it is skipped for pods that request none of the resources (best-effort pods would
otherwise all pile onto one node). kube-scheduler's default profile gives it score
weight 1.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator

from kubesched.api import field_docstrings
from kubesched.framework.cycle_state import CycleState, StateKey
from kubesched.framework.helpers import (
    allocatable_and_requested,
    allocatable_and_requested_rows,
    pod_resource_request,
)
from kubesched.framework.interface import (
    MAX_NODE_SCORE,
    Handle,
    PreScorePlugin,
    ScorePlugin,
    VectorScorePlugin,
)
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.resources import CPU, MEMORY
from kubesched.framework.status import Status
from kubesched.framework.types import Pod

if TYPE_CHECKING:
    import numpy.typing as npt

    from kubesched.framework.snapshot import Snapshot

__all__ = ["NAME", "Args", "NodeResourcesBalancedAllocation", "ResourceSpec", "new"]

NAME = "NodeResourcesBalancedAllocation"

PRE_SCORE_STATE_KEY: StateKey[list[int]] = StateKey("PreScore" + NAME)

_MODEL_CONFIG = ConfigDict(
    extra="forbid",
    populate_by_name=True,
    use_attribute_docstrings=field_docstrings(),
    defer_build=True,
)


class ResourceSpec(BaseModel):
    model_config = _MODEL_CONFIG

    name: str = Field(min_length=1)
    """Resource name: cpu, memory, ephemeral-storage or a scalar resource."""
    weight: int = 1
    """Must be 1 (0 means the default, 1): the balance ignores weights."""

    @field_validator("weight")
    @classmethod
    def _weight_is_one(cls, v: int) -> int:
        if v == 0:
            return 1
        if v != 1:
            raise ValueError("must be 1")
        return v


def default_resources() -> list[ResourceSpec]:
    return [ResourceSpec(name=CPU, weight=1), ResourceSpec(name=MEMORY, weight=1)]


class Args(BaseModel):
    """NodeResourcesBalancedAllocationArgs."""

    model_config = _MODEL_CONFIG

    resources: list[ResourceSpec] = Field(default_factory=default_resources)
    """Resources whose balance is scored; empty means the default, cpu and memory."""

    @field_validator("resources")
    @classmethod
    def _defaults_and_unique(cls, v: list[ResourceSpec]) -> list[ResourceSpec]:
        seen: set[str] = set()
        for i, r in enumerate(v):
            if r.name in seen:
                raise ValueError(f"[{i}].name: duplicate resource {r.name!r}")
            seen.add(r.name)
        return v or default_resources()


def balanced_score(fractions: Sequence[float]) -> int:
    """``int((1 - std) * 100)`` over fractions already capped at 1."""
    n = len(fractions)
    std = 0.0
    if n == 2:
        std = abs((fractions[0] - fractions[1]) / 2)
    elif n > 2:
        total = 0.0
        for f in fractions:
            total += f
        mean = total / n
        acc = 0.0
        for f in fractions:
            acc = acc + (f - mean) * (f - mean)
        std = math.sqrt(acc / n)
    return int((1 - std) * MAX_NODE_SCORE)


def _go_div2(x: int) -> int:
    """``x / 2`` truncated toward zero, as Go's integer division."""
    return -((-x) // 2) if x < 0 else x // 2


def improvement_score(with_pod: int, without_pod: int) -> int:
    """kube-scheduler v1.37's ``balancedResourceScorer`` from the two balances."""
    half = MAX_NODE_SCORE // 2
    return half + _go_div2(half + with_pod - without_pod)


def _std_rows(cols: list[tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]], m: int) -> Any:
    """Per row, :func:`balanced_score` of the valid fractions (vector form)."""
    count = np.zeros(m, dtype=np.int64)
    total = np.zeros(m, dtype=np.float64)
    first = np.zeros(m, dtype=np.float64)
    second = np.zeros(m, dtype=np.float64)
    for valid, frac in cols:
        first = np.where(valid & (count == 0), frac, first)
        second = np.where(valid & (count == 1), frac, second)
        total = np.where(valid, total + frac, total)
        count += valid
    mean = total / np.where(count > 0, count, 1)
    acc = np.zeros(m, dtype=np.float64)
    for valid, frac in cols:
        acc = np.where(valid, acc + (frac - mean) * (frac - mean), acc)
    std = np.zeros(m, dtype=np.float64)
    std = np.where(count == 2, np.abs((first - second) / 2), std)
    wide = count > 2
    std = np.where(wide, np.sqrt(acc / np.where(wide, count, 1)), std)
    return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)


class NodeResourcesBalancedAllocation(PreScorePlugin, ScorePlugin, VectorScorePlugin):
    name = NAME

    def __init__(self, args: Args) -> None:
        self.resources = [r.name for r in args.resources]

    def pod_requests(self, pod: Pod) -> list[int]:
        return [pod_resource_request(pod, name, non_zero=False) for name in self.resources]

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        reqs = self.pod_requests(pod)
        if not any(reqs):
            return Status.skip()
        state.write(PRE_SCORE_STATE_KEY, reqs)
        return None

    def _score_requests(self, state: CycleState, pod: Pod) -> list[int] | None:
        """The pod's requests; None for a best-effort pod (its score is 0)."""
        reqs: list[int] | None = state.get(PRE_SCORE_STATE_KEY)
        if reqs is None:
            reqs = self.pod_requests(pod)
            if not any(reqs):
                return None
        return reqs

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        if not self.resources:
            return 0, Status.as_error("resources not found", plugin=NAME)
        reqs = self._score_requests(state, pod)
        if reqs is None:
            return 0, None
        with_pod: list[float] = []
        without_pod: list[float] = []
        for name, pod_req in zip(self.resources, reqs, strict=True):
            alloc, requested = allocatable_and_requested(
                node_info, name, pod_req, use_requested=True
            )
            if alloc == 0:
                continue
            with_pod.append(min(float(requested) / float(alloc), 1.0))
            without_pod.append(min(float(requested - pod_req) / float(alloc), 1.0))
        return improvement_score(balanced_score(with_pod), balanced_score(without_pod)), None

    def score_vector(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64] | None:
        if not self.resources:
            return None
        m = len(rows)
        reqs = self._score_requests(state, pod)
        if reqs is None:
            return np.zeros(m, dtype=np.int64)
        cols: list[tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]] = []
        base: list[tuple[npt.NDArray[np.bool_], npt.NDArray[np.float64]]] = []
        for name, pod_req in zip(self.resources, reqs, strict=True):
            ar = allocatable_and_requested_rows(snapshot, rows, name, pod_req, use_requested=True)
            if ar is None:
                continue
            alloc, requested = ar
            valid = alloc != 0
            denom = np.where(valid, alloc, 1).astype(np.float64)
            cols.append((valid, np.minimum(requested.astype(np.float64) / denom, 1.0)))
            allocated = (requested - pod_req).astype(np.float64)
            base.append((valid, np.minimum(allocated / denom, 1.0)))
        with_pod = _std_rows(cols, m)
        without_pod = _std_rows(base, m)
        half = MAX_NODE_SCORE // 2
        diff = half + with_pod - without_pod
        # Go's integer division truncates toward zero.
        return np.asarray(half + np.trunc(diff / 2).astype(np.int64), dtype=np.int64)

    def normalize_score(
        self, state: CycleState, pod: Pod, scores: npt.NDArray[np.int64]
    ) -> Status | None:
        return None


def new(args: Args, handle: Handle) -> NodeResourcesBalancedAllocation:
    return NodeResourcesBalancedAllocation(args)
