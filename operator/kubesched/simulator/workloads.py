"""Benchmark workloads, modelled on kube-scheduler's scheduler_perf: pure data.

A workload is a :class:`Plan` built for a size (nodes N, measured pods M). Both
``kubesched bench`` targets (the in-memory simulator and a real cluster) and
``kubesched simulate --workload`` run the same plan, in phases:

1. ``setup``: PriorityClasses and PodGroups;
2. ``nodes``: bare Node objects (scheduler_perf's node-default: 4 CPU, 32Gi, 110 pods,
   zones zone1..zone3 round-robin as labels);
3. ``init`` pods, created and (when ``wait_init``) bound before measuring;
4. ``gated`` pods, created before measuring; they must stay unbound;
5. ``measured`` pods, created as fast as the runner can: throughput and latency are
   theirs alone;
6. ``background(tick)``: operations run every ``interval`` seconds while the measured
   pods are being scheduled (tick 0 at the start; at least ``min_ticks`` ticks, so a
   short run still exercises them). Their pods are never counted.

==========================  ==========================================================
SchedulingBasic             M pod-default pods (100m CPU, 500Mi).
NodeAffinity                pods require zone In [zone1, zone2] (2 of 3 zones qualify).
TopologySpreading           pods spread over zones, maxSkew 5, DoNotSchedule.
PreferredTopologySpreading  the same constraint with ScheduleAnyway (a score only).
PodAntiAffinity             required anti-affinity per hostname: one pod per node (M <= N).
PodAffinity                 required affinity per zone to each other: all in one zone.
PodAntiAffinitySymmetric    pods in 10 groups (label ``group``); each requires hostname
                            anti-affinity to its own group and prefers its group's zone
                            (affinity, weight 10) and other hosts than the next group's
                            (anti-affinity, weight 5): every placed pod's terms match the
                            incoming pods, the symmetric case (ceil(M/10) <= N).
MixedAffinitySpread         pods in 10 groups spread over zones (maxSkew 5, DoNotSchedule)
                            and hosts (maxSkew 1, ScheduleAnyway), with hostname
                            anti-affinity to their own group (required) and zone affinity
                            to the next group (preferred, weight 20) (ceil(M/10) <= N).
Unschedulable               pod-default pods, plus a trickle of 10 pods/s asking 9 CPU
                            (fit nowhere; scheduler_perf's pod-large-cpu), not counted.
MixedChurn                  N pod-default init pods bound first; every second a node and a
                            high-priority 9-CPU pod are created, the previous tick's node and
                            pod deleted and one init pod deleted (scheduler_perf's churn op,
                            mode recreate).
PreemptionBasic             4N low-priority 900m pods fill every node; M high-priority pods
                            (priority 10; 3000m as scheduler_perf when M <= N, else 3600m/k
                            for k = ceil(M/N) per node) each must preempt.
SchedulingWhileGated        M pods with a scheduling gate created first (stay pending), then
                            M pod-default pods measured.
Gang                        PodGroups of many small (4-8 members) and a few large (50-100,
                            at most M/2) gangs, about 40% of the pods in large gangs.
LargeGang                   one PodGroup of all M pods (minimum M): a gang of 256 or 1024
                            members with --pods 256 / 1024 (defaults 1000 nodes, 256 pods).
SchedulingWithResourceClaim scheduler_perf's SchedulingWithResourceClaimTemplate: a
Template                    DeviceClass, a ResourceClaimTemplate of one device, one
                            ResourceSlice of 8 devices per node (its own pool); each pod
                            claims one device from the template (M <= 8N). On a cluster
                            the resourceclaim controller makes the claims.
==========================  ==========================================================

Where this departs from scheduler_perf, on purpose: its ``initPods`` of pod-default for
the simple cases are left out (``--pods`` is every pod a run creates, which
``kubesched simulate --workload`` users rely on); affinity terms select in the pod's own
namespace instead of a fixed namespace list. The old names SchedulingNodeAffinity and
SchedulingPodAntiAffinity still work (:data:`ALIASES`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from kubesched.simulator.dra_templates import (
    claim_template,
    device_class,
    pod_with_claim,
    resource_slice,
)
from kubesched.simulator.templates import (
    GANG_LABEL,
    HOSTNAME_LABEL,
    ZONE_LABEL,
    ZONES,
    node_affinity_zones,
    node_default,
    pod,
    pod_affinity,
    pod_group,
    priority_class,
    spread,
)

__all__ = [
    "ALIASES",
    "BACKGROUND",
    "GATED",
    "INIT",
    "MEASURED",
    "NAMES",
    "WORKLOADS",
    "ZONES",
    "Op",
    "Plan",
    "Workload",
    "check_fits",
    "gang_sizes",
    "generate",
    "plan",
    "resolve",
]

MEASURED, INIT, GATED, BACKGROUND = "measured", "init", "gated", "background"
HIGH_PRIORITY = ("kubesched-bench-high", 10)
#: Pods of the Unschedulable trickle created per tick (one tick per second).
TRICKLE = 10
#: A scheduling gate nobody removes.
GATE = "kubesched.dev/bench-gate"


@dataclass(frozen=True, slots=True)
class Op:
    """A background operation: create ``obj``, or delete the object it names."""

    action: Literal["create", "delete"]
    obj: dict[str, Any]


def _no_background(tick: int) -> list[Op]:
    return []


@dataclass
class Plan:
    """A workload at one size, as phases (see the module docstring)."""

    workload: str
    nodes: list[dict[str, Any]]
    measured: list[dict[str, Any]]
    setup: list[dict[str, Any]] = field(default_factory=list)
    init: list[dict[str, Any]] = field(default_factory=list)
    wait_init: bool = True
    gated: list[dict[str, Any]] = field(default_factory=list)
    background: Callable[[int], list[Op]] = _no_background
    interval: float = 1.0
    min_ticks: int = 0
    gangs: dict[str, int] = field(default_factory=dict)
    """PodGroup name -> members."""

    def objects(self) -> list[dict[str, Any]]:
        """Everything but the background, in creation order (``simulate --workload``)."""
        return [*self.setup, *self.nodes, *self.init, *self.gated, *self.measured]


def _nodes(n: int) -> list[dict[str, Any]]:
    return [node_default(f"scheduler-perf-{i}", i) for i in range(n)]


def _basic(n: int, m: int) -> Plan:
    return Plan("SchedulingBasic", _nodes(n), [pod(f"pod-{i}", MEASURED) for i in range(m)])


def _node_affinity(n: int, m: int) -> Plan:
    affinity = node_affinity_zones("zone1", "zone2")
    pods = [pod(f"node-affinity-{i}", MEASURED, affinity=affinity) for i in range(m)]
    return Plan("NodeAffinity", _nodes(n), pods)


def _spreading(name: str, when: str, prefix: str) -> Callable[[int, int], Plan]:
    def build(n: int, m: int) -> Plan:
        pods = [
            pod(
                f"{prefix}-{i}",
                MEASURED,
                labels={"color": "blue"},
                topologySpreadConstraints=spread("blue", when),
            )
            for i in range(m)
        ]
        return Plan(name, _nodes(n), pods)

    return build


def _anti_affinity(n: int, m: int) -> Plan:
    affinity = pod_affinity("podAntiAffinity", "green", HOSTNAME_LABEL)
    pods = [
        pod(f"anti-affinity-pod-{i}", MEASURED, labels={"color": "green"}, affinity=affinity)
        for i in range(m)
    ]
    return Plan("PodAntiAffinity", _nodes(n), pods)


def _affinity(n: int, m: int) -> Plan:
    affinity = pod_affinity("podAffinity", "blue", ZONE_LABEL)
    pods = [
        pod(f"affinity-pod-{i}", MEASURED, labels={"color": "blue"}, affinity=affinity)
        for i in range(m)
    ]
    return Plan("PodAffinity", _nodes(n), pods)


#: Label groups of the symmetric affinity workloads.
AFFINITY_GROUPS = 10


def _group_term(group: int, topology_key: str) -> dict[str, Any]:
    return {
        "labelSelector": {"matchLabels": {"group": f"g{group % AFFINITY_GROUPS}"}},
        "topologyKey": topology_key,
    }


def _anti_affinity_symmetric(n: int, m: int) -> Plan:
    pods = []
    for i in range(m):
        g = i % AFFINITY_GROUPS
        affinity = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [_group_term(g, HOSTNAME_LABEL)],
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 5, "podAffinityTerm": _group_term(g + 1, HOSTNAME_LABEL)}
                ],
            },
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 10, "podAffinityTerm": _group_term(g, ZONE_LABEL)}
                ]
            },
        }
        labels = {"group": f"g{g}"}
        pods.append(pod(f"symmetric-pod-{i}", MEASURED, labels=labels, affinity=affinity))
    return Plan("PodAntiAffinitySymmetric", _nodes(n), pods)


def _mixed_affinity_spread(n: int, m: int) -> Plan:
    pods = []
    for i in range(m):
        g = i % AFFINITY_GROUPS
        selector = {"matchLabels": {"group": f"g{g}"}}
        constraints = [
            {"maxSkew": 5, "topologyKey": ZONE_LABEL, "whenUnsatisfiable": "DoNotSchedule",
             "labelSelector": selector},
            {"maxSkew": 1, "topologyKey": HOSTNAME_LABEL, "whenUnsatisfiable": "ScheduleAnyway",
             "labelSelector": selector},
        ]  # fmt: skip
        affinity = {
            "podAntiAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": [_group_term(g, HOSTNAME_LABEL)]
            },
            "podAffinity": {
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 20, "podAffinityTerm": _group_term(g + 1, ZONE_LABEL)}
                ]
            },
        }
        pods.append(
            pod(
                f"mixed-affinity-pod-{i}",
                MEASURED,
                labels={"group": f"g{g}"},
                affinity=affinity,
                topologySpreadConstraints=constraints,
            )
        )
    return Plan("MixedAffinitySpread", _nodes(n), pods)


def _large_cpu(name: str, role: str, **kw: Any) -> dict[str, Any]:
    """scheduler_perf's pod-large-cpu: 9 CPU requested (no 4-CPU node fits it)."""
    return pod(name, role, cpu="9", limits=False, **kw)


