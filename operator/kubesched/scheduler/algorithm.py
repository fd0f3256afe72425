"""Placing one pod: PreFilter, Filter over a rotating window of nodes, PreScore, Score,
and the choice of host. Pure computation on the snapshot; no awaits.

Filter follows kube-scheduler's ``findNodesThatFitPod``: the scan starts at a rotating
offset and stops once ``num_feasible_nodes_to_find`` nodes fit. Vector filters compute
one mask over all nodes; scalar filters then run only on nodes the mask admits, in
scan order, until enough nodes are found. Which nodes are feasible and which ones the
scan examined are exactly what a node-by-node scan would give.
"""

from __future__ import annotations

import itertools
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import numpy.typing as npt

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.filter_phase import go_list
from kubesched.framework.implements import implements
from kubesched.framework.interface import Diagnosis, FilterPlugin, VectorDiagnosePlugin
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.runtime import Framework
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status, distinct, reason_counts
from kubesched.framework.types import Pod
from kubesched.scheduler.select_host import heap_winner

if TYPE_CHECKING:
    from kubesched.scheduler.batch import OpportunisticBatch

__all__ = [
    "MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND",
    "MIN_FEASIBLE_NODES_TO_FIND",
    "FitError",
    "ScheduleResult",
    "num_feasible_nodes_to_find",
]

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"


def num_feasible_nodes_to_find(percentage: int | None, num_all_nodes: int) -> int:
    """kube-scheduler's adaptive count: all nodes under 100; else the configured
    percentage, or ``max(5, 50 - nodes/125)`` percent when unset/0; never under 100."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    pct = percentage or 0
    if pct == 0:
        pct = 50 - num_all_nodes // 125
        if pct < MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND:
            pct = MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND
    if pct >= 100:
        return num_all_nodes
    n = num_all_nodes * pct // 100
    return max(n, MIN_FEASIBLE_NODES_TO_FIND)


class FitError(Exception):
    """No node fits; ``str()`` is kube-scheduler's message."""

    def __init__(self, pod: Pod, num_all_nodes: int, diagnosis: Diagnosis) -> None:
        super().__init__()
        self.pod = pod
        self.num_all_nodes = num_all_nodes
        self.diagnosis = diagnosis

    def __str__(self) -> str:
        d = self.diagnosis
        msg = NO_NODE_AVAILABLE_MSG.format(self.num_all_nodes) + ":"
        if d.pre_filter_msg:
            msg += f" {d.pre_filter_msg}."
        else:
            counts = reason_counts(d.node_to_status.values())
            parts = sorted(f"{v} {k}" for k, v in counts.items())
            if parts:
                msg += " " + ", ".join(parts) + "."
        if d.post_filter_msg:
            # No period of its own: PostFilter messages end with theirs (kube >= 1.29).
            msg += f" {d.post_filter_msg}"
        return msg


def one_node_rejection(pod: Pod, node: str, s: Status) -> Status:
    """A rejection at Reserve or Permit as kube-scheduler 1.37 reports it: a FitError
    over the one node tried ("0/1 nodes are available: 1 <reason>."), the plugin among
    the pod's rejectors. Any other status is returned as it is."""
    if not s.is_rejected():
        return s
    msg = str(FitError(pod, 1, Diagnosis(node_to_status={node: s})))
    return Status(s.code, msg, plugin=s.plugin, error=s.error)


@dataclass(slots=True)
class ScheduleResult:
    node_name: str
    evaluated_nodes: int
    feasible_nodes: int
    scores: dict[str, int] = field(default_factory=dict)
    """node -> total weighted score (only filled when ``explain`` asks)."""


