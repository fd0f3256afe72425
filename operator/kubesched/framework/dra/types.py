"""resource.k8s.io/v1 objects as light structures, parsed from raw dicts.

DeviceClass, ResourceSlice and ResourceClaim keep only what allocation reads, in the
shapes of ``k8s.io/api/resource/v1/types.go``. Parsing fails with an ``ObjectError``
that names the field (``spec.devices[2].name: required``); quantities are exact
``Fraction``s. What the apiserver defaults (``allocationMode: ExactCount``, ``count: 1``)
is defaulted here too, so objects written by hand in tests or scenarios behave alike.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from kubesched.framework.labels import NodeSelector, compile_node_selector
from kubesched.framework.quantity import QuantityError, parse_quantity
from kubesched.framework.types import ObjectError

__all__ = [
    "AllocationResult",
    "Attribute",
    "CapacityPolicy",
    "Constraint",
    "CounterSet",
    "Device",
    "DeviceCapacity",
    "DeviceClass",
    "DeviceRequest",
    "DeviceResult",
    "DeviceTaint",
    "DeviceToleration",
    "ExactRequest",
    "ResourceClaim",
    "ResourceSlice",
]

ALL = "All"
EXACT_COUNT = "ExactCount"


def _map(d: object, f: str) -> Mapping[str, Any]:
    if d is None:
        return {}
    if not isinstance(d, Mapping):
        raise ObjectError(f"{f}: expected an object")
    return d


def _list(d: object, f: str) -> list[Any]:
    if d is None:
        return []
    if not isinstance(d, list):
        raise ObjectError(f"{f}: expected a list")
    return d


def _str(d: object, f: str, *, required: bool = False) -> str:
    if d is None or d == "":
        if required:
            raise ObjectError(f"{f}: required")
        return ""
    if not isinstance(d, str):
        raise ObjectError(f"{f}: expected a string")
    return d


def _int(d: object, f: str, default: int = 0) -> int:
    if d is None:
        return default
    if isinstance(d, bool) or not isinstance(d, int):
        raise ObjectError(f"{f}: expected an integer")
    return d


def _bool(d: object, f: str) -> bool | None:
    if d is None:
        return None
    if not isinstance(d, bool):
        raise ObjectError(f"{f}: expected a boolean")
    return d


def _qty(d: object, f: str) -> Fraction:
    if d is None:
        raise ObjectError(f"{f}: required")
    if isinstance(d, bool) or not isinstance(d, str | int | float):
        raise ObjectError(f"{f}: quantities must be strings or numbers, not {d!r}")
    try:
        return parse_quantity(d)
    except QuantityError as e:
        raise ObjectError(f"{f}: {e}") from None


def _opt_qty(d: object, f: str) -> Fraction | None:
    return None if d is None else _qty(d, f)


def _selector(d: object, f: str) -> NodeSelector | None:
    return None if d is None else compile_node_selector(d, f)


@dataclass(frozen=True, slots=True)
class Attribute:
    """One typed attribute value: ``kind`` is int, bool, string or version."""

    kind: str
    value: int | bool | str


def _attribute(d: object, f: str) -> Attribute:
    m = _map(d, f)
    set_ = [k for k in ("int", "bool", "string", "version") if m.get(k) is not None]
    if len(set_) != 1:
        raise ObjectError(f"{f}: exactly one of int, bool, string, version must be set")
    kind = set_[0]
    v = m[kind]
    ok = {
        "int": isinstance(v, int) and not isinstance(v, bool),
        "bool": isinstance(v, bool),
        "string": isinstance(v, str),
        "version": isinstance(v, str),
    }[kind]
    if not ok:
        raise ObjectError(f"{f}.{kind}: wrong type {type(v).__name__}")
    return Attribute(kind, v)


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    default: Fraction | None = None
    valid_values: tuple[Fraction, ...] = ()
    min: Fraction | None = None
    max: Fraction | None = None
    step: Fraction | None = None
    has_range: bool = False


@dataclass(frozen=True, slots=True)
class DeviceCapacity:
    value: Fraction
    policy: CapacityPolicy | None = None


def _capacity(d: object, f: str) -> DeviceCapacity:
    m = _map(d, f)
    pol = m.get("requestPolicy")
    policy = None
    if pol is not None:
        p = _map(pol, f"{f}.requestPolicy")
        rng = p.get("validRange")
        r = _map(rng, f"{f}.requestPolicy.validRange")
        policy = CapacityPolicy(
            default=_opt_qty(p.get("default"), f"{f}.requestPolicy.default"),
            valid_values=tuple(
                _qty(v, f"{f}.requestPolicy.validValues[{i}]")
                for i, v in enumerate(_list(p.get("validValues"), f"{f}.requestPolicy.validValues"))
            ),
            min=_opt_qty(r.get("min"), f"{f}.requestPolicy.validRange.min"),
            max=_opt_qty(r.get("max"), f"{f}.requestPolicy.validRange.max"),
            step=_opt_qty(r.get("step"), f"{f}.requestPolicy.validRange.step"),
            has_range=rng is not None,
        )
    return DeviceCapacity(_qty(m.get("value"), f"{f}.value"), policy)


def _counters(d: object, f: str) -> dict[str, Fraction]:
    return {
        str(name): _qty(_map(c, f"{f}[{name}]").get("value"), f"{f}[{name}].value")
        for name, c in _map(d, f).items()
    }


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str
    effect: str
    rule: str = field(default="", compare=False)
    """The DeviceTaintRule that put it on the device (empty: the ResourceSlice)."""


@dataclass(frozen=True, slots=True)
class DeviceToleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: DeviceTaint) -> bool:
        """resourceclaim.ToleratesTaint: empty effect or key matches all."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator in ("", "Equal"):
            return self.value == taint.value
        return self.operator == "Exists"