def _unschedulable(n: int, m: int) -> Plan:
    def trickle(tick: int) -> list[Op]:
        return [
            Op("create", _large_cpu(f"large-cpu-{tick}-{j}", BACKGROUND)) for j in range(TRICKLE)
        ]

    measured = [pod(f"pod-{i}", MEASURED) for i in range(m)]
    return Plan("Unschedulable", _nodes(n), measured, background=trickle, min_ticks=2)


def _delete(kind: str, name: str) -> Op:
    meta: dict[str, Any] = {"name": name}
    if kind != "Node":
        meta["namespace"] = "default"
    return Op("delete", {"kind": kind, "metadata": meta})


def _mixed_churn(n: int, m: int) -> Plan:
    init = [pod(f"init-pod-{i}", INIT) for i in range(n)]

    def churn(tick: int) -> list[Op]:
        ops = [
            Op("create", node_default(f"churn-node-{tick}", tick)),
            Op(
                "create",
                _large_cpu(
                    f"churn-pod-{tick}",
                    BACKGROUND,
                    priority=HIGH_PRIORITY,
                    terminationGracePeriodSeconds=0,
                ),
            ),
        ]
        if tick > 0:
            ops += [
                _delete("Node", f"churn-node-{tick - 1}"),
                _delete("Pod", f"churn-pod-{tick - 1}"),
            ]
        if tick < len(init):
            ops.append(_delete("Pod", f"init-pod-{tick}"))
        return ops

    return Plan(
        "MixedChurn",
        _nodes(n),
        [pod(f"pod-{i}", MEASURED) for i in range(m)],
        setup=[priority_class(*HIGH_PRIORITY)],
        init=init,
        background=churn,
        min_ticks=3,
    )


