"""Gang-aware preemption for the whole-group cycle (kube-scheduler 1.37's PodGroupPostFilter).

When a group cycle (:mod:`.gang_cycle`) finds no placement for a gang below its minimum,
:func:`post_filter` looks for lower-priority pods whose eviction lets the WHOLE gang in
(:func:`kubesched.plugins.default_preemption.gang.find_gang_victims`): each round copies
the snapshot, removes the candidate victims and re-runs the gang's placement on the copy
exactly as the cycle does (:func:`.gang_topology.place`, members one after another
through the profile's Filter and Score, topology domains included, no Reserve), with the
plugins' ``handle.snapshot`` pointed at the copy. Only the members the gang still needs
(``minMember`` minus those bound or assumed) are placed, and victims evicted for them.

With a plan, every victim is evicted (``DisruptionTarget``/``PreemptionByScheduler``, a
``Preempted`` event "Preempted by podgroup <uid> on node cluster", as kube words it),
every member placed is nominated to its node (in memory at once, ``status.nominatedNodeName``
through the API) so nothing else takes the freed room, and the members fail this cycle
with the gang's reason followed by kube's ``pod group preemption: found a placement for
podgroup, preempting <n> victims``. The victims' deletions requeue the members
(NodeResourcesFit's hint), and the next group cycle places them, nominated nodes first.
While a member's nominated node still holds a victim terminating by preemption, nothing
more is evicted (``pod group preemption: ongoing preemption on nominated nodes``).

Preemption needs DefaultPreemption in the profile's PostFilter, as for single pods.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from kubesched.api.gangs import STORE_KINDS, GangSpec
from kubesched.framework.cluster_port import NotFound, PodCondition
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.runtime import Framework
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.plugins import default_preemption as dp
from kubesched.plugins.coscheduling import plugin as cosched
from kubesched.plugins.coscheduling.gangs import GangKeys
from kubesched.plugins.default_preemption import gang as gp
from kubesched.scheduler.algorithm import FitError, StatusError

if TYPE_CHECKING:
    from kubesched.scheduler.gang_cycle import Member, Trial
    from kubesched.scheduler.scheduler import Scheduler

__all__ = ["post_filter", "preemptor_priority"]

log = logging.getLogger("kubesched.scheduler.gang_preemption")

_KEYS: weakref.WeakKeyDictionary[Framework, GangKeys] = weakref.WeakKeyDictionary()
_EVICTING: weakref.WeakKeyDictionary[Scheduler, set[str]] = weakref.WeakKeyDictionary()
"""Gangs whose victims are being evicted: a retry meanwhile evicts nothing more (the
victims are not yet seen terminating), as kube's preemptor waits for its preparation."""


def preemptor_priority(spec: GangSpec, members: Sequence[Pod]) -> int:
    """The gang's priority (``spec.priority``), else its lowest member's: a gang never
    evicts a pod that one of its own members could not."""
    if spec.priority is not None:
        return spec.priority
    return min((m.priority for m in members), default=0)


def gang_of(fwk: Framework) -> gp.GangOf:
    """Pod -> the gang it belongs to, for victim selection (any of the three APIs)."""
    keys = _KEYS.get(fwk)
    if keys is None:
        keys = _KEYS[fwk] = GangKeys(lambda: fwk.store)

    def find(p: Pod) -> gp.VictimGang | None:
        key = keys.key(p)
        spec = None if key is None else keys.spec(key)
        if not isinstance(spec, GangSpec):
            return None
        return gp.VictimGang(spec.key, spec.min_member, spec.disruption_mode, spec.priority)

    return find


