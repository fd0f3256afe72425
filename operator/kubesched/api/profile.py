"""SchedulingProfile spec: the fields of a KubeSchedulerConfiguration profile, under the
same names, so a profile can be pasted from a kube-scheduler configuration; plus the
queue's backoff settings. Unset fields mean kube-scheduler's defaults.

These models are the single source of truth for the CRD schema.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import ConfigDict, Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from kubesched.api.meta import Condition, Model

__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "EXTENSION_POINT_FIELDS",
    "SCHEDULER_NAME_PATTERN",
    "ActivePlugins",
    "Backoff",
    "Condition",
    "PluginConfig",
    "PluginRef",
    "PluginSet",
    "Plugins",
    "ProfileSpec",
    "SchedulingProfileStatus",
]

DEFAULT_SCHEDULER_NAME = "kubesched"
"""The scheduler name the built-in default profile serves."""

_NAME = r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"
SCHEDULER_NAME_PATTERN = _NAME
"""What a ``schedulerName`` may be (at most 253 characters): settings check it too."""

# CEL rules (``x-kubernetes-validations``) and the pydantic validators below check the
# same things with the same messages: the API server refuses a mistake at admission,
# ``kubesched validate`` and the operator say the same offline.
MSG_STAR_ALONE = "'*' disables every plugin and must be the only entry"
MSG_ONE_QUEUE_SORT = "at most one queueSort plugin may be enabled"
MSG_WEIGHT = "weights are only meaningful in score and multiPoint"
MSG_BACKOFF = "maxSeconds must not be less than initialSeconds"

EXTENSION_POINT_FIELDS: dict[str, str] = {
    "preEnqueue": "pre_enqueue",
    "queueSort": "queue_sort",
    "preFilter": "pre_filter",
    "filter": "filter",
    "postFilter": "post_filter",
    "preScore": "pre_score",
    "score": "score",
    "reserve": "reserve",
    "permit": "permit",
    "preBind": "pre_bind",
    "bind": "bind",
    "postBind": "post_bind",
}
"""KubeSchedulerConfiguration's extension point names -> :class:`Plugins` attributes."""

_WEIGHTED = ("score", "multiPoint")


def _error(path: str, message: str) -> PydanticCustomError:
    """A validation error whose location continues with ``path`` (see ``ctx.path``)."""
    return PydanticCustomError("kubesched", message, {"path": path})


def _by_name(description: str) -> Any:
    return Field(
        default_factory=list,
        max_length=64,
        description=description,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )


class _Model(Model):
    model_config = ConfigDict(frozen=True)


class PluginRef(_Model):
    name: str = Field(min_length=1, max_length=253, description="Plugin name, or '*' in disabled.")
    weight: int | None = Field(
        default=None,
        ge=0,
        le=100,
        description="Score weight; unset means the default (kube-scheduler's default weight, else 1).",
    )


class PluginSet(_Model):
    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "!has(self.disabled) || size(self.disabled) <= 1 || "
                    "self.disabled.all(p, p.name != '*')",
                    "message": MSG_STAR_ALONE,
                    "fieldPath": ".disabled",
                }
            ]
        }
    )

    enabled: list[PluginRef] = _by_name(
        "Plugins to run, in order, after the defaults that are not disabled."
    )
    disabled: list[PluginRef] = _by_name("Default plugins to leave out; '*' leaves out all.")

    @field_validator("disabled")
    @classmethod
    def _star_alone(cls, v: list[PluginRef]) -> list[PluginRef]:
        if len(v) > 1:
            for i, p in enumerate(v):
                if p.name == "*":
                    raise _error(f"[{i}].name", MSG_STAR_ALONE)
        return v


def _plugins_rules() -> Any:
    rules: list[dict[str, str]] = [
        {
            "rule": "!has(self.queueSort) || !has(self.queueSort.enabled) || "
            "size(self.queueSort.enabled) <= 1",
            "message": MSG_ONE_QUEUE_SORT,
            "fieldPath": ".queueSort.enabled",
        }
    ]
    for point in EXTENSION_POINT_FIELDS:
        if point in _WEIGHTED:
            continue
        rules.append(
            {
                "rule": f"!has(self.{point}) || !has(self.{point}.enabled) || "
                f"self.{point}.enabled.all(p, !has(p.weight))",
                "message": MSG_WEIGHT,
                "fieldPath": f".{point}.enabled",
            }
        )
    return rules


