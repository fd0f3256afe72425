"""NodeResourcesFitArgs: kube-scheduler's field names, defaults and validation (the
plugin is :mod:`kubesched.plugins.node_resources_fit`)."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from kubesched.api import field_docstrings
from kubesched.framework.resources import CPU, MEMORY

__all__ = [
    "MAX_CUSTOM_PRIORITY_SCORE",
    "MAX_UTILIZATION",
    "Args",
    "RequestedToCapacityRatioParam",
    "ResourceSpec",
    "ScoringStrategy",
    "ScoringStrategyType",
    "UtilizationShapePoint",
    "default_resources",
]

MAX_UTILIZATION = 100
MAX_CUSTOM_PRIORITY_SCORE = 10
"""Shape scores are given in 0..10 and scaled to 0..MAX_NODE_SCORE."""

_MODEL_CONFIG = ConfigDict(
    extra="forbid",
    populate_by_name=True,
    use_attribute_docstrings=field_docstrings(),
    defer_build=True,
)


class ScoringStrategyType(StrEnum):
    LEAST_ALLOCATED = "LeastAllocated"
    MOST_ALLOCATED = "MostAllocated"
    REQUESTED_TO_CAPACITY_RATIO = "RequestedToCapacityRatio"


class ResourceSpec(BaseModel):
    model_config = _MODEL_CONFIG

    name: str = Field(min_length=1)
    """Resource name: cpu, memory, ephemeral-storage or a scalar resource."""
    weight: int = 1
    """Weight of this resource in the node score, 1..100. 0 means the default, 1."""

    @field_validator("weight")
    @classmethod
    def _weight_in_range(cls, v: int) -> int:
        if v == 0:
            return 1
        if not 0 < v <= 100:
            raise ValueError("resource weight not in valid range (0, 100]")
        return v


def default_resources() -> list[ResourceSpec]:
    return [ResourceSpec(name=CPU, weight=1), ResourceSpec(name=MEMORY, weight=1)]


class UtilizationShapePoint(BaseModel):
    model_config = _MODEL_CONFIG

    utilization: int = Field(ge=0, le=MAX_UTILIZATION)
    """Utilization in percent (x axis), 0..100."""
    score: int = Field(ge=0, le=MAX_CUSTOM_PRIORITY_SCORE)
    """Score at that utilization (y axis), 0..10; scaled to 0..100."""


class RequestedToCapacityRatioParam(BaseModel):
    model_config = _MODEL_CONFIG

    shape: list[UtilizationShapePoint] = Field(min_length=1)
    """Points of a piecewise linear function, utilization strictly increasing."""

    @field_validator("shape")
    @classmethod
    def _increasing(cls, v: list[UtilizationShapePoint]) -> list[UtilizationShapePoint]:
        for i in range(1, len(v)):
            if v[i - 1].utilization >= v[i].utilization:
                raise ValueError(
                    f"shape[{i}].utilization: utilization values must be sorted in increasing order"
                )
        return v


class ScoringStrategy(BaseModel):
    model_config = _MODEL_CONFIG

    type: ScoringStrategyType = ScoringStrategyType.LEAST_ALLOCATED
    """LeastAllocated (spread, the default), MostAllocated (bin-pack) or
    RequestedToCapacityRatio (a custom utilization -> score shape)."""
    resources: list[ResourceSpec] = Field(default_factory=default_resources)
    """Resources scored, with weights; empty means the default, cpu:1 and memory:1."""
    requested_to_capacity_ratio: RequestedToCapacityRatioParam | None = Field(
        default=None, alias="requestedToCapacityRatio"
    )
    """The shape, required by (and only used by) RequestedToCapacityRatio."""

    @field_validator("resources")
    @classmethod
    def _default_resources(cls, v: list[ResourceSpec]) -> list[ResourceSpec]:
        return v or default_resources()

    @model_validator(mode="after")
    def _shape_given(self) -> ScoringStrategy:
        # kube-scheduler v1.37's validation: required by, and only allowed with, that type.
        rtcr = self.type is ScoringStrategyType.REQUESTED_TO_CAPACITY_RATIO
        if rtcr and self.requested_to_capacity_ratio is None:
            raise ValueError(
                "requestedToCapacityRatio: must be specified when type is RequestedToCapacityRatio"
            )
        if not rtcr and self.requested_to_capacity_ratio is not None:
            raise ValueError(
                "requestedToCapacityRatio: must be nil when type is not RequestedToCapacityRatio"
            )
        return self


class Args(BaseModel):
    """NodeResourcesFitArgs."""

    model_config = _MODEL_CONFIG

    ignored_resources: list[str] = Field(default_factory=list, alias="ignoredResources")
    """Extended resources Filter does not check (e.g. managed by another component).
    Default: none."""
    ignored_resource_groups: list[str] = Field(default_factory=list, alias="ignoredResourceGroups")
    """Extended resource groups (the part before '/', e.g. ``example.com``) Filter does
    not check. Default: none."""
    scoring_strategy: ScoringStrategy = Field(
        default_factory=ScoringStrategy, alias="scoringStrategy"
    )
    """How fitting nodes are scored. Default: LeastAllocated over cpu:1, memory:1."""

    @field_validator("ignored_resource_groups")
    @classmethod
    def _no_slash(cls, v: list[str]) -> list[str]:
        for i, g in enumerate(v):
            if "/" in g:
                raise ValueError(f"[{i}] {g!r}: resource group name can't contain '/'")
        return v
