"""One gang model for three PodGroup APIs (pure: no I/O).

kubesched gang-schedules pods declared by any of

* ``kubesched.dev/v1alpha1`` PodGroup (ours, :mod:`kubesched.api.podgroup`);
* ``scheduling.k8s.io/v1beta1`` PodGroup (Kubernetes 1.35+, beta in 1.37), whose policy
  may come from a ``scheduling.k8s.io/v1beta1`` Workload's ``podGroupTemplates``;
* ``scheduling.x-k8s.io/v1alpha1`` PodGroup (scheduler-plugins; Kubeflow creates these).

Each is parsed into a :class:`GangSpec`. A pod's gang is decided by :func:`pod_ref` and
:func:`resolve`, first match wins:

1. ``spec.schedulingGroup.podGroupName`` -> the upstream PodGroup in the pod's namespace;
2. label ``kubesched.dev/pod-group`` -> our PodGroup;
3. label ``scheduling.x-k8s.io/pod-group`` -> scheduler-plugins' PodGroup, or ours of that
   name when only ours exists (kubesched always honoured that label, for migration).

Gang keys never collide across APIs: ours is ``namespace/name`` (as before), the others
carry their group in front (``scheduling.k8s.io/namespace/name``). The three kinds are
all called PodGroup, so the object store holds the foreign ones under the kinds of
:data:`STORE_KINDS` (``PodGroup.scheduling.k8s.io``, ...).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import pydantic
from pydantic import ConfigDict, Field, field_validator

from kubesched.api import podgroup
from kubesched.api.gang_apis import STORE_KINDS, WORKLOAD_STORE_KIND, GangAPI
from kubesched.api.meta import Model

__all__ = [
    "GANG_STORE_KINDS",
    "STORE_KINDS",
    "WORKLOAD_STORE_KIND",
    "Exists",
    "GangAPI",
    "GangRef",
    "GangSpec",
    "InvalidGang",
    "TopologyConstraint",
    "gang_key",
    "in_pod_group_cycle",
    "parse_gang",
    "parse_key",
    "pod_ref",
    "refs_for",
    "resolve",
    "store_kind",
    "validate",
    "validate_workload",
]


GANG_STORE_KINDS = frozenset(STORE_KINDS.values())
_API_OF_STORE_KIND = {v: k for k, v in STORE_KINDS.items()}
_STORE_KIND_OF = {
    **{(api.value, "PodGroup"): kind for api, kind in STORE_KINDS.items()},
    (GangAPI.UPSTREAM.value, "Workload"): WORKLOAD_STORE_KIND,
}


def store_kind(api_version: str, kind: str) -> str:
    """The store's kind for an object of ``apiVersion``/``kind`` (the kind itself unless
    it is one of the gang kinds that share a name)."""
    return _STORE_KIND_OF.get((api_version, kind), kind)


def api_of(kind: str) -> GangAPI | None:
    """The API of a store kind of :data:`GANG_STORE_KINDS`, else None."""
    return _API_OF_STORE_KIND.get(kind)


# -- keys -----------------------------------------------------------------------------------------
def gang_key(api: GangAPI, namespace: str, name: str) -> str:
    if api is GangAPI.KUBESCHED:
        return f"{namespace}/{name}"
    return f"{api.group}/{namespace}/{name}"


_API_OF_GROUP = {api.group: api for api in GangAPI}


def parse_key(key: str) -> tuple[GangAPI, str, str]:
    """``(api, namespace, name)`` of a gang key (namespaces carry no dot, groups do)."""
    first, _, rest = key.partition("/")
    if "." in first and "/" in rest:
        ns, _, name = rest.partition("/")
        return _API_OF_GROUP[first], ns, name
    return GangAPI.KUBESCHED, first, rest


GROUP_REF, LABEL_REF, X_LABEL_REF = "schedulingGroup", "label", "x-label"
GangRef = tuple[str, str, str]
"""How a pod names its gang: (``schedulingGroup`` | ``label`` | ``x-label``, ns, name)."""
Exists = Callable[[str, str, str], bool]
"""``(store kind, namespace, name) -> bool``: whether the store holds that object."""


def pod_ref(namespace: str, labels: Mapping[str, str], spec: Mapping[str, Any]) -> GangRef | None:
    """The gang a pod names, by precedence (see the module doc), before resolution."""
    group = _group_name(spec)
    if group:
        return (GROUP_REF, namespace, group)
    name = labels.get(podgroup.POD_GROUP_LABEL)
    if name:
        return (LABEL_REF, namespace, name)
    name = labels.get(podgroup.SCHEDULER_PLUGINS_POD_GROUP_LABEL)
    if name:
        return (X_LABEL_REF, namespace, name)
    return None


def _group_name(spec: Mapping[str, Any]) -> str:
    """The Kubernetes PodGroup a pod's ``spec.schedulingGroup`` names ("" for none)."""
    group = spec.get("schedulingGroup")
    if group is None:  # the common case, without the ABC check (every pod event)
        return ""
    name = group.get("podGroupName") if isinstance(group, Mapping) else None
    return name if isinstance(name, str) else ""


