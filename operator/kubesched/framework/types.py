"""Light internal views of pods and nodes, built once per watch event from plain dicts.

Typed client models cost about a millisecond per object; these views parse only what
the scheduler reads on its hot path and keep the raw dict for everything else.
Malformed objects raise :class:`ObjectError` with the field path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kubesched.framework.memo import remember
from kubesched.framework.quantity import QuantityError, value
from kubesched.framework.resources import (
    Resource,
    parse_resource_list,
    pod_request_pair,
    status_request_pair,
)

__all__ = [
    "DEFAULT_SCHEDULER_NAME",
    "UNRESOLVED",
    "Node",
    "ObjectError",
    "Pod",
    "Taint",
    "Toleration",
]

DEFAULT_SCHEDULER_NAME = "default-scheduler"

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TOLERATION_OPERATORS = ("Equal", "Exists", "Lt", "Gt")

UNRESOLVED: tuple[()] = ()
"""A :class:`Pod`'s ``gang_ref`` before it is looked up (a view is never changed, so the
answer derived from its labels and spec holds for the view's life)."""


class ObjectError(ValueError):
    """A Kubernetes object that cannot be used; the message names the field."""


def _mapping(obj: object, field: str) -> Mapping[str, Any]:
    if type(obj) is dict:  # the common case, without the ABC check (hot: every pod event)
        return obj
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise ObjectError(f"{field}: expected an object, got {type(obj).__name__}")
    return obj


def _str_map(obj: object, field: str) -> dict[str, str]:
    m = _mapping(obj, field)
    for k, v in m.items():
        if not isinstance(k, str) or not isinstance(v, str):
            raise ObjectError(f"{field}: keys and values must be strings, got {k!r}: {v!r}")
    return dict(m)


def _list_of_maps(obj: object, field: str) -> list[Mapping[str, Any]]:
    """A list whose items are objects (None: empty); what plugins iterate with ``.get``."""
    if obj is None:
        return []
    if type(obj) is not list:
        raise ObjectError(f"{field}: expected a list, got {type(obj).__name__}")
    for item in obj:
        if type(item) is not dict:
            # A null item decodes to an empty object in the API server, as here.
            return [_mapping(item, f"{field}[{j}]") for j, item in enumerate(obj)]
    return obj


_POD_AFFINITY_KINDS = ("podAffinity", "podAntiAffinity")
_REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
_PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _check_affinity(affinity: Mapping[str, Any]) -> None:
    """The shape of ``spec.affinity`` down to its terms (their contents are parsed, with
    field paths, by the plugins that use them)."""
    node = _mapping(affinity.get("nodeAffinity"), "spec.affinity.nodeAffinity")
    _mapping(node.get(_REQUIRED), f"spec.affinity.nodeAffinity.{_REQUIRED}")
    _list_of_maps(node.get(_PREFERRED), f"spec.affinity.nodeAffinity.{_PREFERRED}")
    for kind in _POD_AFFINITY_KINDS:
        block = _mapping(affinity.get(kind), f"spec.affinity.{kind}")
        for when in (_REQUIRED, _PREFERRED):
            _list_of_maps(block.get(when), f"spec.affinity.{kind}.{when}")


def _check_volumes(volumes: object) -> None:
    """``spec.volumes``: objects whose sources are objects (the volume plugins read them)."""
    for i, v in enumerate(_list_of_maps(volumes, "spec.volumes")):
        for k, source in v.items():
            if k != "name" and source is not None:
                _mapping(source, f"spec.volumes[{i}].{k}")


class Taint:
    __slots__ = ("effect", "key", "value")

    def __init__(self, key: str, value: str = "", effect: str = "NoSchedule") -> None:
        self.key = key
        self.value = value
        self.effect = effect

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], field: str = "taint") -> Taint:
        key = d.get("key")
        if not isinstance(key, str) or not key:
            raise ObjectError(f"{field}.key: required")
        effect = d.get("effect")
        if effect not in TAINT_EFFECTS:
            raise ObjectError(f"{field}.effect: must be one of {', '.join(TAINT_EFFECTS)}")
        return cls(key, str(d.get("value") or ""), effect)

    def __repr__(self) -> str:
        return f"{self.key}={self.value}:{self.effect}"


