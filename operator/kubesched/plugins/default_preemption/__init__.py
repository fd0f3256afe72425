"""DefaultPreemption: when no node fits a pod, evict lower-priority pods from the node
where that costs least, and nominate the pod to that node (kube-scheduler's PostFilter).

What it does, as kube-scheduler v1.37 (``defaultpreemption`` + ``framework/preemption``,
feature gates at their defaults: async preemption on, GenericWorkload off):

1. Eligibility: ``preemptionPolicy: Never`` pods never preempt ("not eligible due to
   preemptionPolicy=Never."); a pod whose nominated node still holds a lower-priority
   pod terminating because of preemption waits for it ("not eligible due to a
   terminating pod on the nominated node."), unless that node is now
   UnschedulableAndUnresolvable for it.
2. Candidates: only nodes whose Filter status was Unschedulable (not
   UnschedulableAndUnresolvable). They are dry-run from a random offset until
   ``max(minCandidateNodesAbsolute, N * minCandidateNodesPercentage / 100)`` (at most N)
   candidates are found, with at least one that violates no PodDisruptionBudget. A node
   where Filter rejects the pod even with every lower-priority pod gone, as a Filter
   plugin can tell from the node's figures (``filter_as_if``), gives no candidate: its
   dry run is skipped, and made only if no node gives one (its status is then read).
3. Victims on a node: every pod of lower priority is removed (PreFilter ``remove_pod``
   extensions keep plugin state right); if the pod then fits (Filter, with nominated
   pods), victims are reprieved one by one — PDB-violating ones first, then the others,
   each group from the most important (higher priority, then earlier ``status.startTime``;
   a pod without one counts as starting "now", after every pod that has one, and such
   pods keep the node's pod order among themselves) — keeping every pod whose return
   still lets the pod fit. PDB violations are counted as kube's
   ``FilterVictimsWithPDBViolation`` does: going through the victims in that order,
   ``status.disruptionsAllowed`` of the matching PDBs in the pod's namespace is
   decremented until one goes below zero (a violation; the later PDBs are not charged
   for that pod); pods listed in ``status.disruptedPods`` are not counted.
4. The node: fewest PDB violations, then the lowest highest-victim priority, then the
   smallest sum of victim priorities (each offset by 2^31), then fewest victims, then
   the latest start time among the highest-priority victims, then the first.
5. Preparation runs asynchronously (kube's async preemption, on by default since
   v1.33): lower-priority pods nominated to the node lose their nomination, victims get
   the ``DisruptionTarget`` condition (reason ``PreemptionByScheduler``) and are
   deleted, the last one after all the others (a pod waiting at Permit or in PreBind is
   stopped in memory instead, as kube's executor does: " (in kube-scheduler memory)."
   ends their event), each with a ``Preempted`` event.
   PreEnqueue holds the preemptor back ("waiting for the preemption for this pod to be
   finished") until that is done or the last victim is seen terminating. The preemptor
   is activated only after an error or an in-memory last victim; otherwise the victims'
   deletion events requeue it (as kube, so no retry meets them still terminating).

The PostFilter message is kube's: ``preemption: found a potential placement for pod on
node <node>, preempting <n> victims`` when a node was chosen (it ends the pod's
FailedScheduling message), else ``preemption: <reason>``, where a failed search reads
like a FitError over the dry-run nodes (``0/3 nodes are available: 3 No preemption
victims found for incoming pod.``); nodes that were not candidates count as "Preemption
is not helpful for scheduling".

Deliberate differences:
- The dry run is sequential in node order from the random offset; kube runs it in
  parallel, so which candidates it finds first (when it stops early) is racy. On a full
  tie kube takes whichever node Go's map iteration yields (random); we take the first
  candidate in dry-run order (non-violating candidates first). The same holds when the
  highest-priority victims of the tied nodes have no ``status.startTime``: kube reads the
  clock per node while scoring, so the node scored last wins (random).
- With several PDBs selecting one pod, the order kube checks them in is its informer
  cache's (random); ours is the object store's.
- A preemptor held by PreEnqueue is let go by the next deletion of an assigned pod once
  its eviction is over (kube's hint always skips: it waits for the 5-minute flush).
- A victim in PreBind is cancelled as kube cancels it, but its PreBind plugins run to
  their end (kube's are interrupted through their context): the binding cycle then fails
  with the Error "preempted by DefaultPreemption" instead of binding.
- Extenders are not supported. Workload-aware (PodGroup) preemption is not this
  plugin's PostFilter: the whole-group cycle runs it for a gang (:mod:`.gang`,
  ``kubesched.scheduler.gang_preemption``) when the profile enables this plugin.
"""