@dataclass(slots=True, eq=False)
class Device:
    name: str
    attributes: dict[str, Attribute]
    capacity: dict[str, DeviceCapacity]
    consumes_counters: tuple[tuple[str, dict[str, Fraction]], ...] = ()
    node_name: str = ""
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    taints: tuple[DeviceTaint, ...] = ()
    binds_to_node: bool = False
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()
    allow_multiple_allocations: bool | None = None
    node_selector_raw: Mapping[str, Any] | None = None
    # The CEL input of this device, built on first use (see cel.device_input), and the
    # outcome of each selector on it (True/False, or the runtime error text): a selector
    # is a pure function of the device, so it is evaluated once per device object.
    cel_input: dict[str, Any] | None = field(default=None, repr=False)
    cel_results: dict[str, bool | str] = field(default_factory=dict, repr=False)
    # Whether every capacity is consumed whole (no policy, not negative), worked out on
    # first use: such a device fits any request that asks for no capacity while none of
    # it is in use, with no Fraction arithmetic.
    plain_capacity: bool | None = field(default=None, repr=False)


def parse_taint(t: object, f: str, rule: str = "") -> DeviceTaint:
    """One ``DeviceTaint`` at field path ``f``; ``ObjectError`` names what is wrong."""
    tm = _map(t, f)
    return DeviceTaint(
        _str(tm.get("key"), f"{f}.key", required=True),
        _str(tm.get("value"), f"{f}.value"),
        _str(tm.get("effect"), f"{f}.effect", required=True),
        rule,
    )


def _device(d: object, f: str) -> Device:
    m = _map(d, f)
    taints = [
        parse_taint(t, f"{f}.taints[{i}]")
        for i, t in enumerate(_list(m.get("taints"), f"{f}.taints"))
    ]
    consumes = []
    for i, c in enumerate(_list(m.get("consumesCounters"), f"{f}.consumesCounters")):
        cm = _map(c, f"{f}.consumesCounters[{i}]")
        consumes.append(
            (
                _str(cm.get("counterSet"), f"{f}.consumesCounters[{i}].counterSet", required=True),
                _counters(cm.get("counters"), f"{f}.consumesCounters[{i}].counters"),
            )
        )
    return Device(
        name=_str(m.get("name"), f"{f}.name", required=True),
        attributes={
            str(k): _attribute(v, f"{f}.attributes[{k}]")
            for k, v in _map(m.get("attributes"), f"{f}.attributes").items()
        },
        capacity={
            str(k): _capacity(v, f"{f}.capacity[{k}]")
            for k, v in _map(m.get("capacity"), f"{f}.capacity").items()
        },
        consumes_counters=tuple(consumes),
        node_name=_str(m.get("nodeName"), f"{f}.nodeName"),
        node_selector=_selector(m.get("nodeSelector"), f"{f}.nodeSelector"),
        all_nodes=bool(_bool(m.get("allNodes"), f"{f}.allNodes")),
        taints=tuple(taints),
        binds_to_node=bool(_bool(m.get("bindsToNode"), f"{f}.bindsToNode")),
        binding_conditions=tuple(_list(m.get("bindingConditions"), f"{f}.bindingConditions")),
        binding_failure_conditions=tuple(
            _list(m.get("bindingFailureConditions"), f"{f}.bindingFailureConditions")
        ),
        allow_multiple_allocations=_bool(
            m.get("allowMultipleAllocations"), f"{f}.allowMultipleAllocations"
        ),
        node_selector_raw=m.get("nodeSelector"),
    )


