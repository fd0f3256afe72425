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
   candidates are found, with at least one that violates no PodDisruptionBudget.
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
   deleted (waiting pods are rejected instead), each with a ``Preempted`` event. While
   that runs, PreEnqueue holds the preemptor back ("waiting for the preemption for this
   pod to be finished").

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
- When the asynchronous preparation ends, the preemptor is activated (moved to activeQ);
  kube activates it only on an API error and otherwise relies on the victims' delete
  events. A victim waiting at Permit is rejected (kube 1.37 fails it with an Error
  status and adds " (in kube-scheduler memory)." to the Preempted event); a victim in
  PreBind is deleted through the API (kube cancels its binding cycle).
- Extenders and workload-aware (PodGroup) preemption are not supported.
"""

from __future__ import annotations

import asyncio
import logging
import math
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from kubesched.framework.cluster_port import NotFound, PodCondition
from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import (
    ActionType,
    ClusterEvent,
    ClusterEventWithHint,
    EventResource,
    Handle,
    PostFilterResult,
)
from kubesched.framework.labels import compile_label_selector
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.status import Code, Status
from kubesched.framework.types import ObjectError, Pod

__all__ = [
    "NAME",
    "Args",
    "Candidate",
    "DefaultPreemption",
    "PdbInfo",
    "filter_pods_with_pdb_violation",
    "more_important_key",
    "new",
    "pick_one_node_for_preemption",
]

log = logging.getLogger("kubesched.plugins.default_preemption")

NAME = "DefaultPreemption"

ERR_NEVER = "not eligible due to preemptionPolicy=Never."
ERR_TERMINATING = "not eligible due to a terminating pod on the nominated node."
ERR_NO_VICTIMS = "No preemption victims found for incoming pod"
ERR_NOT_HELPFUL = "Preemption is not helpful for scheduling"
ERR_NO_CANDIDATE = "no candidate node for preemption"
ERR_WAITING = "waiting for the preemption for this pod to be finished"
DISRUPTION_TARGET = "DisruptionTarget"
PREEMPTION_BY_SCHEDULER = "PreemptionByScheduler"
_MAX_INT32_PLUS_ONE = 2**31


class Args(BaseModel):
    """kube-scheduler's DefaultPreemptionArgs."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)

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


# -- pure helpers (unit-tested directly) ----------------------------------------------------------
def start_time(pod: Pod) -> float:
    """``status.startTime`` as epoch seconds; a pod that has not started is "now" (+inf)."""
    raw = (pod.raw.get("status") or {}).get("startTime")
    if not isinstance(raw, str) or not raw:
        return math.inf
    try:
        return datetime.fromisoformat(raw.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return math.inf


def more_important_key(pod: Pod) -> tuple[int, float]:
    """Sort key, most important first: higher priority, then earlier start."""
    return (-pod.priority, start_time(pod))


@dataclass(slots=True)
class PdbInfo:
    namespace: str
    selector: Any
    """A compiled LabelSelector, or None when the PDB selects nothing."""
    disruptions_allowed: int
    disrupted_pods: frozenset[str]

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> PdbInfo:
        meta = d.get("metadata") or {}
        spec = d.get("spec") or {}
        status = d.get("status") or {}
        try:
            sel = compile_label_selector(spec.get("selector"), "spec.selector")
            selector: Any = None if sel.is_empty() or sel.nothing else sel
        except ObjectError:
            selector = None  # an invalid selector matches no pod
        return cls(
            str(meta.get("namespace") or "default"),
            selector,
            int(status.get("disruptionsAllowed") or 0),
            frozenset((status.get("disruptedPods") or {}).keys()),
        )


def filter_pods_with_pdb_violation(
    pods: Sequence[Pod], pdbs: Sequence[PdbInfo]
) -> tuple[list[Pod], list[Pod]]:
    """Split ``pods`` (order kept) into (violating, non-violating) if all were evicted."""
    allowed = [p.disruptions_allowed for p in pdbs]
    violating: list[Pod] = []
    non_violating: list[Pod] = []

    def violates(pod: Pod) -> bool:
        # v1.37: the first PDB driven below zero decides; the PDBs after it are not
        # charged for this pod (v1.34 charged every matching PDB).
        if not pod.labels:
            return False
        for i, pdb in enumerate(pdbs):
            if pdb.namespace != pod.namespace or pdb.selector is None:
                continue
            if not pdb.selector.matches(pod.labels) or pod.name in pdb.disrupted_pods:
                continue
            allowed[i] -= 1
            if allowed[i] < 0:
                return True
        return False

    for pod in pods:
        (violating if violates(pod) else non_violating).append(pod)
    return violating, non_violating


@dataclass(slots=True)
class Candidate:
    node: str
    victims: list[Pod]
    """Most important first."""
    num_pdb_violations: int


def _earliest_start_of_highest(victims: Sequence[Pod]) -> float:
    top = max(p.priority for p in victims)
    return min(start_time(p) for p in victims if p.priority == top)


def pick_one_node_for_preemption(candidates: Sequence[Candidate]) -> Candidate | None:
    """kube's ``pickOneNodeForPreemption``: each rule keeps the best-scoring nodes; the
    first rule that leaves one node decides; a full tie takes the first candidate."""
    if not candidates:
        return None
    rules = (
        lambda c: -c.num_pdb_violations,
        lambda c: -c.victims[0].priority,
        lambda c: -sum(p.priority + _MAX_INT32_PLUS_ONE for p in c.victims),
        lambda c: -len(c.victims),
        lambda c: _earliest_start_of_highest(c.victims),
    )
    remaining = list(candidates)
    for rule in rules:
        scores = [rule(c) for c in remaining]
        best = max(scores)
        remaining = [c for c, s in zip(remaining, scores, strict=True) if s == best]
        if len(remaining) == 1:
            break
    return remaining[0]


def fit_error_message(num_all_nodes: int, statuses: Mapping[str, Status]) -> str:
    """kube's FitError text over the dry run: explicit node statuses, every other node
    counted as "Preemption is not helpful for scheduling"."""
    counts: dict[str, int] = {}
    for st in statuses.values():
        for r in st.reasons:
            counts[r] = counts.get(r, 0) + 1
    absent = num_all_nodes - len(statuses)
    if absent > 0:
        counts[ERR_NOT_HELPFUL] = counts.get(ERR_NOT_HELPFUL, 0) + absent
    msg = f"0/{num_all_nodes} nodes are available:"
    parts = sorted(f"{v} {k}" for k, v in counts.items())
    if parts:
        msg += f" {', '.join(parts)}."
    return msg


def _terminating_by_preemption(pod: Pod) -> bool:
    if not pod.deletion_timestamp:
        return False
    for c in (pod.raw.get("status") or {}).get("conditions") or ():
        if c.get("type") == DISRUPTION_TARGET:
            return bool(c.get("status") == "True" and c.get("reason") == PREEMPTION_BY_SCHEDULER)
    return False


# -- the plugin -------------------------------------------------------------------------------------
class DefaultPreemption:
    name = NAME

    def __init__(self, args: Args, handle: Handle, rng: random.Random | None = None) -> None:
        self.args = args
        self.handle = handle
        self.rng = rng or getattr(handle, "rng", None) or random.Random()
        self._preempting: set[str] = set()
        """Preemptors whose victims are being evicted (PreEnqueue holds them)."""
        self._tasks: set[asyncio.Task[None]] = set()

    # -- PreEnqueue / events ----------------------------------------------------------------------
    def pre_enqueue(self, pod: Pod) -> Status | None:
        if pod.uid in self._preempting:
            return Status.unresolvable(ERR_WAITING)
        return None

    def events_to_register(self) -> list[ClusterEventWithHint]:
        # A held preemptor is released when its preparation ends, never by an event
        # (kube's hint for this registration always says Skip).
        return [
            ClusterEventWithHint(
                ClusterEvent(EventResource.ASSIGNED_POD, ActionType.DELETE),
                lambda pod, old, new: False,
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
                    if p.priority < pod.priority and _terminating_by_preemption(p):
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
        node_statuses: dict[str, Status] = {}
        errors: list[str] = []
        n = len(potential)
        for i in range(n):
            ni = potential[(offset + i) % n]
            victims, violations, st = self.select_victims_on_node(
                state.clone(), pod, ni.clone(), pdbs
            )
            if st is None and victims:
                c = Candidate(ni.name, victims, violations)
                (violating if violations else non_violating).append(c)
                if non_violating and len(non_violating) + len(violating) >= want:
                    break
                continue
            if st is None:
                st = Status.as_error(f'expected at least one victim pod on node "{ni.name}"')
            if st.code == Code.ERROR:
                errors.append(st.message())
            node_statuses[ni.name] = st
        return non_violating[:want] + violating[:want], node_statuses, errors

    def select_victims_on_node(
        self, state: CycleState, pod: Pod, node_info: NodeInfo, pdbs: Sequence[PdbInfo]
    ) -> tuple[list[Pod], int, Status | None]:
        """The fewest victims on ``node_info`` (a clone; ``state`` too) that let ``pod`` fit,
        and how many of them violate a PDB. Success is a None status."""
        h = self.handle

        def remove(p: Pod) -> Status | None:
            node_info.remove_pod(p)
            return h.run_pre_filter_extension_remove_pod(state, pod, p, node_info)

        def add(p: Pod) -> Status | None:
            node_info.add_pod(p)
            return h.run_pre_filter_extension_add_pod(state, pod, p, node_info)

        potential = [p for p in node_info.pods if p.priority < pod.priority]
        for p in potential:
            if (s := remove(p)) is not None:
                return [], 0, Status.as_error(s.message())
        if not potential:
            return [], 0, Status.unresolvable(ERR_NO_VICTIMS)
        st = h.run_filter_plugins_with_nominated_pods(state, pod, node_info)
        if st is not None and st.code != Code.SUCCESS:
            return [], 0, st
        potential.sort(key=more_important_key)
        violating, non_violating = filter_pods_with_pdb_violation(potential, pdbs)
        victims: list[Pod] = []

        def reprieve(p: Pod) -> tuple[bool, Status | None]:
            if (s := add(p)) is not None:
                return False, Status.as_error(s.message())
            fits = h.run_filter_plugins_with_nominated_pods(state, pod, node_info)
            if fits is None or fits.code == Code.SUCCESS:
                return True, None
            if (s := remove(p)) is not None:
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
        h = self.handle
        try:
            lower = [p for p in h.nominated_pods_for_node(c.node) if p.priority < pod.priority]
            for p in lower:
                try:
                    await h.cluster.patch_pod_status(p, nominated_node_name="")
                except NotFound:
                    pass
                except Exception:
                    log.exception("cannot clear nominatedNodeName of %s", p.key)
            for v in victims:
                try:
                    await self.preempt_pod(c, pod, v)
                except Exception:
                    log.exception("preempting %s for %s failed", v.key, pod.key)
                    break
        finally:
            self._preempting.discard(pod.uid)
            h.activate([pod])

    async def preempt_pod(self, c: Candidate, preemptor: Pod, victim: Pod) -> None:
        h = self.handle
        wp = h.get_waiting_pod(victim.uid)
        if wp is not None:
            wp.reject(self.name, "preempted")
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
                return  # already gone
        await h.cluster.record_event(
            victim,
            event_type="Normal",
            reason="Preempted",
            action="Preempting",
            message=f"Preempted by pod {preemptor.uid} on node {c.node}",
            reporting_controller=h.profile_name,
            related=preemptor,
        )


def new(args: Args, handle: Handle) -> DefaultPreemption:
    return DefaultPreemption(args, handle)


def victim_names(pods: Iterable[Pod]) -> list[str]:
    """Pod keys, for logs and tests."""
    return [p.key for p in pods]