def _preemption(n: int, m: int) -> Plan:
    if m and not n:
        raise ValueError("PreemptionBasic needs nodes to preempt on")
    per_node = max(1, math.ceil(m / n)) if n else 1
    cpu = "3000m" if per_node == 1 else f"{3600 // per_node}m"
    if per_node > 4:
        raise ValueError(f"PreemptionBasic: at most 4 measured pods per node (--pods {m})")
    low = [
        pod(f"low-priority-{i}", INIT, cpu="900m", terminationGracePeriodSeconds=0)
        for i in range(4 * n)
    ]
    high = [
        pod(
            f"high-priority-{i}",
            MEASURED,
            cpu=cpu,
            priority=HIGH_PRIORITY,
            terminationGracePeriodSeconds=0,
        )
        for i in range(m)
    ]
    return Plan(
        "PreemptionBasic", _nodes(n), high, setup=[priority_class(*HIGH_PRIORITY)], init=low
    )


def _gated(n: int, m: int) -> Plan:
    gated = [pod(f"gated-pod-{i}", GATED, schedulingGates=[{"name": GATE}]) for i in range(m)]
    measured = [pod(f"pod-{i}", MEASURED) for i in range(m)]
    return Plan("SchedulingWhileGated", _nodes(n), measured, gated=gated)


