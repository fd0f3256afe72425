"""Resource lists and the pod request arithmetic kube-scheduler uses.

CPU is in millicores, every other resource in whole units. Requests follow
``k8s.io/component-helpers/resource.PodRequests``: the sum of app containers, sidecars
(init containers with ``restartPolicy: Always``) added to it, regular init containers
as a running maximum that includes the sidecars started before them, pod overhead on
top. Pod-level ``spec.resources.requests`` (cpu, memory) override the aggregate.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kubesched.framework.memo import remember
from kubesched.framework.quantity import QuantityError, milli_value, value

__all__ = [
    "CPU",
    "DEFAULT_MEMORY_REQUEST",
    "DEFAULT_MILLI_CPU_REQUEST",
    "EPHEMERAL_STORAGE",
    "MEMORY",
    "PODS",
    "Resource",
    "parse_resource_list",
    "pod_request_pair",
    "pod_requests",
    "status_request_pair",
]

CPU = "cpu"
MEMORY = "memory"
EPHEMERAL_STORAGE = "ephemeral-storage"
PODS = "pods"

# Used for scoring only, for containers that do not state a request
# (kube-scheduler's DefaultMilliCPURequest / DefaultMemoryRequest).
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024


class Resource:
    """A resource list in scheduler units."""

    __slots__ = ("allowed_pods", "ephemeral_storage", "memory", "milli_cpu", "scalar")

    def __init__(
        self,
        milli_cpu: int = 0,
        memory: int = 0,
        ephemeral_storage: int = 0,
        allowed_pods: int = 0,
        scalar: dict[str, int] | None = None,
    ) -> None:
        self.milli_cpu = milli_cpu
        self.memory = memory
        self.ephemeral_storage = ephemeral_storage
        self.allowed_pods = allowed_pods
        self.scalar: dict[str, int] = scalar if scalar is not None else {}

    def copy(self) -> Resource:
        return Resource(
            self.milli_cpu,
            self.memory,
            self.ephemeral_storage,
            self.allowed_pods,
            dict(self.scalar),
        )

    def get(self, name: str) -> int:
        if name == CPU:
            return self.milli_cpu
        if name == MEMORY:
            return self.memory
        if name == EPHEMERAL_STORAGE:
            return self.ephemeral_storage
        if name == PODS:
            return self.allowed_pods
        return self.scalar.get(name, 0)

    def set(self, name: str, amount: int) -> None:
        if name == CPU:
            self.milli_cpu = amount
        elif name == MEMORY:
            self.memory = amount
        elif name == EPHEMERAL_STORAGE:
            self.ephemeral_storage = amount
        elif name == PODS:
            self.allowed_pods = amount
        else:
            self.scalar[name] = amount

    def add(self, other: Resource, sign: int = 1) -> None:
        self.milli_cpu += sign * other.milli_cpu
        self.memory += sign * other.memory
        self.ephemeral_storage += sign * other.ephemeral_storage
        self.allowed_pods += sign * other.allowed_pods
        if other.scalar:
            s = self.scalar
            for k, v in other.scalar.items():
                s[k] = s.get(k, 0) + sign * v

    def set_max(self, other: Resource) -> None:
        self.milli_cpu = max(self.milli_cpu, other.milli_cpu)
        self.memory = max(self.memory, other.memory)
        self.ephemeral_storage = max(self.ephemeral_storage, other.ephemeral_storage)
        self.allowed_pods = max(self.allowed_pods, other.allowed_pods)
        for k, v in other.scalar.items():
            if v > self.scalar.get(k, 0):
                self.scalar[k] = v

    def names(self) -> Iterable[str]:
        yield CPU
        yield MEMORY
        yield EPHEMERAL_STORAGE
        yield from self.scalar

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Resource):
            return NotImplemented
        return (
            self.milli_cpu == other.milli_cpu
            and self.memory == other.memory
            and self.ephemeral_storage == other.ephemeral_storage
            and self.allowed_pods == other.allowed_pods
            and {k: v for k, v in self.scalar.items() if v}
            == {k: v for k, v in other.scalar.items() if v}
        )

    def __repr__(self) -> str:
        return (
            f"Resource(cpu={self.milli_cpu}m, memory={self.memory}, "
            f"ephemeral={self.ephemeral_storage}, pods={self.allowed_pods}, {self.scalar})"
        )


def parse_resource_list(rl: Mapping[str, Any] | None, *, field: str = "") -> Resource:
    """Parse ``{"cpu": "500m", "memory": "1Gi", ...}``; errors name the field."""
    r = Resource()
    if not rl:
        return r
    rl = _section(rl, field or "resources")
    for name, q in rl.items():
        where = f"{field}.{name}" if field else str(name)
        if not isinstance(name, str) or not name:
            raise QuantityError(
                f"{field or 'resources'}: resource names must be strings, got {name!r}"
            )
        if isinstance(q, bool) or not isinstance(q, str | int | float):
            raise QuantityError(f"{where}: must be a quantity string or number, got {q!r}")
        try:
            amount = milli_value(q) if name == CPU else value(q)
        except QuantityError as e:
            raise QuantityError(f"{where}: {e}") from None
        if amount < 0:
            raise QuantityError(f"{where}: must be greater than or equal to 0, got {q!r}")
        r.set(name, amount)
    return r


def _items(obj: object, field: str) -> list[object]:
    """``obj`` as a list (None: empty), else a QuantityError naming ``field``."""
    if type(obj) is list:
        return obj
    if obj is None:
        return []
    raise QuantityError(f"{field}: expected a list, got {type(obj).__name__}")


def _section(obj: object, field: str) -> Mapping[str, Any]:
    """``obj`` as a map (None: empty), else a QuantityError naming ``field``."""
    if type(obj) is dict:  # the common case, without the ABC check (every pod event)
        return obj
    if obj is None:
        return {}
    if not isinstance(obj, Mapping):
        raise QuantityError(f"{field}: expected an object, got {type(obj).__name__}")
    return obj


def _container_requests(c: Mapping[str, Any], field: str) -> tuple[Resource, Resource]:
    """``c``'s requests, and its non-zero ones (the same object when it states both cpu
    and memory); ``c``: a container already checked to be a map (by :func:`_section`)."""
    res = _section(c.get("resources"), f"{field}.resources")
    req = _section(res.get("requests"), f"{field}.resources.requests")
    lim = _section(res.get("limits"), f"{field}.resources.limits")
    # The API server defaults a missing request to the limit; scenarios skip that
    # defaulting, so it is done here.
    if lim:
        merged = dict(lim)
        if req:
            merged.update(req)
        req = merged
    return _with_non_zero(parse_resource_list(req, field=f"{field}.resources.requests"), req)


def _with_non_zero(r: Resource, req: Mapping[str, Any]) -> tuple[Resource, Resource]:
    """``r`` (parsed from ``req``) and its non-zero figure: kube's defaults for a cpu or
    memory ``req`` does not state (the same object when it states both)."""
    if req and CPU in req and MEMORY in req:
        return r, r
    nz = r.copy()
    if not req or CPU not in req:
        nz.milli_cpu = DEFAULT_MILLI_CPU_REQUEST
    if not req or MEMORY not in req:
        nz.memory = DEFAULT_MEMORY_REQUEST
    return r, nz


def pod_requests(spec: Mapping[str, Any], *, non_zero: bool = False) -> Resource:
    """The pod's effective requests (see module docstring).

    ``non_zero`` substitutes kube-scheduler's defaults for containers that state no
    cpu/memory request: the figure the scoring plugins use.
    """
    return pod_request_pair(spec)[1 if non_zero else 0]


_SEEN: dict[object, tuple[Resource, Resource]] = {}
"""Containers' resources (as :func:`_plain_key` gives them) -> their two figures: the
replicas of a workload share one spec, and every event of every one of them would
otherwise parse the same quantities again."""
_SEEN_MAX = 4096


def _plain_key(spec: Mapping[str, Any]) -> object:
    """The requests and limits of ``spec``'s containers as a hashable key, when that is
    all the figures depend on (no init containers, pod-level resources or overhead) and
    each is a plain map; else None."""
    if spec.get("initContainers") or spec.get("resources") or spec.get("overhead"):
        return None
    containers = spec.get("containers")
    if type(containers) is not list:
        return None
    key: list[object] = []
    for c in containers:
        if type(c) is not dict:
            return None
        res = c.get("resources")
        if res is None:
            key.append(None)
            continue
        if type(res) is not dict:  # refused by the parse (an empty list too)
            return None
        req, lim = res.get("requests"), res.get("limits")
        if (req is not None and type(req) is not dict) or (
            lim is not None and type(lim) is not dict
        ):
            return None
        items = (tuple(req.items()) if req else (), tuple(lim.items()) if lim else ())
        for section in items:
            for _, q in section:
                if type(q) is not str:  # the API server's quantities are strings; a
                    return None  # number (or a bool, equal to 1 as a key) is parsed
        key.append(items)
    return tuple(key)


def pod_request_pair(spec: Mapping[str, Any]) -> tuple[Resource, Resource]:
    """:func:`pod_requests` and its ``non_zero`` figure, in one pass over the spec (every
    pod event parses both); the figures of containers seen before are copied, not parsed
    again (:data:`_SEEN`)."""
    key = _plain_key(spec)
    if key is not None:
        seen = _SEEN.get(key)
        if seen is not None:
            return seen[0].copy(), seen[1].copy()
    pair = _parse_request_pair(spec)
    if key is not None:
        remember(_SEEN, key, (pair[0].copy(), pair[1].copy()), _SEEN_MAX)
    return pair


Pick = Callable[[Mapping[str, Any], str], tuple[Resource, Resource]]
"""A container (checked to be a map) and its field -> the requests counted for it and
their non-zero figure (fresh objects: the aggregation adds to them)."""


def _aggregate(spec: Mapping[str, Any], pick: Pick) -> tuple[Resource, Resource]:
    """The containers' requests as ``PodRequests`` sums them (app containers, sidecars,
    the running maximum of init containers), each container's as ``pick`` gives them."""
    total, total_nz = Resource(), Resource()
    for i, c in enumerate(_items(spec.get("containers"), "spec.containers")):
        field = f"spec.containers[{i}]"
        r, nz = pick(_section(c, field), field)
        total.add(r)
        total_nz.add(nz)
    sidecars, sidecars_nz = Resource(), Resource()
    init_max, init_max_nz = Resource(), Resource()
    for i, c in enumerate(_items(spec.get("initContainers"), "spec.initContainers")):
        field = f"spec.initContainers[{i}]"
        init = _section(c, field)
        creq, cnz = pick(init, field)
        if init.get("restartPolicy") == "Always":
            total.add(creq)
            total_nz.add(cnz)
            sidecars.add(creq)
            sidecars_nz.add(cnz)
            creq, cnz = sidecars.copy(), sidecars_nz.copy()
        else:
            if cnz is creq:
                cnz = creq.copy()
            creq.add(sidecars)
            cnz.add(sidecars_nz)
        init_max.set_max(creq)
        init_max_nz.set_max(cnz)
    total.set_max(init_max)
    total_nz.set_max(init_max_nz)
    return total, total_nz


