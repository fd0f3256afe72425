"""The Score phase of a :class:`~kubesched.framework.runtime.Framework`: PreScore, Score,
NormalizeScore and the weights, run with kube-scheduler's rules.

:class:`ScorePhase` is mixed into the Framework, which it runs on (its chain for the
cycle); it owns PreScore's skip set, each Score plugin's raw scores of the feasible nodes
(the vector form, ``score_vector``, one call for all rows where a plugin has one and the
caller does not ask for the per-node ``score``), NormalizeScore, the check that every
normalized score is in ``[0, MAX_NODE_SCORE]``, and the weighted total per node.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import MAX_NODE_SCORE
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod

if TYPE_CHECKING:
    from kubesched.framework.runtime import PluginChain, _Runnable

__all__ = ["ScorePhase"]


class ScorePhase:
    """PreScore, Score and NormalizeScore: methods of the Framework, which mixes them in."""

    if TYPE_CHECKING:  # what the Framework provides

        def chain_for(self, state: CycleState) -> PluginChain: ...

        def _runnable(self, state: CycleState) -> _Runnable: ...

    def run_pre_score(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> Status | None:
        for p in self.chain_for(state).pre_score:
            try:
                s: Status | None = p.pre_score(state, pod, nodes)
            except Exception as e:
                return Status.as_error(e, plugin=p.name)
            if s is None:
                continue
            if s.code == Code.SKIP:
                state.skip_score_plugins.add(p.name)
            elif s.code != Code.SUCCESS:
                return s.with_plugin(p.name)
        return None

    def run_score(
        self,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        rows: npt.NDArray[np.intp],
    ) -> tuple[npt.NDArray[np.int64], dict[str, npt.NDArray[np.int64]], Status | None]:
        """Weighted, normalized total per feasible row and per-plugin weighted scores."""
        raw, s = self.run_raw_score(state, pod, snapshot, rows)
        if s is not None:
            return np.zeros(len(rows), dtype=np.int64), {}, s
        return self.normalize_scores(state, pod, raw, len(rows))

    def run_raw_score(
        self,
        state: CycleState,
        pod: Pod,
        snapshot: Snapshot,
        rows: npt.NDArray[np.intp],
        *,
        scalar: bool = False,
    ) -> tuple[dict[str, npt.NDArray[np.int64]], Status | None]:
        """Each non-skipped Score plugin's scores of ``rows``, before normalization.
        ``scalar``: per-node ``score`` even where a vector form exists (cheaper for a
        few rows; the two agree, as the property tests pin)."""
        raw: dict[str, npt.NDArray[np.int64]] = {}
        infos = snapshot.node_infos
        skip = state.skip_score_plugins
        run = self._runnable(state)
        for p, _ in run.chain.score:
            if skip and p.name in skip:
                continue
            vector = None if scalar else run.vector_score[p.name]
            try:
                scores = (
                    vector.score_vector(state, pod, snapshot, rows) if vector is not None else None
                )
                if scores is None:
                    out = np.empty(len(rows), dtype=np.int64)
                    for j, r in enumerate(rows):
                        v, s = p.score(state, pod, infos[r])
                        if s is not None and s.code != Code.SUCCESS:
                            return raw, s.with_plugin(p.name)
                        out[j] = v
                    scores = out
                else:
                    scores = np.asarray(scores, dtype=np.int64)
            except Exception as e:
                return raw, Status.as_error(e, plugin=p.name)
            raw[p.name] = scores
        return raw, None

    def normalize_scores(
        self, state: CycleState, pod: Pod, raw: dict[str, npt.NDArray[np.int64]], n: int
    ) -> tuple[npt.NDArray[np.int64], dict[str, npt.NDArray[np.int64]], Status | None]:
        """NormalizeScore (in place on ``raw``'s arrays), range check and weights: the
        total per row and each plugin's weighted scores."""
        total = np.zeros(n, dtype=np.int64)
        per_plugin: dict[str, npt.NDArray[np.int64]] = {}
        for p, weight in self.chain_for(state).score:
            scores = raw.get(p.name)
            if scores is None:
                continue
            normalize = getattr(p, "normalize_score", None)
            if normalize is not None:
                try:
                    s = normalize(state, pod, scores)
                except Exception as e:
                    return total, per_plugin, Status.as_error(e, plugin=p.name)
                if s is not None and s.code != Code.SUCCESS:
                    return total, per_plugin, s.with_plugin(p.name)
            if len(scores) and (scores.max() > MAX_NODE_SCORE or scores.min() < 0):
                bad = int(scores.max()) if scores.max() > MAX_NODE_SCORE else int(scores.min())
                return (
                    total,
                    per_plugin,
                    Status.as_error(
                        f'plugin "{p.name}" returns an invalid score {bad}, it should in the '
                        f"range of [0, {MAX_NODE_SCORE}] after normalizing",
                        plugin=p.name,
                    ),
                )
            weighted = scores * weight
            per_plugin[p.name] = weighted
            total += weighted
        return total, per_plugin, None
