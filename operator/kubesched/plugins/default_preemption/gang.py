"""Gang-aware preemption: which lower-priority pods to evict so that a WHOLE gang fits
(kube-scheduler v1.37's PodGroup preemption, ``framework/preemption/podgrouppreemption.go``),
as pure functions of a snapshot, the gang's placement and the PodDisruptionBudgets.

The domain is the whole cluster, as kube's ``PodGroupEvaluator``:

1. Victim units (:func:`build_units`): a pod alone, or every pod on a node of a gang
   whose ``disruptionMode`` is ``All`` (one unit, evicted whole, spanning nodes). A unit's
   priority is its gang's (``GangSpec.priority``), else its pods' highest. Only units
   of lower priority than the preemptor's may go.
2. Every such unit is removed from a copy of the snapshot and the gang is placed on it
   (``place``: members one after another, each seeing the earlier ones). If the gang
   still does not fit, nothing is evicted and that status is the answer.
3. Units are reprieved one by one, most important first (:func:`unit_importance_key`:
   priority, a gang's pod before a pod alone, the bigger unit, the earlier start), the
   PDB-violating ones (:func:`filter_units_with_pdb_violation`) before the others: a
   unit goes back when every member still passes Filter on its node (earlier members
   on their nodes, nominated pods counted), through the PreFilter ``add_pod`` extensions
   of each member's cycle state.
4. kubesched's rule for ``disruptionMode: Single`` (kube evicts such members one by one
   whatever their gang's size): a member may go alone only while its gang keeps
   ``minMember`` pods on nodes; when the victims would take it below, the gang becomes
   one unit (all or none of its pods) and steps 1-3 run again (:func:`find_gang_victims`).

The result (:class:`GangPlan`) is the victims and a node for every member placed, which
the caller nominates so nothing else takes the freed room.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import Handle
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.plugins.default_preemption.ordering import (
    PdbInfo,
    filter_pods_with_pdb_violation,
    start_time,
    terminating_by_preemption,
)

__all__ = [
    "ERR_NEVER",
    "ERR_NO_VICTIMS",
    "MSG_ONGOING",
    "PREFIX",
    "Assignment",
    "GangPlan",
    "Unit",
    "VictimGang",
    "build_units",
    "copy_snapshot",
    "filter_units_with_pdb_violation",
    "find_gang_victims",
    "ongoing_preemption",
    "preemptor_eligible",
    "unit_importance_key",
]

PREFIX = "pod group preemption: "
"""kube's DefaultPreemption puts this before every PodGroupPostFilter message."""
ERR_NEVER = "not eligible due to preemptionPolicy=Never."
ERR_NO_VICTIMS = "No preemption victims found for incoming preemptor"
MSG_ONGOING = "ongoing preemption on nominated nodes"
ALL = "All"


@dataclass(frozen=True, slots=True)
class VictimGang:
    """What preemption needs to know of the gang a pod on a node belongs to."""

    key: str
    min_member: int
    disruption_mode: str
    """``All``: evicted whole; ``Single``: members alone while ``minMember`` stays."""
    priority: int | None = None
    """The gang's priority (upstream PodGroup ``spec.priority``); None: its pods'."""


GangOf = Callable[[Pod], VictimGang | None]


@dataclass(slots=True)
class Unit:
    """Pods evicted together (kube's ``Victim``)."""

    pods: list[Pod]
    priority: int
    group: str = ""
    """The gang key of its pods ("" for a pod in no gang)."""
    whole: bool = False
    """The whole gang (``All``, or a ``Single`` gang that would drop below minMember)."""

    def earliest_start(self) -> float:
        return min(start_time(p) for p in self.pods)


def unit_importance_key(u: Unit) -> tuple[int, int, int, float]:
    """Sort key, most important first (kube's ``MoreImportantVictim``): higher priority;
    a gang's pods (whole, or one member: kube types it a PodGroup victim too) before a
    pod in no gang; more pods; the earlier start."""
    return (-u.priority, -(2 if u.group else 1), -len(u.pods), u.earliest_start())


def build_units(
    node_infos: Sequence[NodeInfo], gang_of: GangOf, whole: frozenset[str] = frozenset()
) -> list[Unit]:
    """Every pod on ``node_infos`` in a unit, in node then pod order; the pods of a gang
    with ``disruptionMode: All`` (or named in ``whole``) in one unit per gang."""
    units: list[Unit] = []
    gangs: dict[str, Unit] = {}
    for ni in node_infos:
        for p in ni.pods:
            g = gang_of(p)
            if g is None:
                units.append(Unit([p], p.priority))
                continue
            prio = g.priority if g.priority is not None else p.priority
            if g.disruption_mode == ALL or g.key in whole:
                u = gangs.get(g.key)
                if u is None:
                    u = gangs[g.key] = Unit([], prio, g.key, whole=True)
                    units.append(u)
                u.pods.append(p)
                u.priority = max(u.priority, prio)
            else:
                units.append(Unit([p], prio, g.key))
    return units