def _pod_level_and_overhead(
    spec: Mapping[str, Any], total: Resource, total_nz: Resource, pod_level: dict[str, int]
) -> tuple[Resource, Resource]:
    """Pod-level requests (``pod_level``: cpu, memory) over the containers' sum, then
    the overhead."""
    if CPU in pod_level:
        total.milli_cpu = total_nz.milli_cpu = pod_level[CPU]
    if MEMORY in pod_level:
        total.memory = total_nz.memory = pod_level[MEMORY]
    overhead = _section(spec.get("overhead"), "spec.overhead")
    if overhead:
        ov = parse_resource_list(overhead, field="spec.overhead")
        total.add(ov)
        total_nz.add(ov)
    return total, total_nz


def _pod_level(rl: Mapping[str, Any], field: str) -> dict[str, int]:
    """The cpu and memory of a pod-level resource list, those it states."""
    if not rl:
        return {}
    amounts = parse_resource_list(rl, field=field)
    return {name: amounts.get(name) for name in (CPU, MEMORY) if name in rl}


def _spec_pod_level(spec: Mapping[str, Any]) -> Mapping[str, Any]:
    return _section(
        _section(spec.get("resources"), "spec.resources").get("requests"),
        "spec.resources.requests",
    )


def _parse_request_pair(spec: Mapping[str, Any]) -> tuple[Resource, Resource]:
    total, total_nz = _aggregate(spec, _container_requests)
    pod_level = _pod_level(_spec_pod_level(spec), "spec.resources.requests")
    return _pod_level_and_overhead(spec, total, total_nz, pod_level)