def in_pod_group_cycle(spec: Mapping[str, Any]) -> bool:
    """Whether a pod names a Kubernetes PodGroup (``spec.schedulingGroup``): kube-scheduler
    1.37 schedules such a pod only in its group's cycle, which runs no per-pod PostFilter
    (a group that does not fit gets the PodGroup's preemption instead)."""
    return bool(_group_name(spec))


_X = STORE_KINDS[GangAPI.SCHEDULER_PLUGINS]
_OURS = STORE_KINDS[GangAPI.KUBESCHED]


def resolve(ref: GangRef, exists: Exists) -> str:
    """The gang key a reference means now (scheduler-plugins' label falls back to our
    PodGroup of that name only while no scheduler-plugins PodGroup of that name exists)."""
    source, ns, name = ref
    if source == GROUP_REF:
        return f"{GangAPI.UPSTREAM.group}/{ns}/{name}"
    if source == LABEL_REF:
        return f"{ns}/{name}"
    if not exists(_X, ns, name) and exists(_OURS, ns, name):
        return f"{ns}/{name}"
    return f"{GangAPI.SCHEDULER_PLUGINS.group}/{ns}/{name}"


def refs_for(key: str, exists: Exists) -> list[GangRef]:
    """Every reference that :func:`resolve` maps onto ``key`` now (the inverse)."""
    api, ns, name = parse_key(key)
    if api is GangAPI.UPSTREAM:
        return [(GROUP_REF, ns, name)]
    x_is_ours = not exists(_X, ns, name) and exists(_OURS, ns, name)
    if api is GangAPI.KUBESCHED:
        return [(LABEL_REF, ns, name)] + ([(X_LABEL_REF, ns, name)] if x_is_ours else [])
    return [] if x_is_ours else [(X_LABEL_REF, ns, name)]


# -- the model ------------------------------------------------------------------------------------
class InvalidGang(ValueError):
    """A PodGroup (or its Workload) that cannot be gang-scheduled; the message names the
    field, e.g. ``spec.schedulingPolicy: exactly one of basic or gang must be set``."""


@dataclass(frozen=True, slots=True)
class TopologyConstraint:
    key: str
    """A node label: every member in one domain (one value) of it."""
    mode: Literal["Required", "Preferred"] = "Required"


@dataclass(frozen=True, slots=True)
class GangSpec:
    api: GangAPI
    key: str
    namespace: str
    name: str
    min_member: int
    """Members that must be placed together (1 for upstream's ``basic`` policy)."""
    policy: Literal["Gang", "Basic"] = "Gang"
    min_resources: Mapping[str, int | str] | None = None
    schedule_timeout_seconds: int | None = None
    topology: tuple[TopologyConstraint, ...] = ()
    disruption_mode: Literal["Single", "All"] = "Single"
    priority_class_name: str = ""
    priority: int | None = None
    preemption_policy: str | None = None
    template: str = ""
    """Upstream: the Workload template the policy came from (``workload/template``)."""


WHOLE_GANG_DISRUPTION: Literal["All"] = "All"
"""How preemption treats a gang of ours or of scheduler-plugins (neither API has a
``disruptionMode``): as upstream's ``All``, evicted whole. Their gangs are jobs whose
members only work together (minMember is "all or nothing" by definition there): a gang
that loses one member stops making progress while it keeps holding the rest, so evicting
the whole gang frees everything at once instead of leaving a stalled remainder."""


class _Model(Model):
    """Foreign APIs: fields kubesched does not read are ignored, not refused."""

    model_config = ConfigDict(extra="ignore")


def _first_error(e: pydantic.ValidationError, prefix: str) -> InvalidGang:
    return InvalidGang(podgroup.validation_message(e, prefix))


