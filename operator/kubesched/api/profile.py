"""SchedulingProfile spec: the fields of a KubeSchedulerConfiguration profile, under the
same names, so a profile can be pasted from a kube-scheduler configuration; plus the
queue's backoff settings. Unset fields mean kube-scheduler's defaults.

These models are the single source of truth for the CRD schema.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "Backoff",
    "PluginConfig",
    "PluginRef",
    "PluginSet",
    "Plugins",
    "ProfileSpec",
]

DEFAULT_SCHEDULER_NAME = "kubesched"
"""The scheduler name the built-in default profile serves."""

_NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)


class PluginRef(_Model):
    name: str = Field(min_length=1, max_length=253, description="Plugin name, or '*' in disabled.")
    weight: int | None = Field(
        default=None,
        ge=0,
        le=100,
        description="Score weight; unset means the default (kube-scheduler's default weight, else 1).",
    )


class PluginSet(_Model):
    enabled: list[PluginRef] = Field(default_factory=list, max_length=64)
    disabled: list[PluginRef] = Field(default_factory=list, max_length=64)


class Plugins(_Model):
    pre_enqueue: PluginSet = Field(default_factory=PluginSet, alias="preEnqueue")
    queue_sort: PluginSet = Field(default_factory=PluginSet, alias="queueSort")
    pre_filter: PluginSet = Field(default_factory=PluginSet, alias="preFilter")
    filter: PluginSet = Field(default_factory=PluginSet)
    post_filter: PluginSet = Field(default_factory=PluginSet, alias="postFilter")
    pre_score: PluginSet = Field(default_factory=PluginSet, alias="preScore")
    score: PluginSet = Field(default_factory=PluginSet)
    reserve: PluginSet = Field(default_factory=PluginSet)
    permit: PluginSet = Field(default_factory=PluginSet)
    pre_bind: PluginSet = Field(default_factory=PluginSet, alias="preBind")
    bind: PluginSet = Field(default_factory=PluginSet)
    post_bind: PluginSet = Field(default_factory=PluginSet, alias="postBind")
    multi_point: PluginSet = Field(default_factory=PluginSet, alias="multiPoint")


class PluginConfig(_Model):
    name: str = Field(min_length=1, max_length=253)
    args: dict[str, Any] = Field(default_factory=dict)


class Backoff(_Model):
    initial_seconds: float = Field(
        default=1.0,
        gt=0,
        le=3600,
        alias="initialSeconds",
        description="First backoff after a failed attempt (kube-scheduler: 1 s).",
    )
    max_seconds: float = Field(
        default=10.0,
        gt=0,
        le=3600,
        alias="maxSeconds",
        description="Backoff doubles up to this (kube-scheduler: 10 s).",
    )
    max_unschedulable_seconds: float = Field(
        default=300.0,
        gt=0,
        le=86400,
        alias="maxUnschedulableSeconds",
        description="An unschedulable pod is retried after this long even without a "
        "cluster event (kube-scheduler: 5 minutes).",
    )


class ProfileSpec(_Model):
    scheduler_name: str = Field(
        default=DEFAULT_SCHEDULER_NAME,
        min_length=1,
        max_length=253,
        pattern=_NAME,
        alias="schedulerName",
    )
    plugins: Plugins = Field(default_factory=Plugins)
    plugin_config: list[PluginConfig] = Field(
        default_factory=list, max_length=64, alias="pluginConfig"
    )
    percentage_of_nodes_to_score: int | None = Field(
        default=None,
        ge=0,
        le=100,
        alias="percentageOfNodesToScore",
        description="Unset or 0: kube-scheduler's adaptive percentage.",
    )
    backoff: Backoff = Field(default_factory=Backoff)