# -- a resize in the status ----------------------------------------------------------------
_STATUS_LISTS: dict[tuple[tuple[str, object], ...], Resource] = {}
"""Status resource lists already parsed (the kubelet reports the same few again and
again: every running pod's status update carries them)."""


def _parse_status_list(rl: Mapping[str, Any], field: str) -> Resource:
    key = tuple(rl.items())
    try:
        seen = _STATUS_LISTS.get(key)
    except TypeError:  # an unhashable value: parsed (and refused) below
        seen, key = None, ()
    if seen is not None:
        return seen.copy()
    r = parse_resource_list(rl, field=field)
    if key:
        remember(_STATUS_LISTS, key, r.copy(), _SEEN_MAX)
    return r


def _list_pair(rl: object, field: str) -> tuple[Resource, Resource]:
    """A status's resource list and its non-zero figure (kube's defaults for a missing
    cpu or memory, as for a container that states none)."""
    req = _section(rl, field)
    return _with_non_zero(_parse_status_list(req, field), req)


def _resize_infeasible(status: Mapping[str, Any]) -> bool:
    """``PodResizePending`` with reason ``Infeasible`` (the first such condition)."""
    for c in _items(status.get("conditions"), "status.conditions"):
        if type(c) is dict and c.get("type") == "PodResizePending":
            return c.get("reason") == "Infeasible"
    return False