def filter_units_with_pdb_violation(
    units: Sequence[Unit], pdbs: Sequence[PdbInfo]
) -> tuple[list[tuple[Unit, int]], list[Unit]]:
    """(violating units with their count of violating pods, the others), order kept. A
    unit violates when any of its pods would (kube: a victim is atomic); the budgets are
    charged pod by pod in unit order, as ``filter_pods_with_pdb_violation``."""
    pods = [p for u in units for p in u.pods]
    violating_uids = {p.uid for p in filter_pods_with_pdb_violation(pods, pdbs)[0]}
    violating: list[tuple[Unit, int]] = []
    others: list[Unit] = []
    for u in units:
        n = sum(1 for p in u.pods if p.uid in violating_uids)
        if n:
            violating.append((u, n))
        else:
            others.append(u)
    return violating, others


def preemptor_eligible(policy: str | None, members: Sequence[Pod]) -> tuple[bool, str]:
    """The gang's ``preemptionPolicy`` decides; without one, any member saying ``Never``
    (kube with PodGroupPreemptionPolicy off reads the pods)."""
    if policy == "Never" or (
        policy is None and any(m.preemption_policy == "Never" for m in members)
    ):
        return False, ERR_NEVER
    return True, ""


def ongoing_preemption(
    members: Sequence[Pod], snapshot: Snapshot, priority: int, gang_of: GangOf
) -> bool:
    """A member's nominated node still holds a lower-priority pod terminating because of
    preemption (kube's ``isOngoingPreemption``): wait for it, evict nothing more."""
    nodes = {m.nominated_node_name for m in members if m.nominated_node_name}
    for name in nodes:
        ni = snapshot.get(name)
        if ni is None:
            continue
        for p in ni.pods:
            g = gang_of(p)
            prio = g.priority if g is not None and g.priority is not None else p.priority
            if prio < priority and terminating_by_preemption(p):
                return True
    return False


@dataclass(slots=True)
class Assignment:
    """A member the gang's placement put on a node, with the cycle state its PreFilter
    wrote (members placed before it on their nodes)."""

    pod: Pod
    node: str
    state: CycleState


Place = Callable[[Snapshot], list[Assignment] | Status]
"""Places the gang's members needed on the snapshot given (one after another, each
seeing the earlier ones), leaves the snapshot as it found it, and returns where each
went -- or the status saying why the gang does not fit."""


@dataclass(slots=True)
class GangPlan:
    units: list[Unit]
    """The victims, most important unit first."""
    assignments: list[Assignment]
    num_pdb_violations: int
    whole: frozenset[str] = field(default_factory=frozenset)
    """``Single`` gangs evicted whole to keep them from dropping below minMember."""

    @property
    def victims(self) -> list[Pod]:
        return [p for u in self.units for p in u.pods]

    @property
    def nominations(self) -> dict[str, str]:
        """Member uid -> the node it is nominated to."""
        return {a.pod.uid: a.node for a in self.assignments}

    @property
    def num_group_disruptions(self) -> int:
        return sum(1 for u in self.units if u.group)

    def message(self) -> str:
        return f"found a placement for podgroup, preempting {len(self.victims)} victims"