@dataclass(frozen=True, slots=True)
class CounterSet:
    name: str
    counters: dict[str, Fraction]


@dataclass(slots=True, eq=False)
class ResourceSlice:
    """One ResourceSlice. Duplicate device names are not refused here: as upstream,
    they make the pool invalid at allocation time (``duplicate device name ...``)."""

    name: str
    driver: str
    pool: str
    generation: int
    resource_slice_count: int
    node_name: str = ""
    node_selector: NodeSelector | None = None
    all_nodes: bool = False
    per_device_node_selection: bool = False
    devices: list[Device] = field(default_factory=list)
    shared_counters: list[CounterSet] = field(default_factory=list)
    uses_compatibility_groups: bool = False
    node_selector_raw: Mapping[str, Any] | None = None

    def with_header(self, raw: Mapping[str, Any]) -> ResourceSlice:
        """The slice ``raw``, whose spec is this one's but for ``pool`` and ``nodeName``
        (:mod:`.slice_bodies`): its name, pool and node read from ``raw``, the parsed
        devices, counters and node selection shared with this one."""
        meta = _map(raw.get("metadata"), "metadata")
        spec = _map(raw.get("spec"), "spec")
        pool = _map(spec.get("pool"), "spec.pool")
        count = _int(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount")
        if count < 1:
            raise ObjectError("spec.pool.resourceSliceCount: must be greater than zero")
        return dataclasses.replace(
            self,
            name=_str(meta.get("name"), "metadata.name", required=True),
            pool=_str(pool.get("name"), "spec.pool.name", required=True),
            generation=_int(pool.get("generation"), "spec.pool.generation"),
            resource_slice_count=count,
            node_name=_str(spec.get("nodeName"), "spec.nodeName"),
        )

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ResourceSlice:
        meta = _map(raw.get("metadata"), "metadata")
        spec = _map(raw.get("spec"), "spec")
        pool = _map(spec.get("pool"), "spec.pool")
        node_name = _str(spec.get("nodeName"), "spec.nodeName")
        node_sel = _selector(spec.get("nodeSelector"), "spec.nodeSelector")
        all_nodes = bool(_bool(spec.get("allNodes"), "spec.allNodes"))
        per_device = bool(_bool(spec.get("perDeviceNodeSelection"), "spec.perDeviceNodeSelection"))
        if sum((bool(node_name), node_sel is not None, all_nodes, per_device)) != 1:
            raise ObjectError(
                "spec: exactly one of nodeName, nodeSelector, allNodes, perDeviceNodeSelection "
                "must be set"
            )
        count = _int(pool.get("resourceSliceCount"), "spec.pool.resourceSliceCount")
        if count < 1:
            raise ObjectError("spec.pool.resourceSliceCount: must be greater than zero")
        raw_devices = _list(spec.get("devices"), "spec.devices")
        shared = []
        for i, c in enumerate(_list(spec.get("sharedCounters"), "spec.sharedCounters")):
            cm = _map(c, f"spec.sharedCounters[{i}]")
            shared.append(
                CounterSet(
                    _str(cm.get("name"), f"spec.sharedCounters[{i}].name", required=True),
                    _counters(cm.get("counters"), f"spec.sharedCounters[{i}].counters"),
                )
            )
        return cls(
            name=_str(meta.get("name"), "metadata.name", required=True),
            driver=_str(spec.get("driver"), "spec.driver", required=True),
            pool=_str(pool.get("name"), "spec.pool.name", required=True),
            generation=_int(pool.get("generation"), "spec.pool.generation"),
            resource_slice_count=count,
            node_name=node_name,
            node_selector=node_sel,
            all_nodes=all_nodes,
            per_device_node_selection=per_device,
            devices=[_device(d, f"spec.devices[{i}]") for i, d in enumerate(raw_devices)],
            shared_counters=shared,
            node_selector_raw=spec.get("nodeSelector"),
            # DRADeviceCompatibilityGroups (alpha, off): such slices are left out.
            uses_compatibility_groups=any(
                isinstance(cc, Mapping) and cc.get("compatibilityGroups")
                for d in raw_devices
                for cc in (d.get("consumesCounters") or [] if isinstance(d, Mapping) else [])
            ),
        )


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[str, ...]
    # Opaque configs, passed through to AllocationResult.devices.config.
    config: tuple[Mapping[str, Any], ...] = ()

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> DeviceClass:
        meta = _map(raw.get("metadata"), "metadata")
        spec = _map(raw.get("spec"), "spec")
        return cls(
            name=_str(meta.get("name"), "metadata.name", required=True),
            selectors=_selectors(spec.get("selectors"), "spec.selectors"),
            config=tuple(
                _map(c, f"spec.config[{i}]")
                for i, c in enumerate(_list(spec.get("config"), "spec.config"))
            ),
        )


def _selectors(d: object, f: str) -> tuple[str, ...]:
    out = []
    for i, s in enumerate(_list(d, f)):
        cel = _map(_map(s, f"{f}[{i}]").get("cel"), f"{f}[{i}].cel")
        if not cel:
            raise ObjectError(f"{f}[{i}]: CEL expression empty (unsupported selector type?)")
        out.append(_str(cel.get("expression"), f"{f}[{i}].cel.expression", required=True))
    return tuple(out)


@dataclass(frozen=True, slots=True)
class ExactRequest:
    """An ``exactly`` request or one ``firstAvailable`` subrequest."""

    name: str
    device_class_name: str
    selectors: tuple[str, ...] = ()
    allocation_mode: str = EXACT_COUNT
    count: int = 1
    admin_access: bool | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    capacity: dict[str, Fraction] | None = None


def _exact(m: Mapping[str, Any], name: str, f: str, *, sub: bool) -> ExactRequest:
    mode = _str(m.get("allocationMode"), f"{f}.allocationMode") or EXACT_COUNT
    if mode not in (EXACT_COUNT, ALL):
        raise ObjectError(f"{f}.allocationMode: must be ExactCount or All, got {mode!r}")
    count = _int(m.get("count"), f"{f}.count", 1 if mode == EXACT_COUNT else 0)
    if mode == EXACT_COUNT and count < 1:
        raise ObjectError(f"{f}.count: must be greater than zero")
    tols = []
    for i, t in enumerate(_list(m.get("tolerations"), f"{f}.tolerations")):
        tm = _map(t, f"{f}.tolerations[{i}]")
        op = _str(tm.get("operator"), f"{f}.tolerations[{i}].operator") or "Equal"
        if op not in ("Equal", "Exists"):
            raise ObjectError(f"{f}.tolerations[{i}].operator: must be Equal or Exists")
        tols.append(
            DeviceToleration(
                _str(tm.get("key"), f"{f}.tolerations[{i}].key"),
                op,
                _str(tm.get("value"), f"{f}.tolerations[{i}].value"),
                _str(tm.get("effect"), f"{f}.tolerations[{i}].effect"),
            )
        )
    cap = m.get("capacity")
    capacity = None
    if cap is not None:
        reqs = _map(_map(cap, f"{f}.capacity").get("requests"), f"{f}.capacity.requests")
        capacity = {str(k): _qty(v, f"{f}.capacity.requests[{k}]") for k, v in reqs.items()}
    return ExactRequest(
        name=name,
        device_class_name=_str(m.get("deviceClassName"), f"{f}.deviceClassName", required=True),
        selectors=_selectors(m.get("selectors"), f"{f}.selectors"),
        allocation_mode=mode,
        count=count,
        admin_access=None if sub else _bool(m.get("adminAccess"), f"{f}.adminAccess"),
        tolerations=tuple(tols),
        capacity=capacity,
    )


@dataclass(frozen=True, slots=True)
class DeviceRequest:
    """A claim request: ``exactly`` xor ``first_available`` (subrequests, in order)."""

    name: str
    exactly: ExactRequest | None
    first_available: tuple[ExactRequest, ...] = ()


@dataclass(frozen=True, slots=True)
class Constraint:
    requests: tuple[str, ...]
    match_attribute: str | None = None
    distinct_attribute: str | None = None


@dataclass(frozen=True, slots=True)
class DeviceResult:
    request: str
    driver: str
    pool: str
    device: str
    admin_access: bool | None = None
    share_id: str | None = None
    consumed_capacity: dict[str, Fraction] | None = None
    tolerations: tuple[DeviceToleration, ...] = ()
    binding_conditions: tuple[str, ...] = ()
    binding_failure_conditions: tuple[str, ...] = ()


@dataclass(slots=True)
class AllocationResult:
    devices: list[DeviceResult]
    config: list[dict[str, Any]] = field(default_factory=list)
    # None: available on every node; else a raw v1.NodeSelector dict.
    node_selector: dict[str, Any] | None = None


@dataclass(slots=True, eq=False)
class ResourceClaim:
    namespace: str
    name: str
    uid: str
    requests: tuple[DeviceRequest, ...]
    constraints: tuple[Constraint, ...] = ()
    config: tuple[Mapping[str, Any], ...] = ()
    allocation: AllocationResult | None = None
    reserved_for: tuple[Mapping[str, Any], ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> ResourceClaim:
        meta = _map(raw.get("metadata"), "metadata")
        devices = _map(_map(raw.get("spec"), "spec").get("devices"), "spec.devices")
        requests = []
        names: set[str] = set()
        for i, r in enumerate(_list(devices.get("requests"), "spec.devices.requests")):
            f = f"spec.devices.requests[{i}]"
            rm = _map(r, f)
            name = _str(rm.get("name"), f"{f}.name", required=True)
            if name in names:
                raise ObjectError(f"{f}.name: duplicate request name {name!r}")
            names.add(name)
            ex, fa = rm.get("exactly"), rm.get("firstAvailable")
            if (ex is None) == (fa is None):
                raise ObjectError(f"{f}: exactly one of exactly, firstAvailable must be set")
            if ex is not None:
                requests.append(
                    DeviceRequest(
                        name, _exact(_map(ex, f"{f}.exactly"), name, f"{f}.exactly", sub=False)
                    )
                )
                continue
            subs = []
            for j, s in enumerate(_list(fa, f"{f}.firstAvailable")):
                sf = f"{f}.firstAvailable[{j}]"
                sm = _map(s, sf)
                subs.append(
                    _exact(sm, _str(sm.get("name"), f"{sf}.name", required=True), sf, sub=True)
                )
            if not subs:
                raise ObjectError(f"{f}.firstAvailable: must not be empty")
            requests.append(DeviceRequest(name, None, tuple(subs)))
        constraints = []
        for i, c in enumerate(_list(devices.get("constraints"), "spec.devices.constraints")):
            cm = _map(c, f"spec.devices.constraints[{i}]")
            constraints.append(
                Constraint(
                    tuple(_list(cm.get("requests"), f"spec.devices.constraints[{i}].requests")),
                    _str(cm.get("matchAttribute"), "matchAttribute") or None,
                    _str(cm.get("distinctAttribute"), "distinctAttribute") or None,
                )
            )
        status = _map(raw.get("status"), "status")
        alloc = _allocation(status.get("allocation"))
        return cls(
            namespace=_str(meta.get("namespace"), "metadata.namespace") or "default",
            name=_str(meta.get("name"), "metadata.name", required=True),
            uid=_str(meta.get("uid"), "metadata.uid"),
            requests=tuple(requests),
            constraints=tuple(constraints),
            config=tuple(_list(devices.get("config"), "spec.devices.config")),
            allocation=alloc,
            reserved_for=tuple(_list(status.get("reservedFor"), "status.reservedFor")),
        )


def _allocation(d: object) -> AllocationResult | None:
    if d is None:
        return None
    f = "status.allocation"
    res = []
    devs = _map(_map(d, f).get("devices"), f"{f}.devices")
    for i, r in enumerate(_list(devs.get("results"), f"{f}.devices.results")):
        rf = f"{f}.devices.results[{i}]"
        rm = _map(r, rf)
        cc = rm.get("consumedCapacity")
        res.append(
            DeviceResult(
                request=_str(rm.get("request"), f"{rf}.request", required=True),
                driver=_str(rm.get("driver"), f"{rf}.driver", required=True),
                pool=_str(rm.get("pool"), f"{rf}.pool", required=True),
                device=_str(rm.get("device"), f"{rf}.device", required=True),
                admin_access=_bool(rm.get("adminAccess"), f"{rf}.adminAccess"),
                share_id=_str(rm.get("shareID"), f"{rf}.shareID") or None,
                consumed_capacity=None
                if cc is None
                else {
                    str(k): _qty(v, f"{rf}.consumedCapacity[{k}]") for k, v in _map(cc, rf).items()
                },
            )
        )
    ns = _map(d, f).get("nodeSelector")
    return AllocationResult(res, list(_list(devs.get("config"), f"{f}.devices.config")), ns)