def _matches_spec(spec: Mapping[str, Any], by_name: Mapping[object, Mapping[str, Any]]) -> bool:
    """Whether every container's allocated and actuated requests in the status are
    exactly its spec's (the common case: no resize under way)."""
    for key in ("containers", "initContainers"):
        for c in _items(spec.get(key), f"spec.{key}"):
            if type(c) is not dict:
                return False
            res = c.get("resources")
            if res is not None and type(res) is not dict:
                return False
            req = (res or {}).get("requests") or {}
            limits = (res or {}).get("limits")
            if limits:
                if type(limits) is not dict or (req and type(req) is not dict):
                    return False
                req = {**limits, **req}  # the API server's defaulting, as counted
            cs = by_name.get(c.get("name"))
            if cs is None:
                continue
            allocated = cs.get("allocatedResources")
            if allocated is not None and allocated != req:
                return False
            actuated = cs.get("resources")
            if actuated is not None and (
                type(actuated) is not dict
                or (actuated.get("requests") is not None and actuated["requests"] != req)
            ):
                return False
    return True


def status_request_pair(
    spec: Mapping[str, Any], status: Mapping[str, Any]
) -> tuple[Resource, Resource] | None:
    """A pod's requests as kube-scheduler 1.37 counts them once its status reports
    resources (``PodRequests`` with ``UseStatusResources``; in-place resize is GA and
    ``InPlacePodLevelResourcesVerticalScaling`` beta, both on): per resource the largest
    of the spec's, the allocated (``allocatedResources``) and the actuated
    (``resources.requests``) requests, container by container, or from the pod-level
    status maps when the kubelet reports both; the spec's left out while the resize is
    infeasible (``PodResizePending``, reason ``Infeasible``). None when the status says
    nothing the spec does not, or is malformed: the spec's figures stand."""
    statuses = status.get("containerStatuses"), status.get("initContainerStatuses")
    pod_allocated = status.get("allocatedResources")
    pod_resources = status.get("resources")
    if not statuses[0] and not statuses[1] and pod_allocated is None and pod_resources is None:
        return None
    try:
        by_name = {
            cs.get("name"): cs
            for group in statuses
            for cs in _items(group, "status.containerStatuses")
            if type(cs) is dict
        }
        infeasible = _resize_infeasible(status)
        if (
            not infeasible
            and pod_allocated is None
            and pod_resources is None
            and _matches_spec(spec, by_name)
        ):
            return None
        return _status_pair(spec, by_name, infeasible, pod_allocated, pod_resources)
    except (QuantityError, AttributeError, TypeError):
        return None