def post_filter(
    sched: Scheduler,
    fwk: Framework,
    view: cosched.GroupView,
    members: Sequence[Member],
    need: int,
    message: str,
) -> tuple[str, bool]:
    """Try to make room for the gang; returns the members' failure message (``message``,
    then the preemption outcome as kube appends it) and whether the gang now waits on a
    preemption (a new one, or one still evicting: its members keep their nominations).
    Evictions run asynchronously."""
    if not any(p.name == dp.NAME for p in fwk.chain.post_filter):
        return message, False
    sched.metrics.preemption_attempts.inc()
    spec = view.spec
    pods = [m.pod for m in members]
    ok, why = gp.preemptor_eligible(spec.preemption_policy, pods)
    if not ok:
        return _join(message, why), False
    priority = preemptor_priority(spec, pods)
    find = gang_of(fwk)
    snap = sched.cache.update_snapshot()
    evicting = _EVICTING.setdefault(sched, set())
    if view.key in evicting or gp.ongoing_preemption(pods, snap, priority, find):
        for p in pods:
            if p.nominated_node_name:
                sched.nominator.add(p, p.nominated_node_name)
        return _join(message, gp.MSG_ONGOING), True
    pdbs = [dp.PdbInfo.from_dict(d) for d in _pdbs(fwk)]

    def place(work: Snapshot) -> list[gp.Assignment] | Status:
        return _place(sched, fwk, view, members, need, work)

    # The dry run places the members themselves: their earlier nominations must not
    # count as well (kube's assume drops a pod's nomination). Restored if no plan.
    nominated = {p.uid: sched.nominator.nominated_node(p.uid) for p in pods}
    for p in pods:
        sched.nominator.delete(p)
    out: gp.GangPlan | Status = Status.as_error("gang preemption did not finish")
    try:
        out = gp.find_gang_victims(
            fwk,
            snap,
            priority=priority,
            place=place,
            gang_of=find,
            pdbs=pdbs,
            own=view.key,
            use=lambda work: _pointed_at(fwk, work),
        )
    finally:
        if isinstance(out, Status):
            for p in pods:
                if nominated[p.uid]:
                    sched.nominator.add(p, nominated[p.uid])
    if isinstance(out, Status):
        if out.code == Code.ERROR:
            log.warning("gang preemption for %s failed: %s", view.key, out.message())
        return _join(message, out.message()), False
    log.info(
        "pod group %s preempts %d victims (%s); members nominated: %s",
        view.key,
        len(out.victims),
        ", ".join(v.key for v in out.victims),
        ", ".join(f"{a.pod.key}->{a.node}" for a in out.assignments),
    )
    for a in out.assignments:
        sched.nominator.add(a.pod, a.node)
        sched._spawn(_nominate(sched, a.pod, a.node))
    evicting.add(view.key)
    sched.metrics.workload_preemption_victims.observe(len(out.victims))
    sched._spawn(_evict(sched, fwk, spec, pods, out.victims, evicting))
    return _join(message, out.message()), True


def _join(message: str, outcome: str) -> str:
    """kube appends the PodGroupPostFilter status as one more reason (", ")."""
    text = gp.PREFIX + outcome
    return f"{message}, {text}" if message else text


def _pdbs(fwk: Framework) -> list[Any]:
    try:
        return list(fwk.store.list("PodDisruptionBudget"))
    except RuntimeError:  # no object store (a framework used alone)
        return []


@contextmanager
def _pointed_at(fwk: Framework, work: Snapshot) -> Iterator[None]:
    """Plugins reading ``handle.snapshot`` see the round's copy (the cycle is synchronous:
    nothing else reads it meanwhile)."""
    services = fwk.services
    saved = services.snapshot
    services.snapshot = lambda: work
    try:
        yield
    finally:
        services.snapshot = saved


# -- the gang's placement on a copy ---------------------------------------------------------------
def _place(
    sched: Scheduler,
    fwk: Framework,
    view: cosched.GroupView,
    members: Sequence[Member],
    need: int,
    work: Snapshot,
) -> list[gp.Assignment] | Status:
    from kubesched.scheduler import gang_topology
    from kubesched.scheduler.gang_cycle import Member

    dry = _DryRun(sched, work)
    copies = [Member(m.qpi) for m in members]
    attempt = gang_topology.place(dry, fwk, view, copies, need)  # type: ignore[arg-type]
    chosen = attempt.chosen
    if chosen is None or not chosen.ok(need):
        if chosen is not None:
            dry.revert(fwk, chosen)
        if chosen is not None and chosen.error is not None:
            return chosen.error
        return Status.unschedulable(attempt.message)
    out = [
        gp.Assignment(m.pod, m.assumed.node_name, m.state)
        for m in chosen.placed
        if m.assumed is not None and m.state is not None
    ]
    dry.revert(fwk, chosen)
    return out