class Toleration:
    __slots__ = ("effect", "key", "operator", "value")

    def __init__(
        self, key: str = "", operator: str = "Equal", value: str = "", effect: str = ""
    ) -> None:
        self.key = key
        self.operator = operator or "Equal"
        self.value = value
        self.effect = effect

    @classmethod
    def from_dict(cls, d: Mapping[str, Any], field: str = "toleration") -> Toleration:
        op = d.get("operator") or "Equal"
        if op not in TOLERATION_OPERATORS:
            raise ObjectError(f"{field}.operator: must be Equal, Exists, Lt or Gt, got {op!r}")
        return cls(
            str(d.get("key") or ""), op, str(d.get("value") or ""), str(d.get("effect") or "")
        )

    def tolerates(self, taint: Taint) -> bool:
        """kube's ``Toleration.ToleratesTaint``: an empty effect or key matches all."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator != "Equal":
            # Lt/Gt compare numbers only with the TaintTolerationComparisonOperators gate
            # (alpha, off in kube-scheduler v1.37): without it they tolerate nothing.
            return False
        return self.value == taint.value


_TOLERATIONS: dict[tuple[Any, ...], Toleration] = {}
"""Tolerations parsed before, by their four fields: most pods carry the same few (the
API server's not-ready and unreachable ones on every pod); a view never changes them."""
_TOLERATIONS_MAX = 1024


def _toleration(d: Mapping[str, Any], index: int) -> Toleration:
    fields = (d.get("key"), d.get("operator"), d.get("value"), d.get("effect"))
    for f in fields:
        if f is not None and type(f) is not str:  # malformed (or 1 == True as a key)
            return Toleration.from_dict(d, f"spec.tolerations[{index}]")
    found = _TOLERATIONS.get(fields)
    if found is None:
        found = Toleration.from_dict(d, f"spec.tolerations[{index}]")
        remember(_TOLERATIONS, fields, found, _TOLERATIONS_MAX)
    return found


class Pod:
    """The scheduler's view of a Pod."""

    __slots__ = (
        "affinity",
        "annotations",
        "creation_timestamp",
        "deletion_timestamp",
        "gang_ref",
        "host_ports",
        "images",
        "key",
        "labels",
        "name",
        "namespace",
        "node_name",
        "node_selector",
        "nominated_node_name",
        "non_zero_cpu",
        "non_zero_memory",
        "phase",
        "preemption_policy",
        "priority",
        "raw",
        "requests",
        "resource_version",
        "scheduler_name",
        "scheduling_gates",
        "spec",
        "tolerations",
        "uid",
    )

    def __init__(self, raw: Mapping[str, Any]) -> None:
        meta = _mapping(raw.get("metadata"), "metadata")
        spec = _mapping(raw.get("spec"), "spec")
        status = _mapping(raw.get("status"), "status")
        self.raw = raw
        self.spec = spec
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise ObjectError("metadata.name: required")
        self.name: str = name
        self.namespace: str = str(meta.get("namespace") or "default")
        self.key = f"{self.namespace}/{self.name}"
        self.uid: str = str(meta.get("uid") or self.key)
        self.resource_version: str = str(meta.get("resourceVersion") or "")
        self.labels = _str_map(meta.get("labels"), "metadata.labels")
        self.annotations = _mapping(meta.get("annotations"), "metadata.annotations")
        self.creation_timestamp: str = str(meta.get("creationTimestamp") or "")
        self.deletion_timestamp: str | None = meta.get("deletionTimestamp")
        prio = spec.get("priority", 0)
        if prio is None:
            prio = 0
        if not isinstance(prio, int) or isinstance(prio, bool):
            raise ObjectError(f"spec.priority: must be an integer, got {prio!r}")
        self.priority: int = prio
        self.preemption_policy: str = str(spec.get("preemptionPolicy") or "PreemptLowerPriority")
        self.scheduler_name: str = str(spec.get("schedulerName") or DEFAULT_SCHEDULER_NAME)
        self.node_name: str = str(spec.get("nodeName") or "")
        self.nominated_node_name: str = str(status.get("nominatedNodeName") or "")
        self.phase: str = str(status.get("phase") or "Pending")
        containers = spec.get("containers")
        if containers is not None and not isinstance(containers, list):
            raise ObjectError("spec.containers: expected a list")
        try:
            self.requests: Resource
            # a running pod's status may report a resize (kube counts the larger figures)
            pair = status_request_pair(spec, status) if status else None
            self.requests, nz = pair if pair is not None else pod_request_pair(spec)
        except QuantityError as e:
            raise ObjectError(str(e)) from None
        except (AttributeError, TypeError) as e:
            raise ObjectError(f"spec: malformed containers ({e})") from None
        self.non_zero_cpu = nz.milli_cpu
        self.non_zero_memory = nz.memory
        self.node_selector = _str_map(spec.get("nodeSelector"), "spec.nodeSelector")
        self.affinity = _mapping(spec.get("affinity"), "spec.affinity")
        if self.affinity:
            _check_affinity(self.affinity)
        _list_of_maps(spec.get("topologySpreadConstraints"), "spec.topologySpreadConstraints")
        _list_of_maps(spec.get("resourceClaims"), "spec.resourceClaims")
        if "volumes" in spec:
            _check_volumes(spec["volumes"])
        self.tolerations = [
            _toleration(t, i)
            for i, t in enumerate(_list_of_maps(spec.get("tolerations"), "spec.tolerations"))
        ]
        ports: list[tuple[str, str, int]] = []
        images: list[str] = []
        for i, c in enumerate(_list_of_maps(containers, "spec.containers")):
            img = c.get("image")
            if isinstance(img, str) and img:
                images.append(img)
            for j, p in enumerate(_list_of_maps(c.get("ports"), f"spec.containers[{i}].ports")):
                hp = p.get("hostPort")
                if hp:
                    if not isinstance(hp, int) or not 0 < hp < 65536:
                        raise ObjectError(
                            f"spec.containers[{i}].ports[{j}].hostPort: must be 1-65535"
                        )
                    ports.append(
                        (str(p.get("hostIP") or "0.0.0.0"), str(p.get("protocol") or "TCP"), hp)
                    )
        # Restartable (sidecar) init containers run beside the pod: their host ports count
        # (kube-scheduler's GetHostPorts).
        for i, c in enumerate(_list_of_maps(spec.get("initContainers"), "spec.initContainers")):
            if c.get("restartPolicy") != "Always":
                continue
            for p in _list_of_maps(c.get("ports"), f"spec.initContainers[{i}].ports"):
                hp = p.get("hostPort")
                if isinstance(hp, int) and 0 < hp < 65536:
                    ports.append(
                        (str(p.get("hostIP") or "0.0.0.0"), str(p.get("protocol") or "TCP"), hp)
                    )
        self.host_ports = ports
        self.images = images
        gates = _list_of_maps(spec.get("schedulingGates"), "spec.schedulingGates")
        self.scheduling_gates: list[str] = [str(g.get("name") or "") for g in gates]
        self.gang_ref: tuple[str, str, str] | tuple[()] | None = UNRESOLVED
        """How the pod names its gang, once looked up (the gang code's
        ``pod_gang_ref``: a reference or None); :data:`UNRESOLVED` before."""

    def assigned_to(self, node_name: str) -> Pod:
        """A copy of this view placed on ``node_name`` (what the cache assumes)."""
        c = object.__new__(Pod)
        for slot in Pod.__slots__:
            object.__setattr__(c, slot, getattr(self, slot))
        c.node_name = node_name
        return c

    def is_terminal(self) -> bool:
        return self.phase in ("Succeeded", "Failed")

    def has_affinity(self) -> bool:
        a = self.affinity
        return bool(a.get("podAffinity") or a.get("podAntiAffinity"))

    def has_required_anti_affinity(self) -> bool:
        anti = self.affinity.get("podAntiAffinity") or {}
        return bool(anti.get("requiredDuringSchedulingIgnoredDuringExecution"))

    def __repr__(self) -> str:
        return f"<Pod {self.key}>"


class Node:
    """The scheduler's view of a Node."""

    __slots__ = (
        "allocatable",
        "images",
        "labels",
        "name",
        "raw",
        "resource_version",
        "taints",
        "uid",
        "unschedulable",
    )

    def __init__(self, raw: Mapping[str, Any]) -> None:
        meta = _mapping(raw.get("metadata"), "metadata")
        spec = _mapping(raw.get("spec"), "spec")
        status = _mapping(raw.get("status"), "status")
        self.raw = raw
        name = meta.get("name")
        if not isinstance(name, str) or not name:
            raise ObjectError("metadata.name: required")
        self.name: str = name
        self.uid: str = str(meta.get("uid") or name)
        self.resource_version: str = str(meta.get("resourceVersion") or "")
        self.labels = _str_map(meta.get("labels"), "metadata.labels")
        self.unschedulable = bool(spec.get("unschedulable"))
        self.taints = [
            Taint.from_dict(t, f"spec.taints[{i}]")
            for i, t in enumerate(_list_of_maps(spec.get("taints"), "spec.taints"))
        ]
        try:
            alloc = parse_resource_list(
                _mapping(status.get("allocatable"), "status.allocatable"),
                field="status.allocatable",
            )
        except QuantityError as e:
            raise ObjectError(str(e)) from None
        self.allocatable = alloc
        images: list[tuple[list[str], int]] = []
        for i, img in enumerate(_list_of_maps(status.get("images"), "status.images")):
            names = img.get("names")
            if not isinstance(names, list):
                names = []
            names = [n for n in names if isinstance(n, str)]
            try:
                size = value(img.get("sizeBytes") or 0)
            except QuantityError as e:
                raise ObjectError(f"status.images[{i}].sizeBytes: {e}") from None
            images.append((names, size))
        self.images = images

    def __repr__(self) -> str:
        return f"<Node {self.name}>"
