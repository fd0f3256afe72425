"""The whole-group scheduling cycle: a gang below its minimum is placed as one unit.

When a member of a gang (Coscheduling's :meth:`group_view`) reaches the head of the
queue, every other pending member is taken out of the queue (activeQ, backoffQ, the
unschedulable pool) and the members are placed one after another against one snapshot,
each through the profile's full PreFilter/Filter/PreScore/Score
(:meth:`Algorithm.schedule_pod`), assumed in the cache and reserved before the next one
is tried, so spread, anti-affinity and bin-packing among members are honoured. Either
the gang's minimum (counting members already bound or assumed) gets nodes -- all are
reserved, Permit allows them at once and their binding cycles start; spare members that
fit are placed too, those that do not fail alone -- or nothing is kept: every assume and
reservation is reverted (last first) and every member fails with the gang's reason
(``PodScheduled=False``, ``Unschedulable``), e.g. ``pod group "ns/job": 3/8 members fit;
5 pods: 0/10 nodes are available: 5 Insufficient cpu.``. As kube-scheduler 1.37's
``PlacementFeasible``, members stop being tried once the minimum is out of reach.

Failed members go back to the queue together (the same attempt count, so the same
doubling backoff) behind the pods queued since (Coscheduling's QueueSort), and pods
behind them are not blocked: no member holds a node while waiting for its siblings.

Topology (:mod:`.gang_topology`): with ``topology[0].key`` the whole gang is tried in
each domain (the label's value) and the best domain that holds it is kept, as
kube-scheduler 1.37's ``findBestPlacement`` picks it.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kubesched.api.gang_apis import GangAPI
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.nodeinfo import QueuedPodInfo
from kubesched.framework.runtime import Framework
from kubesched.framework.signature import PodSigner, signing_plugins
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from kubesched.plugins.coscheduling import plugin as cosched
from kubesched.plugins.coscheduling.consistency import group_mismatch
from kubesched.scheduler.algorithm import FitError, StatusError
from kubesched.scheduler.batch import OpportunisticBatch
from kubesched.scheduler.binding_cycle import PodOutcome
from kubesched.scheduler.signers import plugin_signer

if TYPE_CHECKING:
    from kubesched.scheduler.scheduler import Scheduler

__all__ = ["GangCycle", "Member", "Trial"]


@dataclass(slots=True)
class Member:
    qpi: QueuedPodInfo
    state: CycleState | None = None
    assumed: Pod | None = None
    error: str = ""
    """Why this member found no node (its own FitError or Reserve message)."""
    plugins: set[str] = field(default_factory=set)
    pending: set[str] = field(default_factory=set)
    nominated: str = ""
    """The node this member was nominated to before its assume dropped the nomination;
    given back if the assume is undone (kube's unreserveAndForget in a pod group cycle)."""

    @property
    def pod(self) -> Pod:
        return self.qpi.pod


@dataclass(slots=True)
class Trial:
    """One try of the gang: on all nodes, or in one topology domain."""

    domain: str
    """The domain (the label's value); "" for the whole cluster."""
    nodes: frozenset[str] | None
    placed: list[Member] = field(default_factory=list)
    failed: list[Member] = field(default_factory=list)
    untried: int = 0
    error: Status | None = None
    score: int | None = None
    message: str = ""

    def ok(self, need: int) -> bool:
        return self.error is None and len(self.placed) >= need


class GangCycle:
    """Runs whole-group cycles for a :class:`Scheduler` (one per scheduler)."""

    def __init__(self, sched: Scheduler) -> None:
        self.sched = sched
        self.last: dict[str, dict[str, Any]] = {}
        """Gang key -> the last attempt (:meth:`~.gang_topology.Attempt.to_dict`), for
        explain: what was tried, not the members' cycle states, which an Attempt holds
        (3000 of them kept for good in a 3000-member Gang run)."""
        self._signers: dict[int, tuple[object, PodSigner]] = {}

    def schedule(self, profile_name: str, qpi: QueuedPodInfo) -> bool:
        """Schedule ``qpi``'s gang as a unit if it is a member of a gang below its
        minimum; False: not a gang member (or a spare one): schedule it alone."""
        sched = self.sched
        prof = sched.profiles.get(profile_name)
        queue = sched.queues.queue(profile_name)
        if prof is None or queue is None:
            return False
        fwk = prof.framework
        cos = _coscheduling(fwk)
        pod = qpi.pod
        if cos is None or pod.deletion_timestamp or sched.cache.is_assumed(pod.uid):
            return False
        sched.cache.update_snapshot()
        view = cos.group_view(pod)
        if view is None:
            return False
        start = time.perf_counter()
        cycle = queue.scheduling_cycle()
        members = [Member(qpi)]
        for other in view.others:
            taken = queue.take(other.uid)
            if taken is not None:
                members.append(Member(taken))
        # kube's PodGroupMemberPodsOrderingFunc: higher priority, then more attempts,
        # then longer queued, then the name
        members.sort(key=lambda m: (-m.pod.priority, -m.qpi.attempts, m.qpi.timestamp, m.pod.name))
        for m in members:
            sched._attempt_start[m.pod.uid] = start
        if sched.stats.first_cycle is None:
            sched.stats.first_cycle = start
        try:
            self._run(fwk, cos, view, members, cycle, start)
        finally:
            for m in members:
                queue.done(m.pod.uid)
        return True

    # -- the cycle -----------------------------------------------------------------------
    def _run(
        self,
        fwk: Framework,
        cos: Any,
        view: cosched.GroupView,
        members: list[Member],
        cycle: int,
        start: float,
    ) -> None:
        from kubesched.scheduler import gang_preemption, gang_topology

        sched = self.sched
        need = view.spec.min_member - len(view.placed)
        key = view.key
        metrics = sched.metrics
        if len(members) < need:
            exist = len(members) + len(view.placed)
            msg = cosched.members_message(key, exist, view.spec.min_member)
            self._fail_all(fwk, cos, key, members, msg, cycle)
            metrics.group_attempt("unschedulable", fwk.profile_name, time.perf_counter() - start)
            return
        if view.spec.api is GangAPI.UPSTREAM:
            mismatch = self._mismatch(view, members)
            if mismatch:
                # kube-scheduler's validatePodGroup: none of the group is tried.
                invalid = Status.as_error(mismatch)
                self._fail_all(
                    fwk, cos, key, members, "", cycle, error=invalid, clear_nominated=True
                )
                metrics.group_attempt("error", fwk.profile_name, time.perf_counter() - start)
                return
        attempt = gang_topology.place(self, fwk, view, members, need)
        self.last[key] = attempt.to_dict()
        metrics.group_algorithm(time.perf_counter() - start)
        trial = attempt.chosen
        if trial is None or not trial.ok(need):
            for t in [trial] if trial is not None else []:
                self.revert(fwk, t)
            error = next((t.error for t in attempt.trials if t.error is not None), None)
            if error is not None:
                self._fail_all(fwk, cos, key, members, "", cycle, error=error)
                result = "error"
            else:
                # Gang-aware preemption (gang_preemption.py): may evict lower-priority
                # pods for the whole gang and nominate its members; says so in the reason.
                msg, waiting = gang_preemption.post_filter(
                    sched, fwk, view, members, need, attempt.message
                )
                # kube's submitPodGroupAlgorithmResult: a group rejected without a
                # preemption to wait on clears the nominations of the members that found
                # a node; a member that found none keeps its own.
                fitted = () if waiting or trial is None else trial.placed
                self._fail_all(fwk, cos, key, members, msg, cycle, clear={id(m) for m in fitted})
                result = "unschedulable"
            metrics.group_attempt(result, fwk.profile_name, time.perf_counter() - start)
            return
        cos.group_scheduled(key)
        self._commit(fwk, trial, cycle)
        for m in [*trial.failed, *_untried(members, trial)]:
            # Spare members that found no node: they fail alone, the gang is placed.
            self._fail_one(fwk, m, m.error or "the pod group's minimum was placed first", cycle)
        metrics.group_attempt("scheduled", fwk.profile_name, time.perf_counter() - start)

    def _mismatch(self, view: cosched.GroupView, members: list[Member]) -> str:
        """Why a Kubernetes PodGroup's pods cannot be scheduled together ("" if they can):
        :mod:`kubesched.plugins.coscheduling.consistency`. Queued members in the order
        they arrived (kube's: the first is the reference), then those on nodes."""
        get = self.sched.cache.get_pod
        placed = sorted(
            (p for uid in view.placed if (p := get(uid)) is not None), key=lambda p: p.name
        )
        queued = [m.pod for m in sorted(members, key=lambda m: m.qpi.seq)]
        return group_mismatch(view.spec.priority, queued, placed)

    def try_members(
        self,
        fwk: Framework,
        members: list[Member],
        need: int,
        trial: Trial,
        domains: list[frozenset[str]] | None = None,
    ) -> Trial:
        """Place ``members`` in order (assumed and reserved; the caller commits or
        reverts), restricted to ``trial.nodes``; with ``domains``, each member tries
        them in order until one fits (a preferred topology's fallback). Stops once the
        minimum is out of reach."""
        sched = self.sched
        cache = sched.cache
        algorithm = sched.algorithm
        choices: list[frozenset[str] | None] = list(domains) if domains else [trial.nodes]
        batch = self._batch(fwk)
        tries = 0
        for i, m in enumerate(members):
            if len(trial.placed) + len(members) - i < need:
                trial.untried = len(members) - i
                break
            m.error, m.plugins, m.pending = "", set(), set()
            for nodes in choices:
                state = CycleState()
                state.write(cosched.GROUP_CYCLE_KEY, cosched.GroupMark(nodes))
                snap = cache.update_snapshot()
                if batch is not None:
                    tries += 1
                    batch.begin(fwk, m.pod, tries)
                    batch.signature = self._sign(fwk, m.pod)
                try:
                    result = algorithm.schedule_pod(fwk, state, m.pod, snap, batch)
                except FitError as e:
                    if batch is not None:
                        batch.finish(False)
                    if not m.error:
                        m.error = str(e)
                    m.plugins |= e.diagnosis.unschedulable_plugins
                    m.pending |= e.diagnosis.pending_plugins
                    continue
                except StatusError as e:
                    if batch is not None:
                        batch.finish(False)
                    trial.error = e.status
                    return trial
                assumed = m.pod.assigned_to(result.node_name)
                cache.assume_pod(assumed)
                # kube's assume: a placed pod no longer counts as nominated (its siblings
                # nominated by gang preemption would otherwise count twice on a node).
                m.nominated = sched.nominator.nominated_node(m.pod.uid)
                sched.nominator.delete(m.pod)
                s = fwk.run_reserve(state, assumed, result.node_name)
                if batch is not None:
                    batch.finish(s is None)
                if s is not None:
                    fwk.run_unreserve(state, assumed, result.node_name)
                    self._forget(m, assumed)
                    if s.code == Code.ERROR:
                        trial.error = s
                        return trial
                    m.error = m.error or s.message()
                    if s.plugin:
                        m.plugins.add(s.plugin)
                    continue
                m.state, m.assumed, m.error = state, assumed, ""
                trial.placed.append(m)
                break
            else:
                trial.failed.append(m)
        return trial

    def _batch(self, fwk: Framework) -> OpportunisticBatch | None:
        """A batch for one trial's members (opportunistic batching's reuse: a member
        with the same signature as the one placed before it is filtered and scored
        again only on the nodes that changed), None when batching is off."""
        sched = self.sched
        if not sched.opportunistic_batching:
            return None
        return OpportunisticBatch(fwk.profile_name, sched._batch_metrics)

    def _sign(self, fwk: Framework, pod: Pod) -> bytes | None:
        """The member's signature without Coscheduling's part: in a group cycle its
        PreFilter and Permit pass every member alike (outside one it refuses to sign
        gang members, which are then never batched)."""
        chain = fwk.chain
        cached = self._signers.get(id(fwk))
        if cached is None or cached[0] is not chain:
            plugins = [p for p in signing_plugins(chain) if p.name != cosched.NAME]
            cached = self._signers[id(fwk)] = (chain, PodSigner(plugins, plugin_signer))
        return cached[1].sign(pod)

    def revert(self, fwk: Framework, trial: Trial) -> None:
        """Undo a trial's assumes and reservations, last first."""
        for m in reversed(trial.placed):
            if m.assumed is not None and m.state is not None:
                fwk.run_unreserve(m.state, m.assumed, m.assumed.node_name)
                self._forget(m, m.assumed)
            m.assumed, m.state = None, None
        self.sched.cache.update_snapshot()

    def _forget(self, m: Member, assumed: Pod) -> None:
        """Undo a member's assume: out of the cache, and its nomination back (kube's
        unreserveAndForget in a pod group cycle; a pod alone keeps it dropped)."""
        self.sched.cache.forget_pod(assumed)
        if m.nominated:
            self.sched.nominator.add(m.pod, m.nominated)
            m.nominated = ""

    def _commit(self, fwk: Framework, trial: Trial, cycle: int) -> None:
        """The gang holds its minimum: Permit each member and start its binding."""
        sched = self.sched
        for m in trial.placed:
            state, assumed = m.state, m.assumed
            if state is None or assumed is None:
                continue
            node = assumed.node_name
            s = fwk.run_permit(state, assumed, node)
            if s is not None and not s.is_wait():
                # Another Permit plugin said no (Coscheduling allows a group member).
                fwk.run_unreserve(state, assumed, node)
                self._forget(m, assumed)
                sched._fail(fwk, m.qpi, s, cycle, nominated_node=None)
                continue
            if s is not None:
                sched.stats.outcomes[m.pod.uid] = sched_outcome(node, s.message(), m.qpi.attempts)
            sched._spawn(sched._binding_cycle(fwk, state, m.qpi, assumed, cycle))

    def _fail_one(self, fwk: Framework, m: Member, msg: str, cycle: int) -> None:
        m.qpi.unschedulable_plugins = set(m.plugins) | {cosched.NAME}
        m.qpi.pending_plugins = set(m.pending)
        self.sched._fail(
            fwk, m.qpi, Status.unschedulable(msg, plugin=cosched.NAME), cycle, nominated_node=None
        )

    def _fail_all(
        self,
        fwk: Framework,
        cos: Any,
        key: str,
        members: list[Member],
        msg: str,
        cycle: int,
        *,
        error: Status | None = None,
        clear_nominated: bool = False,
        clear: Collection[int] = (),
    ) -> None:
        """Every member fails with the gang's reason (or the error), together;
        ``clear_nominated``: their nominated nodes are cleared too; ``clear``: those of
        these members (by ``id``), the others' are left as they are."""
        if error is None:
            cos.group_failed(key, msg)
        else:
            cos.group_failed(key, error.message(), error=True)
        plugins: set[str] = {cosched.NAME}
        pending: set[str] = set()
        for m in members:
            plugins |= m.plugins
            pending |= m.pending
        for m in members:
            m.qpi.group_size = len(members)  # backs off as one entity of this many
            if error is not None:
                self.sched._fail(
                    fwk, m.qpi, error, cycle, nominated_node="" if clear_nominated else None
                )
                continue
            m.qpi.unschedulable_plugins = set(plugins)
            m.qpi.pending_plugins = set(pending)
            self.sched._fail(
                fwk,
                m.qpi,
                Status.unschedulable(msg, plugin=cosched.NAME),
                cycle,
                nominated_node="" if id(m) in clear else None,
            )


def _untried(members: list[Member], trial: Trial) -> list[Member]:
    done = {id(m) for m in trial.placed} | {id(m) for m in trial.failed}
    return [m for m in members if id(m) not in done]


def sched_outcome(node: str, message: str, attempts: int) -> PodOutcome:
    return PodOutcome(node, "Waiting", message, attempts)


def _coscheduling(fwk: Framework) -> Any:
    """The profile's Coscheduling plugin (None: this profile has no gangs)."""
    for p in fwk.chain.pre_filter:
        if p.name == cosched.NAME and hasattr(p, "group_view"):
            return p
    return None