from __future__ import annotations

import asyncio
import logging
import random
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kubesched.framework.cluster_port import NotFound, PodCondition
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EnqueueExtensions,
    EventResource,
    Handle,
    PostFilterPlugin,
    PostFilterResult,
    PreEnqueuePlugin,
)
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.status import Code, Status, distinct
from kubesched.framework.types import Pod
from kubesched.plugins.default_preemption.dry_run import DryRunNode
from kubesched.plugins.default_preemption.ordering import (
    DISRUPTION_TARGET,
    ERR_NOT_HELPFUL,
    PREEMPTION_BY_SCHEDULER,
    Candidate,
    PdbInfo,
    filter_pods_with_pdb_violation,
    fit_error_message,
    more_important_key,
    pick_one_node_for_preemption,
    terminating_by_preemption,
)

__all__ = [
    "DISRUPTION_TARGET",
    "ERR_NOT_HELPFUL",
    "IN_MEMORY",
    "IN_PRE_BIND",
    "NAME",
    "PREEMPTION_BY_SCHEDULER",
    "WAITING",
    "Args",
    "Candidate",
    "DefaultPreemption",
    "PdbInfo",
    "filter_pods_with_pdb_violation",
    "fit_error_message",
    "more_important_key",
    "new",
    "pick_one_node_for_preemption",
    "stop_in_memory",
]

log = logging.getLogger("kubesched.plugins.default_preemption")

NAME = "DefaultPreemption"

ERR_NEVER = "not eligible due to preemptionPolicy=Never."
ERR_TERMINATING = "not eligible due to a terminating pod on the nominated node."
ERR_NO_VICTIMS = "No preemption victims found for incoming pod"
ERR_NO_CANDIDATE = "no candidate node for preemption"
ERR_WAITING = "waiting for the preemption for this pod to be finished"


