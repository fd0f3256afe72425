"""Opportunistic batching (KEP-5598): reuse one pod's Filter and Score work for the next
pod of the same signature.

After a full cycle (Filter over the sampled window, Score) for a signable pod, the batch
keeps the feasible rows, each Score plugin's *raw* scores for them and each node's
``NodeInfo.generation``. When the next cycle's pod has the same signature (and nothing
else was scheduled in between, the last pod was placed, the pod has no nominated node,
no pod is nominated anywhere, the node set and labels are unchanged, the batch is under
0.5 s old and has given fewer hints than it had candidates), only the rows whose node
changed since -- the node the last pod went to, nodes whose pods were confirmed or
deleted -- are filtered and scored again (after a PreScore over the candidates). The raw
scores of all candidates are then normalized afresh and the best one is the pod's node.

Compared with kube-scheduler v1.37.2 (``framework/runtime/batch.go``), which re-checks
only the previously chosen node and keeps the other candidates' normalized totals (a
ranking that can drift from a fresh one once the chosen node leaves or rescales a
plugin's normalization), this re-normalizes every time, so a hinted placement equals
the one a full cycle over the same candidates would make. What neither sees: a node
*outside* the candidates that changed (a pod deleted from a full node) until the batch
ends (0.5 s, or its hint budget).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import overload

import numpy as np
import numpy.typing as npt
from prometheus_client import CollectorRegistry, Counter, Histogram

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.runtime import Framework
from kubesched.framework.signature import PodSigner, signing_plugins
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.types import Node, Pod
from kubesched.scheduler.select_host import heap_winner
from kubesched.scheduler.signers import plugin_signer

__all__ = ["MAX_BATCH_AGE", "BatchMetrics", "OpportunisticBatch"]

MAX_BATCH_AGE = 0.5
"""Seconds a batch lives (kube-scheduler's ``maxBatchAge``)."""

# batch_attempts_total results and batch_cache_flushed_total reasons (kube-scheduler's).
HINT_USED = "hint_used"
NO_HINT = "no_hint"
POD_FAILED = "pod_failed"
POD_SKIPPED = "pod_skipped"
POD_NOMINATED = "pod_nominated"
NODE_MISSING = "node_missing"
EMPTY_LIST = "empty_list"
EXPIRED = "expired"
POD_INCOMPATIBLE = "pod_incompatible"
POD_NOT_BATCHABLE = "pod_not_batchable"
FILTER_ERROR = "filter_error"
PRESCORE_ERROR = "prescore_error"
RESCORE_ERROR = "rescore_error"
NORMALIZE_ERROR = "normalize_error"
CLUSTER_CHANGED = "cluster_changed"
"""kubesched's: a pod with (anti-)affinity terms came or went, or a node's images changed:
other nodes' verdicts or scores may have moved too."""

_BUCKETS = [0.00001 * 2**i for i in range(12)]


class BatchMetrics:
    """kube-scheduler's batching metrics (names, labels and buckets)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.attempts = Counter(
            "scheduler_batch_attempts",
            "Counts of results when we attempt to use batching.",
            ["profile", "result"],
            registry=registry,
        )
        self.flushed = Counter(
            "scheduler_batch_cache_flushed",
            "Counts of cache flushes by reason.",
            ["profile", "reason"],
            registry=registry,
        )
        self.rescore_attempts = Counter(
            "scheduler_batch_rescore_attempts",
            "Counts of rescore attempts during opportunistic batching.",
            ["profile"],
            registry=registry,
        )
        self.hint_duration = Histogram(
            "scheduler_get_node_hint_duration_seconds",
            "Latency for getting a node hint.",
            ["hinted", "profile"],
            buckets=_BUCKETS,
            registry=registry,
        )
        self.store_duration = Histogram(
            "scheduler_store_schedule_results_duration_seconds",
            "Latency for storing scheduling results.",
            ["profile"],
            buckets=_BUCKETS,
            registry=registry,
        )
        self.rescore_duration = Histogram(
            "scheduler_batch_rescore_duration_seconds",
            "Latency for rescoring a node during opportunistic batching.",
            ["profile"],
            buckets=_BUCKETS,
            registry=registry,
        )


SCALAR_RESCORE_MAX = 8
"""Rescore up to this many nodes with the per-node ``score`` (a vector call's fixed cost
is higher for a handful of rows)."""


@dataclass(slots=True)
class _Cached:
    signature: bytes
    fwk: Framework
    labels_version: int
    rows: npt.NDArray[np.intp]
    """The candidates: rows that passed Filter, in the order they were scored."""
    pos: npt.NDArray[np.intp]
    """Row -> its position in ``rows`` (-1: not a candidate), for every node row."""
    raw: dict[str, npt.NDArray[np.int64]]
    """Each Score plugin's raw scores of ``rows``."""
    gens: npt.NDArray[np.int64]
    """Every row's node generation when ``rows``/``raw`` were last brought up to date."""
    skip_score: frozenset[str]
    created: float
    hints_left: int
    affinity: dict[int, tuple[str, ...]]
    """Row -> uids of the pods with (anti-)affinity terms on it (rows with none left out):
    those terms reach across nodes (InterPodAffinity), so a change flushes the batch."""
    nodes: list[Node | None]
    """Each row's Node object (a node's images feed ImageLocality's spread elsewhere)."""


class _Rows(Sequence[NodeInfo]):
    """The candidates' NodeInfos for PreScore, listed only if a plugin reads them (the
    in-tree ones that do, PodTopologySpread, skip pods that have a signature)."""

    def __init__(self, infos: list[NodeInfo], rows: npt.NDArray[np.intp]) -> None:
        self._infos = infos
        self._rows = rows

    def __len__(self) -> int:
        return len(self._rows)

    @overload
    def __getitem__(self, i: int) -> NodeInfo: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[NodeInfo]: ...
    def __getitem__(self, i: int | slice) -> NodeInfo | Sequence[NodeInfo]:
        if isinstance(i, slice):
            return [self._infos[r] for r in self._rows[i].tolist()]
        return self._infos[int(self._rows[i])]

    def __iter__(self) -> Iterator[NodeInfo]:
        infos = self._infos
        return (infos[r] for r in self._rows.tolist())


class OpportunisticBatch:
    """One profile's batch. The scheduler calls :meth:`begin` before the algorithm and
    :meth:`finish` after Reserve/Permit; the algorithm calls :meth:`hint` after PreFilter
    and :meth:`store` (or :meth:`store_single`) once it has chosen a node."""

    def __init__(self, profile: str, metrics: BatchMetrics) -> None:
        self.profile = profile
        self.metrics = metrics
        self._hint_used = metrics.attempts.labels(profile, HINT_USED)
        self._no_hint = metrics.attempts.labels(profile, NO_HINT)
        self._hint_seconds = metrics.hint_duration.labels("hint", profile)
        self._no_hint_seconds = metrics.hint_duration.labels("no_hint", profile)
        self._store_seconds = metrics.store_duration.labels(profile)
        self._rescores = metrics.rescore_attempts.labels(profile)
        self._rescore_seconds = metrics.rescore_duration.labels(profile)
        self.cached: _Cached | None = None
        self.signature: bytes | None = None
        """This cycle's pod's signature (None: unbatchable)."""
        self.hinted = False
        """Whether this cycle's node came from the batch."""
        self.batched_pods = 0
        self._cycle = -1
        self._last_cycle = -2
        self._last_succeeded = False
        self._signer: tuple[object, PodSigner] | None = None

    # -- the scheduler's side -----------------------------------------------------------------
    def begin(self, fwk: Framework, pod: Pod, cycle: int) -> None:
        chain = fwk.chain
        if self._signer is None or self._signer[0] is not chain:
            self._signer = (chain, PodSigner(signing_plugins(chain), plugin_signer))
        self.signature = self._signer[1].sign(pod)
        self.hinted = False
        self._cycle = cycle

    def finish(self, succeeded: bool) -> None:
        self._last_cycle = self._cycle
        self._last_succeeded = succeeded
        if self.hinted and succeeded:
            self.batched_pods += 1
            self._hint_used.inc()
        if not succeeded and self.cached is not None:
            self._flush(POD_FAILED)

    # -- the algorithm's side -------------------------------------------------------------------
    def hint(self, fwk: Framework, state: CycleState, pod: Pod, snap: Snapshot) -> int | None:
        """The row of the node to place the pod on, or None (run the full cycle)."""
        t0 = time.perf_counter()
        row = self._hint(fwk, state, pod, snap)
        self.hinted = row is not None
        if row is None:
            self._no_hint.inc()
        seconds = self._hint_seconds if self.hinted else self._no_hint_seconds
        seconds.observe(time.perf_counter() - t0)
        return row

    def _usable(self, fwk: Framework, pod: Pod, snap: Snapshot) -> _Cached | None:
        c = self.cached
        if c is None:
            return None
        reason = ""
        if self._cycle != self._last_cycle + 1:
            reason = POD_SKIPPED
        elif not self._last_succeeded:
            reason = POD_FAILED
        elif pod.nominated_node_name or fwk.services.nominated_nodes():
            reason = POD_NOMINATED
        elif self.signature is None or self.signature != c.signature:
            reason = POD_INCOMPATIBLE
        elif c.hints_left <= 0 or fwk.now() - c.created > MAX_BATCH_AGE:
            reason = EXPIRED
        elif c.fwk is not fwk or c.labels_version != snap.labels_version:
            reason = NODE_MISSING
        if reason:
            self._flush(reason)
            return None
        return c

    def _hint(self, fwk: Framework, state: CycleState, pod: Pod, snap: Snapshot) -> int | None:
        c = self._usable(fwk, pod, snap)
        if c is None:
            return None
        if snap.any_pods_with_affinity():
            # Placed pods with (anti-)affinity terms score every node of their topology
            # domains, not only their own: a node's score can move while its generation
            # does not (the property test found stale InterPodAffinity scores reused), so
            # no hint while any exist.
            self._flush(CLUSTER_CHANGED)
            return None
        changed = np.flatnonzero(snap.node_generation != c.gens)
        if len(changed) and not self._refresh(fwk, state, pod, snap, c, changed):
            return None
        rows = c.rows
        c.hints_left -= 1
        if len(rows) == 1:
            return int(rows[0])
        copies = {k: v.copy() for k, v in c.raw.items()}
        total, _, s = fwk.normalize_scores(state, pod, copies, len(rows))
        if s is not None:
            self._flush(NORMALIZE_ERROR)
            return None
        # the candidates keep the full cycle's feasible order: ties go as kube-scheduler's
        # heap would send them (select_host)
        return int(rows[heap_winner(total)])

    def _refresh(
        self,
        fwk: Framework,
        state: CycleState,
        pod: Pod,
        snap: Snapshot,
        c: _Cached,
        changed: npt.NDArray[np.intp],
    ) -> bool:
        """Filter the nodes that changed since the candidates were scored (the last pod's
        node among them) again: drop the ones that no longer fit, add the ones that now
        do, and score the fitting ones afresh. False: the batch was flushed."""
        infos = snap.node_infos
        for r in changed.tolist():
            ni = infos[r]
            node, was = ni.node, c.nodes[r]
            if tuple(p.uid for p in ni.pods_with_affinity) != c.affinity.get(r, ()) or (
                node is not was and (node is None or was is None or node.images != was.images)
            ):
                self._flush(CLUSTER_CHANGED)
                return False
            c.nodes[r] = node
        fits: list[int] = []
        added: list[int] = []
        dropped: list[int] = []
        for r, p in zip(changed.tolist(), c.pos[changed].tolist(), strict=True):
            st = fwk.run_filter(state, pod, infos[r])
            if st is not None and not st.is_rejected():
                self._flush(FILTER_ERROR)
                return False
            if st is None:
                fits.append(r)
                if p < 0:
                    added.append(r)
            elif p >= 0:
                dropped.append(p)
        rows, raw, pos = c.rows, c.raw, c.pos
        if added or dropped:
            keep = np.ones(len(rows), dtype=bool)
            keep[dropped] = False
            extra = np.array(added, dtype=np.intp)
            rows = np.concatenate((rows[keep], extra))
            raw = {
                k: np.concatenate((v[keep], np.zeros(len(extra), dtype=np.int64)))
                for k, v in raw.items()
            }
            pos = _positions(len(infos), rows)
        if len(rows) == 0:
            self._flush(EMPTY_LIST)
            return False
        if fits and len(rows) > 1:
            refresh = pos[np.array(fits, dtype=np.intp)]
            if not self._rescore(fwk, state, pod, snap, c, rows, raw, refresh):
                return False
        c.pos = pos
        c.rows, c.raw, c.gens = rows, raw, snap.node_generation.copy()
        return True

    def _rescore(
        self,
        fwk: Framework,
        state: CycleState,
        pod: Pod,
        snap: Snapshot,
        c: _Cached,
        rows: npt.NDArray[np.intp],
        raw: dict[str, npt.NDArray[np.int64]],
        refresh: npt.NDArray[np.intp],
    ) -> bool:
        """PreScore over the candidates, then fresh raw scores for ``refresh`` positions."""
        t0 = time.perf_counter()
        self._rescores.inc()
        try:
            if fwk.run_pre_score(state, pod, _Rows(snap.node_infos, rows)) is not None:
                self._flush(PRESCORE_ERROR)
                return False
            if frozenset(state.skip_score_plugins) != c.skip_score:
                self._flush(PRESCORE_ERROR)
                return False
            fresh, s = fwk.run_raw_score(
                state, pod, snap, rows[refresh], scalar=len(refresh) <= SCALAR_RESCORE_MAX
            )
            if s is not None or fresh.keys() != raw.keys():
                self._flush(RESCORE_ERROR)
                return False
            for k, v in fresh.items():
                raw[k][refresh] = v
            return True
        finally:
            self._rescore_seconds.observe(time.perf_counter() - t0)

    def store(
        self,
        fwk: Framework,
        snap: Snapshot,
        state: CycleState,
        rows: npt.NDArray[np.intp],
        raw: dict[str, npt.NDArray[np.int64]],
    ) -> None:
        """A full cycle scored ``rows`` (``raw``: copies of the raw scores)."""
        t0 = time.perf_counter()
        if self.signature is None:
            self._flush(POD_NOT_BATCHABLE)
        else:
            self.cached = _Cached(
                signature=self.signature,
                fwk=fwk,
                labels_version=snap.labels_version,
                rows=rows,
                pos=_positions(len(snap.node_infos), rows),
                raw=raw,
                gens=snap.node_generation.copy(),
                skip_score=frozenset(state.skip_score_plugins),
                created=fwk.now(),
                hints_left=len(rows),
                affinity={
                    ni.index: tuple(p.uid for p in ni.pods_with_affinity)
                    for ni in snap.have_pods_with_affinity()
                },
                nodes=[ni.node for ni in snap.node_infos],
            )
        self._store_seconds.observe(time.perf_counter() - t0)

    def store_single(self) -> None:
        """The cycle found one feasible node (or the batch's hint): nothing to keep unless
        the node was the batch's own."""
        if not self.hinted:
            self._flush(EMPTY_LIST if self.signature is not None else POD_NOT_BATCHABLE)

    def _flush(self, reason: str) -> None:
        if self.cached is not None:
            self.metrics.flushed.labels(self.profile, reason).inc()
            self.cached = None


def _positions(n: int, rows: npt.NDArray[np.intp]) -> npt.NDArray[np.intp]:
    """Row -> its position in ``rows``, -1 for the ``n`` rows not in it."""
    pos = np.full(n, -1, dtype=np.intp)
    pos[rows] = np.arange(len(rows))
    return pos