class _XSpec(_Model):
    """scheduler-plugins' PodGroupSpec (minMember, minResources, scheduleTimeoutSeconds)."""

    min_member: int = Field(default=0, ge=0, alias="minMember")
    min_resources: dict[str, int | str] | None = Field(default=None, alias="minResources")
    schedule_timeout_seconds: int | None = Field(default=None, gt=0, alias="scheduleTimeoutSeconds")

    _q = field_validator("min_resources")(podgroup._check_quantities)


class _Gang(_Model):
    min_count: int = Field(ge=1, alias="minCount")


class _Policy(_Model):
    basic: dict[str, Any] | None = None
    gang: _Gang | None = None


class _Topology(_Model):
    key: str = Field(min_length=1)


class _Constraints(_Model):
    topology: list[_Topology] = Field(default_factory=list, max_length=1)


class _Disruption(_Model):
    single: dict[str, Any] | None = None
    all: dict[str, Any] | None = None


class _WorkloadRef(_Model):
    workload_name: str = Field(min_length=1, alias="workloadName")
    template_name: str = Field(min_length=1, alias="templateName")


class _UpstreamSpec(_Model):
    """scheduling.k8s.io/v1beta1 PodGroupSpec and PodGroupTemplate (the fields read)."""

    workload_ref: _WorkloadRef | None = Field(default=None, alias="workloadRef")
    scheduling_policy: _Policy = Field(default_factory=_Policy, alias="schedulingPolicy")
    scheduling_constraints: _Constraints | None = Field(default=None, alias="schedulingConstraints")
    disruption_mode: _Disruption | None = Field(default=None, alias="disruptionMode")
    priority_class_name: str = Field(default="", alias="priorityClassName")
    priority: int | None = None
    preemption_policy: Literal["PreemptLowerPriority", "Never"] | None = Field(
        default=None, alias="preemptionPolicy"
    )


