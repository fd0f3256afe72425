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
from kubesched.framework.status import Code, Status, plugin_error, wrap_error
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
                s = Status.as_error(e)
            if s is None:
                continue
            if s.code == Code.SKIP:
                state.skip_score_plugins.add(p.name)
            elif s.code != Code.SUCCESS:
                # kube-scheduler: anything else, a rejection too, is an error here
                return plugin_error("PreScore", p.name, s)
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
            return _zero_total(len(rows), {}, s)
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
                            return raw, _score_error(p.name, s)
                        out[j] = v
                    scores = out
                else:
                    scores = np.asarray(scores, dtype=np.int64)
            except Exception as e:
                return raw, _score_error(p.name, Status.as_error(e))
            raw[p.name] = scores
        return raw, None

    def normalize_scores(
        self, state: CycleState, pod: Pod, raw: dict[str, npt.NDArray[np.int64]], n: int
    ) -> tuple[npt.NDArray[np.int64], dict[str, npt.NDArray[np.int64]], Status | None]:
        """NormalizeScore (in place on ``raw``'s arrays), then the range check and the
        weights, each over every plugin in turn as kube-scheduler's NormalizeScores does
        (and words their errors): the total per row and each plugin's weighted scores."""
        per_plugin: dict[str, npt.NDArray[np.int64]] = {}
        chain = [(p, w, raw[p.name]) for p, w in self.chain_for(state).score if p.name in raw]
        for p, _, scores in chain:
            normalize = getattr(p, "normalize_score", None)
            if normalize is None:
                continue
            try:
                s = normalize(state, pod, scores)
            except Exception as e:
                s = Status.as_error(e)
            if s is not None and s.code != Code.SUCCESS:
                prefix = f'running Normalize on Score plugins: plugin "{p.name}" failed with'
                return _zero_total(n, per_plugin, wrap_error(prefix, s, p.name))
        if not chain or n == 0:
            return _zero_total(n, per_plugin, None)
        matrix = np.array([scores for _, _, scores in chain])
        # one reduction for every bound of every plugin: a negative score viewed unsigned
        # is huge
        if int(matrix.view(np.uint64).max()) > MAX_NODE_SCORE:
            for p, _, scores in chain:
                if scores.max() > MAX_NODE_SCORE or scores.min() < 0:
                    bad = int(scores.max()) if scores.max() > MAX_NODE_SCORE else int(scores.min())
                    return _zero_total(
                        n,
                        per_plugin,
                        Status.as_error(
                            f'applying score defaultWeights on Score plugins: plugin "{p.name}" '
                            f"returns an invalid score {bad}, it should in the range of "
                            f"[0, {MAX_NODE_SCORE}] after normalizing",
                            plugin=p.name,
                        ),
                    )
        weighted = matrix * np.array([w for _, w, _ in chain], dtype=np.int64)[:, None]
        per_plugin = {p.name: weighted[i] for i, (p, _, _) in enumerate(chain)}
        return weighted.sum(axis=0), per_plugin, None


def _zero_total(
    n: int, per_plugin: dict[str, npt.NDArray[np.int64]], status: Status | None
) -> tuple[npt.NDArray[np.int64], dict[str, npt.NDArray[np.int64]], Status | None]:
    """What the Score phase returns without a total: zeros for the
    ``n`` rows, the weighted scores made so far, and the failure (or None)."""
    return np.zeros(n, dtype=np.int64), per_plugin, status


def _score_error(plugin: str, s: Status) -> Status:
    """A Score plugin's status other than Success, as kube-scheduler words it."""
    return wrap_error(f'running Score plugins: plugin "{plugin}" failed with', s, plugin)