def gang_sizes(m: int) -> list[int]:
    """Member counts summing to ``m``: up to about 40% in large gangs (50-100 members, at
    most m/2 each, at least one), the rest in small gangs of 4-8 (the last may be smaller)."""
    sizes: list[int] = []
    large_budget = round(0.4 * m)
    i = 0
    while large_budget > 0:
        size = min(50 + (i * 23) % 51, max(1, m // 2))
        if sizes and size > large_budget:
            break
        sizes.append(size)
        large_budget -= size
        i += 1
    j = 0
    while (left := m - sum(sizes)) > 0:
        sizes.append(min(4 + j % 5, left))
        j += 1
    return sizes


def _gang(n: int, m: int) -> Plan:
    sizes = gang_sizes(m)
    gangs = {f"gang-{g}": size for g, size in enumerate(sizes)}
    members = [
        pod(f"{name}-{j}", MEASURED, labels={GANG_LABEL: name})
        for name, size in gangs.items()
        for j in range(size)
    ]
    setup = [pod_group(name, size) for name, size in gangs.items()]
    return Plan("Gang", _nodes(n), members, setup=setup, gangs=gangs)


#: Devices per node of the DRA workload (each node's ResourceSlice).
DEVICES_PER_NODE = 8


def _dra_claim_template(n: int, m: int) -> Plan:
    nodes = _nodes(n)
    setup = [
        device_class(),
        claim_template(),
        *(
            resource_slice(i, node["metadata"]["name"], DEVICES_PER_NODE)
            for i, node in enumerate(nodes)
        ),
    ]
    pods = [pod_with_claim(f"test-dra-{i}", MEASURED) for i in range(m)]
    return Plan("SchedulingWithResourceClaimTemplate", nodes, pods, setup=setup)


def _large_gang(n: int, m: int) -> Plan:
    members = [
        pod(f"large-gang-{j}", MEASURED, labels={GANG_LABEL: "large-gang"}) for j in range(m)
    ]
    return Plan(
        "LargeGang", _nodes(n), members, setup=[pod_group("large-gang", m)], gangs={"large-gang": m}
    )


@dataclass(frozen=True, slots=True)
class Workload:
    """A workload's plan builder, its default size and a one-line description."""

    build: Callable[[int, int], Plan]
    description: str
    default_nodes: int = 500
    default_pods: int = 1000


#: Name -> workload. Names follow scheduler_perf's test cases (defaults: its 500-node case).
WORKLOADS: dict[str, Workload] = {
    "SchedulingBasic": Workload(_basic, "pod-default pods (100m CPU, 500Mi)"),
    "NodeAffinity": Workload(_node_affinity, "pods require zone1 or zone2 (node affinity)"),
    "TopologySpreading": Workload(
        _spreading("TopologySpreading", "DoNotSchedule", "spreading-pod"),
        "pods spread over zones (maxSkew 5, DoNotSchedule)",
    ),
    "PreferredTopologySpreading": Workload(
        _spreading("PreferredTopologySpreading", "ScheduleAnyway", "preferred-spreading-pod"),
        "pods prefer spreading over zones (maxSkew 5, ScheduleAnyway)",
    ),
    "PodAntiAffinity": Workload(
        _anti_affinity, "required pod anti-affinity per hostname (one per node)", 500, 400
    ),
    "PodAffinity": Workload(_affinity, "required pod affinity per zone (all in one zone)"),
    "PodAntiAffinitySymmetric": Workload(
        _anti_affinity_symmetric,
        "placed pods' (anti-)affinity terms match incoming pods (10 groups)",
        1000,
        2000,
    ),
    "MixedAffinitySpread": Workload(
        _mixed_affinity_spread,
        "zone and host spreading with pod (anti-)affinity (10 groups)",
        1000,
        2000,
    ),
    "Unschedulable": Workload(
        _unschedulable, f"pod-default pods beside a trickle of {TRICKLE}/s 9-CPU pods"
    ),
    "MixedChurn": Workload(
        _mixed_churn, "init pods, then nodes and pods created and deleted every second"
    ),
    "PreemptionBasic": Workload(
        _preemption, "low-priority pods fill the nodes; every measured pod preempts", 500, 500
    ),
    "SchedulingWhileGated": Workload(_gated, "as many gated pods (stay pending) as measured"),
    "Gang": Workload(_gang, "PodGroups: many small (4-8), few large (50-100) gangs"),
    "LargeGang": Workload(
        _large_gang, "one PodGroup of all the pods (its minimum: every one)", 1000, 256
    ),
    "SchedulingWithResourceClaimTemplate": Workload(
        _dra_claim_template,
        f"one device per pod from a ResourceClaimTemplate, {DEVICES_PER_NODE} per node (DRA)",
        1000,
        2000,
    ),
}

#: Earlier names, kept working.
ALIASES = {
    "SchedulingNodeAffinity": "NodeAffinity",
    "SchedulingPodAntiAffinity": "PodAntiAffinity",
}

NAMES = (*WORKLOADS, *ALIASES)


def resolve(name: str) -> str:
    """The canonical name of a workload or alias; ValueError when unknown."""
    name = ALIASES.get(name, name)
    if name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r} (known: {', '.join(WORKLOADS)})")
    return name


def plan(name: str, nodes: int | None = None, pods: int | None = None) -> Plan:
    """The workload's plan; ``None`` sizes take its defaults. ValueError for an unknown
    name, a negative size, or a size the workload cannot place."""
    w = WORKLOADS[resolve(name)]
    n = w.default_nodes if nodes is None else nodes
    m = w.default_pods if pods is None else pods
    if n < 0 or m < 0:
        raise ValueError(f"node and pod counts must not be negative, got {n} and {m}")
    return w.build(n, m)


def check_fits(p: Plan) -> None:
    """ValueError when the plan's measured pods cannot all be bound (a benchmark would only
    wait for its idle timeout); ``simulate --workload`` shows such pods as unschedulable."""
    n, m = len(p.nodes), len(p.measured)
    if p.workload == "PodAntiAffinity" and m > n:
        raise ValueError(f"PodAntiAffinity places one pod per node: --pods {m} > --nodes {n}")
    if p.workload == "SchedulingWithResourceClaimTemplate" and m > DEVICES_PER_NODE * n:
        raise ValueError(
            f"{p.workload} gives each pod one of {DEVICES_PER_NODE} devices per node: "
            f"--pods {m} > {DEVICES_PER_NODE} x --nodes {n}"
        )
    if p.workload in ("PodAntiAffinitySymmetric", "MixedAffinitySpread"):
        per_group = math.ceil(m / AFFINITY_GROUPS)
        if per_group > n:
            raise ValueError(
                f"{p.workload} places one pod of each of its {AFFINITY_GROUPS} groups per "
                f"node: --pods {m} needs {per_group} nodes, got --nodes {n}"
            )


def generate(name: str, nodes: int | None = None, pods: int | None = None) -> list[dict[str, Any]]:
    """The plan's objects without the background, as plain (not yet defaulted) objects."""
    return plan(name, nodes, pods).objects()