class Algorithm:
    """Holds the rotating start offset across cycles (one per scheduler, as in kube)."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.next_start_node_index = 0
        self.rng = rng or random.Random()
        self.on_extension_point: Callable[[str, Status | None, str, float], None] | None = None
        """Metrics hook: (extension point, status, profile, seconds) per PreFilter,
        PreScore and Score run."""

    def schedule_pod(
        self,
        fwk: Framework,
        state: CycleState,
        pod: Pod,
        snap: Snapshot,
        batch: OpportunisticBatch | None = None,
    ) -> ScheduleResult:
        n_all = len(snap)
        if n_all == 0:
            raise FitError(pod, 0, Diagnosis(pre_filter_msg="no nodes available to schedule pods"))
        rows, diagnosis = self._find_nodes_that_fit(fwk, state, pod, snap, batch)
        if len(rows) == 0:
            raise FitError(pod, n_all, diagnosis)
        evaluated = len(rows) + len(diagnosis.node_to_status)
        if len(rows) == 1:
            if batch is not None:
                batch.store_single()
            return ScheduleResult(snap.node_infos[int(rows[0])].name, evaluated, 1)
        infos = snap.node_infos
        feasible = [infos[r] for r in rows.tolist()]
        t0 = time.perf_counter()
        s = fwk.run_pre_score(state, pod, feasible)
        t1 = time.perf_counter()
        if (observe := self.on_extension_point) is not None:
            observe("PreScore", s, fwk.profile_name, t1 - t0)
        if s is not None:
            raise _StatusError(s)
        if batch is not None and batch.signature is not None:
            total, s = _score_and_store(fwk, state, pod, snap, rows, batch)
        else:
            total, _, s = fwk.run_score(state, pod, snap, rows)
            if batch is not None:
                batch.store(fwk, snap, state, rows, {})
        if observe is not None:
            observe("Score", s, fwk.profile_name, time.perf_counter() - t1)
        if s is not None:
            raise _StatusError(s)
        pick = heap_winner(total)
        return ScheduleResult(feasible[pick].name, evaluated, len(rows))

    # -- Filter ------------------------------------------------------------------------------------
    def _find_nodes_that_fit(
        self,
        fwk: Framework,
        state: CycleState,
        pod: Pod,
        snap: Snapshot,
        batch: OpportunisticBatch | None = None,
    ) -> tuple[npt.NDArray[np.intp], Diagnosis]:
        diagnosis = Diagnosis()
        pre = self._run_pre_filter(fwk, state, pod, snap, diagnosis)
        if pre is None:
            return np.empty(0, dtype=np.intp), diagnosis
        allowed, narrowing = pre
        if batch is not None and allowed is None:
            t0 = time.perf_counter()
            hint = batch.hint(fwk, state, pod, snap)
            if hint is not None:
                self._observe_filter(fwk, t0)  # kube filters the hinted node
                return np.array([hint], dtype=np.intp), diagnosis
        nom = snap.get(pod.nominated_node_name) if pod.nominated_node_name else None
        if nom is not None:
            t0 = time.perf_counter()
            fits = _fits_nominated_node(fwk, state, pod, nom)
            self._observe_filter(fwk, t0)  # kube filters the nominated node alone first
            if fits:
                return np.array([nom.index], dtype=np.intp), diagnosis

        candidates = _candidates(snap, allowed, narrowing, diagnosis)
        n = len(candidates)
        if not fwk.has_filter_plugins():
            if n == 0:
                return candidates, diagnosis
            # kube-scheduler: the first to_find nodes from the rotating offset, not all.
            to_find = num_feasible_nodes_to_find(fwk.percentage_of_nodes_to_score, n)
            take = candidates[(np.arange(to_find) + self.next_start_node_index % n) % n]
            self.next_start_node_index = (self.next_start_node_index + to_find) % len(snap)
            return take, diagnosis
        t0 = time.perf_counter()
        try:
            return self._filter(fwk, state, pod, snap, candidates, diagnosis)
        finally:
            self._observe_filter(fwk, t0)

    def _observe_filter(self, fwk: Framework, t0: float) -> None:
        """The Filter extension point's duration, as kube-scheduler records it: once per
        filtering of the nodes (the nominated or hinted node alone, then all), with
        filter plugins configured; its status always Success (errors included)."""
        if (observe := self.on_extension_point) is not None and fwk.has_filter_plugins():
            observe("Filter", None, fwk.profile_name, time.perf_counter() - t0)

    def _filter(
        self,
        fwk: Framework,
        state: CycleState,
        pod: Pod,
        snap: Snapshot,
        candidates: npt.NDArray[np.intp],
        diagnosis: Diagnosis,
    ) -> tuple[npt.NDArray[np.intp], Diagnosis]:
        """Filter ``candidates`` from the rotating offset until enough fit."""
        n = len(candidates)
        if n == 0:
            return candidates, diagnosis
        to_find = num_feasible_nodes_to_find(fwk.percentage_of_nodes_to_score, n)
        start = self.next_start_node_index % n
        order = np.concatenate((candidates[start:], candidates[:start])) if start else candidates
        combined, scalar, masks = fwk.filter_masks(state, pod, snap)
        nominated_rows = {snap.by_name[nm].index for nm in _nominated_nodes(fwk, snap, pod)}
        failed: dict[int, Status] = {}
        feasible, processed = _scan(
            fwk, state, pod, snap, order, combined, scalar, nominated_rows, to_find, failed
        )
        self.next_start_node_index = (self.next_start_node_index + processed) % len(snap)
        if len(feasible) == 0:
            # Every candidate was examined; say why each failed, in plugin order.
            self._diagnose(fwk, state, pod, snap, order, masks, nominated_rows, diagnosis, failed)
        return feasible, diagnosis

    def _run_pre_filter(
        self, fwk: Framework, state: CycleState, pod: Pod, snap: Snapshot, diagnosis: Diagnosis
    ) -> tuple[set[str] | None, list[str]] | None:
        """PreFilter: (the node names it allows, or None for all; the plugins that
        narrowed them), or None when it rejected the pod on every node (recorded in
        ``diagnosis``). An Error status raises."""
        t0 = time.perf_counter()
        pre_res, s, narrowing = fwk.run_pre_filter(state, pod, snap.node_infos)
        if (observe := self.on_extension_point) is not None:
            observe("PreFilter", s, fwk.profile_name, time.perf_counter() - t0)
        if s is not None:
            if s.code == Code.ERROR:
                raise _StatusError(s)
            diagnosis.pre_filter_msg = s.message()
            for ni in snap.node_infos:
                diagnosis.node_to_status[ni.name] = s
            _record_rejector(diagnosis, s)
            return None
        return (None if pre_res is None else pre_res.node_names), narrowing

    def _diagnose(
        self,
        fwk: Framework,
        state: CycleState,
        pod: Pod,
        snap: Snapshot,
        order: npt.NDArray[np.intp],
        masks: dict[str, npt.NDArray[np.bool_]],
        nominated_rows: set[int],
        diagnosis: Diagnosis,
        known: Mapping[int, Status],
    ) -> None:
        """Why each node of ``order`` failed: the first Filter plugin, in chain order,
        that rejects it (nodes with nominated pods: the whole Filter with them). A plugin
        goes over all the nodes still undecided at once: its mask picks those it rejects,
        and its ``filter_statuses`` (or ``filter``, node by node) says why. ``known``: the
        statuses :func:`_scan` already has (nodes every vector mask passed: the first
        scalar plugin that failed, or the whole Filter with the nominated pods), each
        the same answer this would find again."""
        infos = snap.node_infos
        rows = order.tolist()
        # By position in ``order``: each node's status, and the positions undecided.
        found: list[Status | None] = [None] * len(rows)
        undecided = np.arange(len(rows), dtype=np.intp)
        if known:
            have = np.flatnonzero(np.isin(order, list(known)))
            for pos in have.tolist():
                found[pos] = known[rows[pos]]
            undecided = np.setdiff1d(undecided, have, assume_unique=True)
        if nominated_rows:
            nominated = np.flatnonzero(np.isin(order[undecided], list(nominated_rows)))
            for pos in undecided[nominated].tolist():
                ni = infos[rows[pos]]
                st = fwk.run_filter_plugins_with_nominated_pods(state, pod, ni)
                found[pos] = _mismatch(ni.name) if st is None else st
            undecided = np.delete(undecided, nominated)
        skip = state.skip_filter_plugins
        for p in fwk.chain_for(state).filter:
            if len(undecided) == 0:
                break
            if p.name in skip:
                continue
            m = masks.get(p.name)
            picked = (
                np.arange(len(undecided)) if m is None else np.flatnonzero(~m[order[undecided]])
            )
            if len(picked) == 0:
                continue
            positions = undecided[picked]
            statuses = _filter_statuses(fwk, p, state, pod, snap, order[positions], m is not None)
            said = np.fromiter(
                (st is not None for st in statuses), dtype=np.bool_, count=len(picked)
            )
            for pos, st in zip(
                positions[said].tolist(), itertools.compress(statuses, said), strict=True
            ):
                found[pos] = st
            keep = np.ones(len(undecided), dtype=np.bool_)
            keep[picked[said]] = False
            undecided = undecided[keep]
        for pos in undecided.tolist():
            found[pos] = _mismatch(infos[rows[pos]].name)
        decided = cast("list[Status]", found)  # every position is decided now
        diagnosis.node_to_status.update(zip([infos[r].name for r in rows], decided, strict=True))
        for st in distinct(decided):
            _record_rejector(diagnosis, st)


def _filter_statuses(
    fwk: Framework,
    p: FilterPlugin,
    state: CycleState,
    pod: Pod,
    snap: Snapshot,
    rows: npt.NDArray[np.intp],
    masked: bool,
) -> Sequence[Status | None]:
    """``p``'s Filter status on each of ``rows``: at once if it can say (a vector plugin
    whose mask rejected them), else node by node."""
    if masked and implements(p, VectorDiagnosePlugin):
        try:
            got = p.filter_statuses(state, pod, snap, rows)
        except Exception as e:  # a plugin bug must not crash the loop
            return [Status.as_error(e, plugin=p.name)] * len(rows)
        if got is not None:
            firsts = dict(zip(map(id, got), got, strict=True)).values()  # one per status
            if any(st is not None and st.plugin != p.name for st in firsts):
                got = [st if st is None else st.with_plugin(p.name) for st in got]
            return got
    infos = snap.node_infos
    return [fwk.run_scalar_filters([p], state, pod, infos[row]) for row in rows.tolist()]


def _mismatch(node: str) -> Status:
    # The mask said no but the plugin said yes: a vector/scalar mismatch.
    return Status.as_error(f"filter mask and filter disagree on node {node}")


class _StatusError(Exception):
    def __init__(self, status: Status) -> None:
        super().__init__(status.message())
        self.status = status


def _fits_nominated_node(fwk: Framework, state: CycleState, pod: Pod, nom: NodeInfo) -> bool:
    """Whether the pod's nominated node (from an earlier preemption) still fits; it is
    tried before any other node, with Filter alone, whatever nodes PreFilter narrowed the
    cycle to (kube-scheduler's evaluateNominatedNode)."""
    st = fwk.run_filter_plugins_with_nominated_pods(state, pod, nom)
    if st is not None and st.code == Code.ERROR:
        raise _StatusError(st)
    return st is None


def _candidates(
    snap: Snapshot, allowed: set[str] | None, narrowing: list[str], diagnosis: Diagnosis
) -> npt.NDArray[np.intp]:
    """The rows Filter examines, in index order: all nodes, or those PreFilter allows
    (the others are recorded in ``diagnosis`` as unresolvable)."""
    if allowed is None:
        return np.arange(len(snap), dtype=np.intp)
    rows = sorted(snap.by_name[n].index for n in allowed if n in snap.by_name)
    absent = Status.unresolvable(f"node(s) didn't satisfy plugin(s) {go_list(sorted(narrowing))}")
    for ni in snap.node_infos:
        if ni.name not in allowed:
            diagnosis.node_to_status[ni.name] = absent
    return np.array(rows, dtype=np.intp)


def _scan(
    fwk: Framework,
    state: CycleState,
    pod: Pod,
    snap: Snapshot,
    order: npt.NDArray[np.intp],
    combined: npt.NDArray[np.bool_] | None,
    scalar: list[Any],
    nominated_rows: set[int],
    to_find: int,
    failed: dict[int, Status],
) -> tuple[npt.NDArray[np.intp], int]:
    """Walks ``order`` (candidates from the rotating offset) until ``to_find`` nodes fit:
    (the feasible rows, how many positions of ``order`` were examined). Nodes the vector
    mask ``combined`` rejects are skipped; scalar filters (and, on nodes with nominated
    pods, the whole Filter with them) run only on the rest, and ``failed`` gets the
    status of each of those that failed."""
    n = len(order)
    passing_positions = (
        np.arange(n, dtype=np.intp) if combined is None else np.flatnonzero(combined[order])
    )
    if not scalar and not nominated_rows:
        take = passing_positions[:to_find]
        return order[take], (int(take[-1]) if len(take) == to_find else n - 1) + 1
    feasible: list[int] = []
    infos = snap.node_infos
    for pos in passing_positions:
        row = int(order[pos])
        if row in nominated_rows:
            st = fwk.run_nominated_passes_after_mask(state, pod, infos[row], scalar)
        elif scalar:
            st = fwk.run_scalar_filters(scalar, state, pod, infos[row])
        else:
            st = None
        if st is None:
            feasible.append(row)
            if len(feasible) == to_find:
                return np.array(feasible, dtype=np.intp), int(pos) + 1
        elif st.code == Code.ERROR:
            raise _StatusError(st)
        else:
            failed[row] = st
    return np.array(feasible, dtype=np.intp), n


def _record_rejector(diagnosis: Diagnosis, st: Status) -> None:
    if st.plugin:
        if st.code == Code.PENDING:
            diagnosis.pending_plugins.add(st.plugin)
        else:
            diagnosis.unschedulable_plugins.add(st.plugin)


def _nominated_nodes(fwk: Framework, snap: Snapshot, pod: Pod) -> list[str]:
    """Nodes holding nominated pods that this pod must leave room for."""
    return [
        nm for nm in fwk.services.nominated_nodes_for(pod.priority, pod.uid) if nm in snap.by_name
    ]


def _score_and_store(
    fwk: Framework,
    state: CycleState,
    pod: Pod,
    snap: Snapshot,
    rows: npt.NDArray[np.intp],
    batch: OpportunisticBatch,
) -> tuple[npt.NDArray[np.int64], Status | None]:
    """Score as ``run_score`` does, keeping the raw scores for the batch."""
    raw, s = fwk.run_raw_score(state, pod, snap, rows)
    if s is not None:
        return np.zeros(len(rows), dtype=np.int64), s
    kept = {k: v.copy() for k, v in raw.items()}
    total, _, s = fwk.normalize_scores(state, pod, raw, len(rows))
    if s is None:
        batch.store(fwk, snap, state, rows, kept)
    return total, s


StatusError = _StatusError