class Args(BaseModel):
    """kube-scheduler's DefaultPreemptionArgs."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, defer_build=True)

    min_candidate_nodes_percentage: int = Field(
        10, ge=0, le=100, alias="minCandidateNodesPercentage"
    )
    """Dry-run at least this percentage of the potential nodes (default 10)."""
    min_candidate_nodes_absolute: int = Field(100, ge=0, alias="minCandidateNodesAbsolute")
    """...and at least this many (default 100), never more than there are."""

    @model_validator(mode="after")
    def _not_both_zero(self) -> Args:
        if self.min_candidate_nodes_percentage == 0 and self.min_candidate_nodes_absolute == 0:
            raise ValueError(
                "minCandidateNodesPercentage and minCandidateNodesAbsolute cannot both be zero"
            )
        return self


# -- the plugin -------------------------------------------------------------------------------------
class DefaultPreemption(PreEnqueuePlugin, PostFilterPlugin, EnqueueExtensions):
    name = NAME

    def __init__(self, args: Args, handle: Handle, rng: random.Random | None = None) -> None:
        self.args = args
        self.handle = handle
        self.rng = rng or getattr(handle, "rng", None) or random.Random()
        self._preempting: set[str] = set()
        """Preemptors whose victims are being evicted (PreEnqueue holds them)."""
        self._last_victim: dict[str, str] = {}
        """Preemptor uid -> uid of its last victim, once that one's eviction started:
        the preemptor is released as soon as that pod is seen terminating or gone."""
        self._tasks: set[asyncio.Task[None]] = set()

    # -- PreEnqueue / events ----------------------------------------------------------------------
    def running_preemption(self, uid: str) -> bool:
        """kube's ``IsPodRunningPreemption``: the eviction is under way and its last
        victim (if its turn came) is neither terminating nor gone in our cache."""
        if uid not in self._preempting:
            return False
        last = self._last_victim.get(uid)
        if last is None:
            return True
        victim = self.handle.get_pod(last)
        return victim is not None and not victim.deletion_timestamp

    def pre_enqueue(self, pod: Pod) -> Status | None:
        if self.running_preemption(pod.uid):
            return Status.unresolvable(ERR_WAITING)
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # kube's hint for this registration always says Skip: a preemptor held here waits
        # for another event (e.g. NodeResourcesFit's on its victims' deletion), and one
        # held when the last of them goes waits for the 5-minute flush. Ours lets it go
        # on any assigned pod's deletion once the hold is over.
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE),
                lambda pod, old, new: not self.running_preemption(pod.uid),
            )
        ]

    def preempting(self) -> bool:
        """Whether an asynchronous preparation is still running (tests, idle checks)."""
        return bool(self._tasks)

    async def wait(self) -> None:
        """Wait for every preparation in flight."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    # -- PostFilter -----------------------------------------------------------------------------------
    def post_filter(
        self, state: CycleState, pod: Pod, statuses: dict[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        result, status = self._preempt(state, pod, statuses)
        if status is not None and status.message():
            return result, Status(status.code, f"preemption: {status.message()}")
        return result, status

    def _preempt(
        self, state: CycleState, pod: Pod, statuses: dict[str, Status]
    ) -> tuple[PostFilterResult | None, Status | None]:
        ok, msg = self.pod_eligible_to_preempt_others(pod, statuses.get(pod.nominated_node_name))
        if not ok:
            return None, Status.unschedulable(msg)
        snapshot = self.handle.snapshot
        all_nodes = snapshot.node_infos
        if not all_nodes:
            return None, Status.as_error("no nodes available")
        candidates, node_statuses, errors = self.find_candidates(state, pod, all_nodes, statuses)
        if errors and not candidates:
            return None, Status.as_error(errors[0])
        if not candidates:
            return PostFilterResult(""), Status.unschedulable(
                fit_error_message(len(all_nodes), node_statuses)
            )
        best = pick_one_node_for_preemption(candidates)
        if best is None or not best.node:
            return None, Status.unschedulable(ERR_NO_CANDIDATE)
        self.prepare_candidate_async(best, pod)
        return PostFilterResult(best.node), Status(
            Code.SUCCESS,
            f"found a potential placement for pod on node {best.node}, "
            f"preempting {len(best.victims)} victims",
        )

    def pod_eligible_to_preempt_others(
        self, pod: Pod, nominated_node_status: Status | None
    ) -> tuple[bool, str]:
        if pod.preemption_policy == "Never":
            return False, ERR_NEVER
        nominated = pod.nominated_node_name
        if nominated:
            if (
                nominated_node_status is not None
                and nominated_node_status.code == Code.UNSCHEDULABLE_AND_UNRESOLVABLE
            ):
                return True, ""
            ni = self.handle.snapshot.get(nominated)
            if ni is not None:
                for p in ni.pods:
                    if p.priority < pod.priority and terminating_by_preemption(p):
                        return False, ERR_TERMINATING
        return True, ""

    # -- candidates --------------------------------------------------------------------------------------
    def num_candidates(self, num_nodes: int) -> int:
        n = num_nodes * self.args.min_candidate_nodes_percentage // 100
        n = max(n, self.args.min_candidate_nodes_absolute)
        return min(n, num_nodes)

    def offset_and_num_candidates(self, num_nodes: int) -> tuple[int, int]:
        return self.rng.randrange(num_nodes), self.num_candidates(num_nodes)

    def pdbs(self) -> list[PdbInfo]:
        try:
            raw = self.handle.store.list("PodDisruptionBudget")
        except RuntimeError:  # no object store (a framework used alone)
            return []
        return [PdbInfo.from_dict(d) for d in raw]

    def find_candidates(
        self,
        state: CycleState,
        pod: Pod,
        all_nodes: Sequence[NodeInfo],
        statuses: Mapping[str, Status],
    ) -> tuple[list[Candidate], dict[str, Status], list[str]]:
        """(candidates, non-violating first; dry-run statuses of failed nodes; errors)."""
        if all(st.code != Code.UNSCHEDULABLE for st in distinct(statuses.values())):
            return [], {}, []  # no node where preemption might help: none to walk
        potential = [
            ni
            for ni in all_nodes
            if (st := statuses.get(ni.name)) is not None and st.code == Code.UNSCHEDULABLE
        ]
        if not potential:
            return [], {}, []
        pdbs = self.pdbs()
        offset, want = self.offset_and_num_candidates(len(potential))
        non_violating: list[Candidate] = []
        violating: list[Candidate] = []
        # The nodes walked that gave no candidate, in order, each with its dry run's
        # status; None where the dry run was skipped: Filter rejects the pod there even
        # with every lower-priority pod gone (``filter_rejects_as_if``, no copy made).
        failed: list[tuple[NodeInfo, Status | None]] = []
        n = len(potential)
        for i in range(n):
            ni = potential[(offset + i) % n]
            lower = [p for p in ni.pods if p.priority < pod.priority]
            if not lower:
                failed.append((ni, Status.unresolvable(ERR_NO_VICTIMS)))
                continue
            if self.handle.filter_rejects_as_if(state, pod, ni, lower):
                failed.append((ni, None))
                continue
            c, st = self._dry_run(state, pod, ni, pdbs)
            if c is not None:
                (violating if c.num_pdb_violations else non_violating).append(c)
                if non_violating and len(non_violating) + len(violating) >= want:
                    break
                continue
            failed.append((ni, st))
        candidates = non_violating[:want] + violating[:want]
        node_statuses: dict[str, Status] = {}
        errors: list[str] = []
        if candidates:
            # kube-scheduler reads the failed nodes' statuses and errors only when there is
            # no candidate: the skipped dry runs stay skipped.
            return candidates, node_statuses, errors
        for ni, st in failed:
            if st is None:
                # Their statuses say why preemption cannot help: the dry run, for them now.
                c, st = self._dry_run(state, pod, ni, pdbs)
                if c is not None:  # not reached while ``filter_as_if`` is exact
                    candidates.append(c)
                    continue
            if st.code == Code.ERROR:
                errors.append(st.message())
            node_statuses[ni.name] = st
        return candidates, node_statuses, errors

    def _dry_run(
        self, state: CycleState, pod: Pod, ni: NodeInfo, pdbs: Sequence[PdbInfo]
    ) -> tuple[Candidate | None, Status]:
        """SelectVictimsOnNode on copies of the state and the node: a candidate, or why
        there is none."""
        victims, violations, st = self.select_victims_on_node(state.clone(), pod, ni.clone(), pdbs)
        if st is None and victims:
            return Candidate(ni.name, victims, violations), Status(Code.SUCCESS)
        if st is None:
            st = Status.as_error(f'expected at least one victim pod on node "{ni.name}"')
        return None, st

    def select_victims_on_node(
        self, state: CycleState, pod: Pod, node_info: NodeInfo, pdbs: Sequence[PdbInfo]
    ) -> tuple[list[Pod], int, Status | None]:
        """The fewest victims on ``node_info`` (a clone; ``state`` too) that let ``pod`` fit,
        and how many of them violate a PDB. Success is a None status."""
        node = DryRunNode(self.handle, state, pod, node_info)
        potential = [p for p in node_info.pods if p.priority < pod.priority]
        for p in potential:
            if (s := node.remove(p)) is not None:
                return [], 0, Status.as_error(s.message())
        if not potential:
            return [], 0, Status.unresolvable(ERR_NO_VICTIMS)
        st = node.filter()
        if st is not None and st.code != Code.SUCCESS:
            return [], 0, st
        potential.sort(key=more_important_key)
        violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)
        victims: list[Pod] = []

        def reprieve(p: Pod) -> tuple[bool, Status | None]:
            if (s := node.add(p)) is not None:
                return False, Status.as_error(s.message())
            fits = node.filter()
            if fits is None or fits.code == Code.SUCCESS:
                return True, None
            if (s := node.remove(p)) is not None:
                return False, Status.as_error(s.message())
            victims.append(p)
            return False, None

        num_violating = 0
        for p in violating:
            fits, err = reprieve(p)
            if err is not None:
                return [], 0, err
            if not fits:
                num_violating += 1
        for p in non_violating:
            _, err = reprieve(p)
            if err is not None:
                return [], 0, err
        if violating and non_violating:
            victims.sort(key=more_important_key)
        return victims, num_violating, None

    # -- preparation ---------------------------------------------------------------------------------------
    def prepare_candidate_async(self, c: Candidate, pod: Pod) -> None:
        self.handle.observe_preemption_victims(len(c.victims))  # as kube, every victim
        victims = [v for v in c.victims if not v.deletion_timestamp]
        if not victims:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            log.warning("no running event loop: victims of %s are not evicted", pod.key)
            return
        self._preempting.add(pod.uid)
        task = loop.create_task(self._prepare(c, pod, victims))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _prepare(self, c: Candidate, pod: Pod, victims: list[Pod]) -> None:
        """kube's async preparation: nominations of lower-priority pods to the node are
        cleared, every victim but the last is evicted, then the last one. The preemptor
        is activated only after an error or when the last victim went in memory (a
        waiting pod); otherwise the victims' deletion events bring it back."""
        h = self.handle
        failed = in_memory = False
        try:
            lower = [p for p in h.nominated_pods_for_node(c.node) if p.priority < pod.priority]
            for p in lower:
                try:
                    await h.cluster.patch_pod_status(p, nominated_node_name="")
                except NotFound:
                    pass
                except Exception:
                    log.exception("cannot clear nominatedNodeName of %s", p.key)
                    failed = True
            for v in victims[:-1]:
                try:
                    await self.preempt_pod(c, pod, v)
                except Exception:
                    log.exception("preempting %s for %s failed", v.key, pod.key)
                    failed = True
                    break
            else:
                last = victims[-1]
                self._last_victim[pod.uid] = last.uid
                try:
                    in_memory = await self.preempt_pod(c, pod, last)
                except Exception:
                    log.exception("preempting %s for %s failed", last.key, pod.key)
                    failed = True
        finally:
            self._preempting.discard(pod.uid)
            self._last_victim.pop(pod.uid, None)
            if failed or in_memory:
                h.activate([pod])

    async def preempt_pod(self, c: Candidate, preemptor: Pod, victim: Pod) -> bool:
        """Evict one victim with its Preempted event; True when it went in memory at once
        (a pod waiting at Permit, preempted there), so the preemptor may be activated. A
        pod in PreBind is cancelled in memory too (never deleted), but False: it holds its
        node until PreBind returns, and its unwinding requeues the preemptor."""
        h = self.handle
        message = f"Preempted by pod {preemptor.uid} on node {c.node}"
        stopped = await stop_in_memory(h, victim, self.name)
        if stopped:
            message += IN_MEMORY
        else:
            cond = PodCondition(
                DISRUPTION_TARGET,
                "True",
                PREEMPTION_BY_SCHEDULER,
                f"{preemptor.scheduler_name}: preempting to accommodate a higher priority pod",
            )
            try:
                await h.cluster.delete_pod(victim, condition=cond)
            except NotFound:
                return False  # already gone
        await h.cluster.record_event(
            victim,
            event_type="Normal",
            reason="Preempted",
            action="Preempting",
            message=message,
            reporting_controller=h.profile_name,
            related=preemptor,
        )
        return stopped == WAITING


WAITING = "waiting"
IN_PRE_BIND = "pre-bind"
IN_MEMORY = " (in kube-scheduler memory)."
"""The end of a ``Preempted`` event's message for a victim stopped in memory."""


async def stop_in_memory(h: Handle, victim: Pod, plugin: str) -> str:
    """kube's executor for a victim not yet bound: one waiting at Permit is preempted
    there (:data:`WAITING`), one in PreBind cancelled (:data:`IN_PRE_BIND`); "" for any
    other, which the caller deletes. Neither is ever deleted.

    A waiting victim's binding cycle unwinds (forgets its assumed pod) when the event loop
    next runs it: it is let do so before returning, so that the preemptor, activated next,
    finds the node free (it once found the victim still there, no longer waiting, and
    deleted the pending pod). A victim in PreBind holds its node until PreBind returns:
    its unwinding (an assigned pod gone) requeues the preemptor, as a deletion would."""
    wp = h.get_waiting_pod(victim.uid)
    if wp is not None:
        wp.preempt(plugin, "preempted")
        await asyncio.sleep(0)
        return WAITING
    pre_binding = h.get_pod_in_pre_bind(victim.uid)
    if pre_binding is not None and pre_binding.cancel(f"preempted by {plugin}"):
        return IN_PRE_BIND
    return ""


def new(args: Args, handle: Handle) -> DefaultPreemption:
    return DefaultPreemption(args, handle)