def _meta(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name") or "")


def _ours(obj: Mapping[str, Any]) -> GangSpec:
    ns, name = _meta(obj)
    try:
        s = podgroup.parse_spec(obj)
    except pydantic.ValidationError as e:
        raise _first_error(e, "spec") from None
    topo = tuple(
        TopologyConstraint(t.key, t.mode)
        for t in (s.scheduling_constraints.topology if s.scheduling_constraints else ())
    )
    return GangSpec(
        GangAPI.KUBESCHED,
        gang_key(GangAPI.KUBESCHED, ns, name),
        ns,
        name,
        s.min_member,
        min_resources=s.min_resources,
        schedule_timeout_seconds=s.schedule_timeout_seconds,
        topology=topo,
        disruption_mode=WHOLE_GANG_DISRUPTION,
    )


def _scheduler_plugins(obj: Mapping[str, Any]) -> GangSpec:
    ns, name = _meta(obj)
    try:
        s = _XSpec.model_validate(obj.get("spec") or {})
    except pydantic.ValidationError as e:
        raise _first_error(e, "spec") from None
    return GangSpec(
        GangAPI.SCHEDULER_PLUGINS,
        gang_key(GangAPI.SCHEDULER_PLUGINS, ns, name),
        ns,
        name,
        max(1, s.min_member),  # minMember 0 (unset): scheduler-plugins gates nothing
        min_resources=s.min_resources,
        schedule_timeout_seconds=s.schedule_timeout_seconds,
        disruption_mode=WHOLE_GANG_DISRUPTION,
    )


def _template(
    ns: str, ref: _WorkloadRef, workload: Mapping[str, Any] | None
) -> tuple[_UpstreamSpec, str]:
    where = f'Workload "{ns}/{ref.workload_name}"'
    if workload is None:
        raise InvalidGang(
            f"spec.schedulingPolicy: not set, and {where} named by spec.workloadRef does not exist"
        )
    templates = (workload.get("spec") or {}).get("podGroupTemplates") or []
    names = [str(t.get("name")) for t in templates if isinstance(t, Mapping)]
    for t in templates:
        if isinstance(t, Mapping) and t.get("name") == ref.template_name:
            try:
                return _UpstreamSpec.model_validate(t), f"{ref.workload_name}/{ref.template_name}"
            except pydantic.ValidationError as e:
                i = names.index(ref.template_name)
                raise InvalidGang(
                    f"{where}: {podgroup.validation_message(e, f'spec.podGroupTemplates[{i}]')}"
                ) from None
    have = ", ".join(f'"{n}"' for n in names) or "none"
    raise InvalidGang(
        f"spec.workloadRef.templateName: {where} has no podGroupTemplate named "
        f'"{ref.template_name}" (it has: {have})'
    )


def _upstream(
    obj: Mapping[str, Any], workload: Callable[[str, str], Mapping[str, Any] | None]
) -> GangSpec:
    ns, name = _meta(obj)
    try:
        s = _UpstreamSpec.model_validate(obj.get("spec") or {})
    except pydantic.ValidationError as e:
        raise _first_error(e, "spec") from None
    source, template = s, ""
    pol = s.scheduling_policy
    if pol.basic is None and pol.gang is None and s.workload_ref is not None:
        # Controllers copy the template's policy into the PodGroup; one that did not
        # (or a scenario that leaves it out) takes the template's.
        source, template = _template(ns, s.workload_ref, workload(ns, s.workload_ref.workload_name))
        pol = source.scheduling_policy
    if (pol.basic is None) == (pol.gang is None):
        raise InvalidGang("spec.schedulingPolicy: exactly one of basic or gang must be set")
    dm = source.disruption_mode or s.disruption_mode
    cons = source.scheduling_constraints or s.scheduling_constraints
    return GangSpec(
        GangAPI.UPSTREAM,
        gang_key(GangAPI.UPSTREAM, ns, name),
        ns,
        name,
        pol.gang.min_count if pol.gang is not None else 1,
        policy="Gang" if pol.gang is not None else "Basic",
        topology=tuple(TopologyConstraint(t.key) for t in (cons.topology if cons else ())),
        disruption_mode="All" if dm is not None and dm.all is not None else "Single",
        priority_class_name=s.priority_class_name or source.priority_class_name,
        priority=s.priority if s.priority is not None else source.priority,
        preemption_policy=s.preemption_policy or source.preemption_policy,
        template=template,
    )


def parse_gang(
    kind: str,
    obj: Mapping[str, Any],
    workload: Callable[[str, str], Mapping[str, Any] | None] = lambda ns, name: None,
) -> GangSpec:
    """The gang a PodGroup of store kind ``kind`` declares (raises :class:`InvalidGang`).
    ``workload(namespace, name)`` finds an upstream PodGroup's Workload."""
    api = api_of(kind)
    if api is GangAPI.KUBESCHED:
        return _ours(obj)
    if api is GangAPI.SCHEDULER_PLUGINS:
        return _scheduler_plugins(obj)
    if api is GangAPI.UPSTREAM:
        return _upstream(obj, workload)
    raise InvalidGang(f"{kind}: not a PodGroup kind")


def validate(kind: str, obj: Mapping[str, Any]) -> None:
    """What an API server would refuse in a PodGroup of store kind ``kind`` (raises
    :class:`InvalidGang`). An upstream PodGroup's Workload is not looked up: a missing
    one or template is the scheduler's to report (the gang waits, saying why)."""
    if api_of(kind) is not GangAPI.UPSTREAM:
        parse_gang(kind, obj)
        return
    try:
        s = _UpstreamSpec.model_validate(obj.get("spec") or {})
    except pydantic.ValidationError as e:
        raise _first_error(e, "spec") from None
    pol = s.scheduling_policy
    if pol.basic is not None and pol.gang is not None:
        raise InvalidGang("spec.schedulingPolicy: exactly one of basic or gang must be set")
    if pol.basic is None and pol.gang is None and s.workload_ref is None:
        raise InvalidGang("spec.schedulingPolicy: exactly one of basic or gang must be set")


def validate_workload(obj: Mapping[str, Any]) -> None:
    """A scheduling.k8s.io/v1beta1 Workload's podGroupTemplates (raises InvalidGang)."""
    spec = obj.get("spec")
    templates = spec.get("podGroupTemplates") if isinstance(spec, Mapping) else None
    if not isinstance(templates, list) or not templates:
        raise InvalidGang("spec.podGroupTemplates: at least one template is required")
    seen: set[str] = set()
    for i, t in enumerate(templates):
        where = f"spec.podGroupTemplates[{i}]"
        name = t.get("name") if isinstance(t, Mapping) else None
        if not isinstance(name, str) or not name:
            raise InvalidGang(f"{where}.name: required")
        if name in seen:
            raise InvalidGang(f"{where}.name: duplicate template name {name!r}")
        seen.add(name)
        try:
            pol = _UpstreamSpec.model_validate(t).scheduling_policy
        except pydantic.ValidationError as e:
            raise _first_error(e, where) from None
        if (pol.basic is None) == (pol.gang is None):
            raise InvalidGang(f"{where}.schedulingPolicy: exactly one of basic or gang must be set")