def _status_pair(
    spec: Mapping[str, Any],
    by_name: Mapping[object, Mapping[str, Any]],
    infeasible: bool,
    pod_allocated: object,
    pod_resources: object,
) -> tuple[Resource, Resource]:
    def allocated_pick(c: Mapping[str, Any], field: str) -> tuple[Resource, Resource]:
        cs = by_name.get(c.get("name"))
        if cs is not None and cs.get("allocatedResources") is not None:
            return _list_pair(cs["allocatedResources"], f"{field} allocatedResources")
        if infeasible:
            return _list_pair(None, field)
        return _container_requests(c, field)

    def actuated_pick(c: Mapping[str, Any], field: str) -> tuple[Resource, Resource]:
        cs = by_name.get(c.get("name"))
        if cs is not None:
            actuated = _section(cs.get("resources"), f"{field} status resources")
            if actuated.get("requests") is not None:
                return _list_pair(actuated["requests"], f"{field} status resources.requests")
            if cs.get("allocatedResources") is not None:
                return _list_pair(cs["allocatedResources"], f"{field} allocatedResources")
        if infeasible:
            return _list_pair(None, field)
        return _container_requests(c, field)

    pod_actuated = _section(pod_resources, "status.resources").get("requests")
    if pod_allocated is not None and pod_actuated is not None:
        # the kubelet's pod-level maps: already the sum over the containers
        allocated = _parse_status_list(
            _section(pod_allocated, "status.allocatedResources"), "status.allocatedResources"
        )
        actuated = _parse_status_list(
            _section(pod_actuated, "status.resources.requests"), "status.resources.requests"
        )
        allocated_pair, actuated_pair = (allocated, allocated), (actuated, actuated)
    else:
        allocated_pair = _aggregate(spec, allocated_pick)
        actuated_pair = _aggregate(spec, actuated_pick)
    if infeasible:
        total, total_nz = actuated_pair[0].copy(), actuated_pair[1].copy()
    elif not spec.get("resources") and not spec.get("overhead"):
        total, total_nz = pod_request_pair(spec)  # the containers' sum, parsed once
    else:
        total, total_nz = _aggregate(spec, _container_requests)
        total.set_max(actuated_pair[0])
        total_nz.set_max(actuated_pair[1])
    total.set_max(allocated_pair[0])
    total_nz.set_max(allocated_pair[1])
    spec_level = _spec_pod_level(spec)
    pod_level = _pod_level(spec_level, "spec.resources.requests")
    if spec_level and pod_resources is not None:
        # the largest of the spec's (unless infeasible) and the status's pod-level maps
        if infeasible:
            pod_level = {}
        for rl, field in (
            (pod_actuated, "status.resources.requests"),
            (pod_allocated, "status.allocatedResources"),
        ):
            for name, amount in _pod_level(_section(rl, field), field).items():
                pod_level[name] = max(amount, pod_level.get(name, amount))
    return _pod_level_and_overhead(spec, total, total_nz, pod_level)