class _DryRun:
    """What :func:`.gang_topology.place` uses of a :class:`~.gang_cycle.GangCycle`, on a
    snapshot copy: members are added to the copy's nodes (no cache, no Reserve), and only
    the members the gang needs are placed."""

    def __init__(self, sched: Scheduler, work: Snapshot) -> None:
        self.work = work
        self.algorithm = sched.algorithm
        self.sched = _DrySched(sched, work)

    def try_members(
        self,
        fwk: Framework,
        members: list[Member],
        need: int,
        trial: Trial,
        domains: list[frozenset[str]] | None = None,
    ) -> Trial:
        choices: list[frozenset[str] | None] = list(domains) if domains else [trial.nodes]
        for i, m in enumerate(members):
            if len(trial.placed) >= need:
                break
            if len(trial.placed) + len(members) - i < need:
                trial.untried = len(members) - i
                break
            m.error = ""
            for nodes in choices:
                state = CycleState()
                state.write(cosched.GROUP_CYCLE_KEY, cosched.GroupMark(nodes))
                try:
                    result = self.algorithm.schedule_pod(fwk, state, m.pod, self.work)
                except FitError as e:
                    m.error = m.error or str(e)
                    continue
                except StatusError as e:
                    trial.error = e.status
                    return trial
                assumed = m.pod.assigned_to(result.node_name)
                ni = self.work.get(result.node_name)
                assert ni is not None
                ni.add_pod(assumed)
                self.work.refresh_row(ni)
                self.work.generation += 1
                m.state, m.assumed = state, assumed
                trial.placed.append(m)
                break
            else:
                trial.failed.append(m)
        return trial

    def revert(self, fwk: Framework, trial: Trial) -> None:
        for m in reversed(trial.placed):
            if m.assumed is not None:
                ni = self.work.get(m.assumed.node_name)
                if ni is not None and ni.remove_pod(m.assumed):
                    self.work.refresh_row(ni)
                    self.work.generation += 1
            m.assumed = None


class _DrySched:
    """The parts of the scheduler :func:`.gang_topology.place` reads, over the copy."""

    def __init__(self, sched: Scheduler, work: Snapshot) -> None:
        self.algorithm = sched.algorithm
        self.metrics = _NoMetrics()
        self.cache = _DryCache(sched, work)


class _DryCache:
    def __init__(self, sched: Scheduler, work: Snapshot) -> None:
        self._cache = sched.cache
        self._work = work

    def update_snapshot(self) -> Snapshot:
        return self._work

    def get_pod(self, uid: str) -> Pod | None:
        return self._cache.get_pod(uid)

    def node_info(self, name: str) -> Any:
        return self._work.get(name)


class _NoMetrics:
    """A dry run is no placement attempt: nothing is counted."""

    def placements_generated(self, *args: Any) -> None:
        return None

    def placement_evaluation(self, *args: Any) -> None:
        return None


# -- actuation ------------------------------------------------------------------------------------
async def _nominate(sched: Scheduler, pod: Pod, node: str) -> None:
    try:
        await sched.cluster.patch_pod_status(pod, nominated_node_name=node)
    except NotFound:
        pass
    except Exception:
        log.exception("cannot nominate %s to %s", pod.key, node)


async def _evict(
    sched: Scheduler,
    fwk: Framework,
    spec: GangSpec,
    members: Sequence[Pod],
    victims: list[Pod],
    evicting: set[str],
) -> None:
    """kube's pod group preemption executor: victims waiting at Permit are preempted in
    memory (an error in their binding cycle), the others get ``DisruptionTarget`` and are deleted; each a ``Preempted``
    event naming the PodGroup's uid."""
    try:
        await _evict_all(sched, fwk, spec, members, victims)
    finally:
        evicting.discard(spec.key)


async def _evict_all(
    sched: Scheduler, fwk: Framework, spec: GangSpec, members: Sequence[Pod], victims: list[Pod]
) -> None:
    obj = fwk.store.get(STORE_KINDS[spec.api], spec.namespace, spec.name)
    uid = str(((obj or {}).get("metadata") or {}).get("uid") or spec.key)
    scheduler_name = members[0].scheduler_name if members else fwk.profile_name
    related = members[0] if members else None
    for victim in victims:
        if victim.deletion_timestamp:
            continue  # its graceful deletion has begun: no second call
        message = f"Preempted by podgroup {uid} on node cluster"
        try:
            if await dp.stop_in_memory(fwk, victim, dp.NAME):
                message += dp.IN_MEMORY
            else:
                cond = PodCondition(
                    dp.DISRUPTION_TARGET,
                    "True",
                    dp.PREEMPTION_BY_SCHEDULER,
                    f"{scheduler_name}: preempting to accommodate a higher priority podgroup",
                )
                await sched.cluster.delete_pod(victim, condition=cond)
            await sched.cluster.record_event(
                victim,
                event_type="Normal",
                reason="Preempted",
                action="Preempting",
                message=message,
                reporting_controller=fwk.profile_name,
                related=related,
            )
        except NotFound:
            continue  # already gone
        except Exception:
            log.exception("preempting %s for pod group %s failed", victim.key, spec.key)