class Plugins(_Model):
    """Plugins per extension point, as in a KubeSchedulerConfiguration profile."""

    model_config = ConfigDict(json_schema_extra={"x-kubernetes-validations": _plugins_rules()})

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
    multi_point: PluginSet = Field(
        default_factory=PluginSet,
        alias="multiPoint",
        description="Plugins enabled at every extension point they implement.",
    )

    @field_validator("queue_sort")
    @classmethod
    def _one_queue_sort(cls, v: PluginSet) -> PluginSet:
        if len(v.enabled) > 1:
            raise _error("enabled", MSG_ONE_QUEUE_SORT)
        return v

    @field_validator(*(f for p, f in EXTENSION_POINT_FIELDS.items() if p not in _WEIGHTED))
    @classmethod
    def _no_weight(cls, v: PluginSet) -> PluginSet:
        for i, p in enumerate(v.enabled):
            if p.weight is not None:
                raise _error(f"enabled[{i}].weight", MSG_WEIGHT)
        return v


class PluginConfig(_Model):
    name: str = Field(min_length=1, max_length=253, description="The plugin these args are for.")
    args: dict[str, Any] = Field(
        default_factory=dict,
        description="The plugin's arguments, as in kube-scheduler's pluginConfig "
        "(e.g. NodeResourcesFitArgs); checked by the plugin's Args model.",
    )


class Backoff(_Model):
    """How the profile's queue retries pods that failed (kubesched's addition)."""

    model_config = ConfigDict(
        json_schema_extra={
            "x-kubernetes-validations": [
                {
                    "rule": "(has(self.maxSeconds) ? self.maxSeconds : 10.0) >= "
                    "(has(self.initialSeconds) ? self.initialSeconds : 1.0)",
                    "message": MSG_BACKOFF,
                    "fieldPath": ".maxSeconds",
                }
            ]
        }
    )

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

    @model_validator(mode="after")
    def _max_not_below_initial(self) -> Backoff:
        if self.max_seconds < self.initial_seconds:
            raise _error("maxSeconds", MSG_BACKOFF)
        return self


class ProfileSpec(_Model):
    """A KubeSchedulerConfiguration profile (same field names), plus queue backoff."""

    scheduler_name: str = Field(
        default=DEFAULT_SCHEDULER_NAME,
        min_length=1,
        max_length=253,
        pattern=_NAME,
        alias="schedulerName",
        description="Pods with this spec.schedulerName are scheduled by this profile "
        "(default: kubesched, which overrides the built-in default profile).",
    )
    plugins: Plugins = Field(
        default_factory=Plugins,
        description="Changes to kube-scheduler's default plugins (merged as kube-scheduler does).",
    )
    plugin_config: list[PluginConfig] = Field(
        default_factory=list,
        max_length=64,
        alias="pluginConfig",
        description="Arguments per plugin.",
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )
    percentage_of_nodes_to_score: int | None = Field(
        default=None,
        ge=0,
        le=100,
        alias="percentageOfNodesToScore",
        description="Unset or 0: kube-scheduler's adaptive percentage.",
    )
    backoff: Backoff = Field(default_factory=Backoff, description="Queue backoff settings.")


# -- status ------------------------------------------------------------------------------


def _chain(point: str) -> Any:
    return Field(
        default_factory=list,
        max_length=64,
        alias=point,
        description=f"{point} plugins in the order they run"
        + (" (name:weight)" if point == "score" else ""),
    )


_ChainEntry = Annotated[str, Field(max_length=300)]


class ActivePlugins(_Model):
    """The plugin chain that serves, per extension point, after merging the defaults."""

    pre_enqueue: list[_ChainEntry] = _chain("preEnqueue")
    queue_sort: list[_ChainEntry] = _chain("queueSort")
    pre_filter: list[_ChainEntry] = _chain("preFilter")
    filter: list[_ChainEntry] = _chain("filter")
    post_filter: list[_ChainEntry] = _chain("postFilter")
    pre_score: list[_ChainEntry] = _chain("preScore")
    score: list[_ChainEntry] = _chain("score")
    reserve: list[_ChainEntry] = _chain("reserve")
    permit: list[_ChainEntry] = _chain("permit")
    pre_bind: list[_ChainEntry] = _chain("preBind")
    bind: list[_ChainEntry] = _chain("bind")
    post_bind: list[_ChainEntry] = _chain("postBind")


class SchedulingProfileStatus(_Model):
    observed_generation: int | None = Field(
        default=None,
        ge=0,
        le=2**53,
        alias="observedGeneration",
        description="The generation of the spec last reconciled.",
    )
    active_generation: int | None = Field(
        default=None,
        ge=0,
        le=2**53,
        alias="activeGeneration",
        description="The generation of the spec whose chain serves now; it lags "
        "observedGeneration while an invalid update is refused.",
    )
    scheduler_name: str | None = Field(
        default=None,
        max_length=253,
        alias="schedulerName",
        description="The schedulerName served (the spec's, defaulted).",
    )
    conditions: list[Condition] = Field(
        default_factory=list,
        max_length=8,
        json_schema_extra={"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["type"]},
    )
    active_plugins: ActivePlugins | None = Field(
        default=None,
        alias="activePlugins",
        description="The chain that serves now, per extension point.",
    )