class _ExtensionError(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


def copy_snapshot(snapshot: Snapshot) -> Snapshot:
    """A snapshot whose nodes can lose and gain pods without touching ``snapshot``."""
    return Snapshot([ni.clone() for ni in snapshot.node_infos])


def find_gang_victims(
    handle: Handle,
    snapshot: Snapshot,
    *,
    priority: int,
    place: Place,
    gang_of: GangOf,
    pdbs: Sequence[PdbInfo] = (),
    own: str = "",
    use: Callable[[Snapshot], AbstractContextManager[object]] = lambda s: nullcontext(),
) -> GangPlan | Status:
    """The fewest (most-important-kept) lower-priority units whose eviction lets the gang
    fit, or the status saying why none does (nothing is to be evicted then).

    ``own`` is the preempting gang's key: its members already placed are never victims.
    ``snapshot`` is not changed: each round works on a copy, inside ``use(copy)`` (the
    caller points its plugins' ``handle.snapshot`` at it)."""
    whole: frozenset[str] = frozenset()
    while True:
        work = copy_snapshot(snapshot)
        with use(work):
            try:
                result = _round(handle, work, priority, place, gang_of, pdbs, whole, own)
            except _ExtensionError as e:
                return Status.as_error(e.status.message())
        if isinstance(result, Status):
            return result
        below = _below_minimum(snapshot, result.units, gang_of) - whole
        if not below:
            result.whole = whole
            return result
        whole = whole | below


def _round(
    handle: Handle,
    work: Snapshot,
    priority: int,
    place: Place,
    gang_of: GangOf,
    pdbs: Sequence[PdbInfo],
    whole: frozenset[str],
    own: str,
) -> GangPlan | Status:
    units = build_units(work.node_infos, gang_of, whole)
    potential = [u for u in units if u.priority < priority and not (own and u.group == own)]
    if not potential:
        return Status.unresolvable(ERR_NO_VICTIMS)
    for u in potential:
        for p in u.pods:
            _remove(work, p)
    assigned = place(work)
    if isinstance(assigned, Status):
        return assigned
    potential.sort(key=unit_importance_key)
    violating, others = filter_units_with_pdb_violation(potential, pdbs)
    victims: list[Unit] = []
    num_violations = 0
    for u, n in violating:
        if not _reprieve(handle, work, u, assigned):
            victims.append(u)
            num_violations += n
    for u in others:
        if not _reprieve(handle, work, u, assigned):
            victims.append(u)
    victims.sort(key=unit_importance_key)
    return GangPlan(victims, assigned, num_violations)


def _reprieve(handle: Handle, work: Snapshot, u: Unit, assigned: Sequence[Assignment]) -> bool:
    """Put ``u`` back; keep it there if every member still fits its node."""
    for p in u.pods:
        back = _add(work, p, p.node_name)
        for a in assigned:
            _check(handle.run_pre_filter_extension_add_pod(a.state, a.pod, p, back))
    with _MembersOnNodes(work) as add_member:
        fits = True
        for a in assigned:
            ni = work.get(a.node)
            if ni is None:
                fits = False
                break
            s = handle.run_filter_plugins_with_nominated_pods(a.state, a.pod, ni)
            if s is not None and s.code != Code.SUCCESS:
                fits = False
                break
            add_member(a.pod.assigned_to(a.node))
    if fits:
        return True
    for p in u.pods:
        gone = _remove(work, p)
        if gone is not None:
            for a in assigned:
                _check(handle.run_pre_filter_extension_remove_pod(a.state, a.pod, p, gone))
    return False


class _MembersOnNodes:
    """Members added while checking a reprieve, removed again (last first) on exit."""

    def __init__(self, work: Snapshot) -> None:
        self.work = work
        self.added: list[Pod] = []

    def __enter__(self) -> Callable[[Pod], None]:
        def add(p: Pod) -> None:
            _add(self.work, p, p.node_name)
            self.added.append(p)

        return add

    def __exit__(self, *exc: object) -> None:
        for p in reversed(self.added):
            _remove(self.work, p)


def _check(s: Status | None) -> None:
    if s is not None and s.code != Code.SUCCESS:
        raise _ExtensionError(s)


def _add(work: Snapshot, p: Pod, node: str) -> NodeInfo:
    ni = work.get(node)
    assert ni is not None, f"pod {p.key} is on node {node}, which the snapshot lacks"
    ni.add_pod(p)
    work.refresh_row(ni)
    work.generation += 1
    return ni


def _remove(work: Snapshot, p: Pod) -> NodeInfo | None:
    ni = work.get(p.node_name)
    if ni is None or not ni.remove_pod(p):
        return None
    work.refresh_row(ni)
    work.generation += 1
    return ni


def _below_minimum(snapshot: Snapshot, victims: Sequence[Unit], gang_of: GangOf) -> set[str]:
    """``Single`` gangs the victims would leave below ``minMember`` pods on nodes (of
    ``snapshot``, before any eviction)."""
    evicted = Counter(u.group for u in victims if u.group and not u.whole)
    if not evicted:
        return set()
    on_nodes: Counter[str] = Counter()
    mins: dict[str, int] = {}
    for p in _pods(snapshot):
        g = gang_of(p)
        if g is not None and g.key in evicted:
            on_nodes[g.key] += 1
            mins[g.key] = g.min_member
    return {k for k, n in evicted.items() if on_nodes[k] - n < mins.get(k, 0)}


def _pods(snapshot: Snapshot) -> Iterator[Pod]:
    for ni in snapshot.node_infos:
        yield from ni.pods
