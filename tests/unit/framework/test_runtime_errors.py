"""A plugin's error at each extension point, worded as kube-scheduler 1.37's framework
words it (pkg/scheduler/framework/runtime/framework.go): what FailedScheduling says for
an attempt that ended in an error. Rejections keep their own words."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import PreFilterResult
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from tests.unit.framework.test_runtime import POD, FakeFilter, FakeScore, framework, nodes


@pytest.mark.parametrize("code", [Code.ERROR, Code.SKIP, Code.WAIT])
def test_a_filter_returning_a_non_rejection_code_is_an_error_naming_it(code: Code) -> None:
    # kube-scheduler's RunFilterPlugins: 'running "<plugin>" filter plugin: <error>' (what
    # FailedScheduling then says for the attempt)
    fwk = framework(filter=[FakeFilter("Boom", [], reject=["n1"], code=code)])
    st = fwk.run_filter(CycleState(), POD, nodes("n1")[0])
    assert st is not None
    assert (st.code, st.plugin, st.message()) == (
        Code.ERROR,
        "Boom",
        'running "Boom" filter plugin: Boom rejects n1',
    )


def test_a_filter_that_raises_is_an_error_worded_as_kube_schedulers() -> None:
    class Raising(FakeFilter):
        def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
            raise ValueError("the pool is being updated")

    fwk = framework(filter=[FakeFilter("A", []), Raising("Broken", [])])
    st = fwk.run_filter(CycleState(), POD, nodes("n1")[0])
    assert st is not None
    assert (st.code, st.plugin, st.message()) == (
        Code.ERROR,
        "Broken",
        'running "Broken" filter plugin: the pool is being updated',
    )
    assert isinstance(st.error, ValueError)


@pytest.mark.parametrize("bad", [101, -5], ids=["above-100", "negative"])
def test_a_score_out_of_range_is_an_error_naming_plugin_and_value(bad: int) -> None:
    snap = Snapshot(nodes("n1", "n2"))
    fwk = framework(score=[(FakeScore("Wild", {"n1": 50, "n2": bad}), 1)])
    _, _, st = fwk.run_score(CycleState(), POD, snap, np.array([0, 1]))
    assert st is not None
    assert (st.code, st.plugin) == (Code.ERROR, "Wild")
    assert st.message() == (
        'applying score defaultWeights on Score plugins: plugin "Wild" returns an invalid '
        f"score {bad}, it should in the range of [0, 100] after normalizing"
    )


class _Failing:
    """A plugin of every extension point whose ``point`` method returns ``status`` (or
    raises, with ``raises``)."""

    def __init__(self, name: str, point: str, status: Status, raises: bool = False) -> None:
        self.name, self.point, self.status, self.raises = name, point, status, raises

    def _answer(self, point: str) -> Status | None:
        if point != self.point:
            return None
        if self.raises:
            raise RuntimeError(self.status.message())
        return self.status

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        return None, self._answer("PreFilter")

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        return self._answer("PreScore")

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        return 0, self._answer("Score")

    def normalize_score(self, state: CycleState, pod: Pod, scores: Any) -> Status | None:
        return self._answer("Normalize")

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        return self._answer("Reserve")

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        pass

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        return self._answer("Permit"), 0.0


# kube-scheduler 1.37's framework (pkg/scheduler/framework/runtime/framework.go) wraps
# what a plugin returns that its extension point does not expect; FailedScheduling says it.
WRAPPED = [
    ("PreFilter", 'running PreFilter plugin "X": boom'),
    ("PreScore", 'running PreScore plugin "X": boom'),
    ("Score", 'running Score plugins: plugin "X" failed with: boom'),
    ("Normalize", 'running Normalize on Score plugins: plugin "X" failed with: boom'),
    ("Reserve", 'running Reserve plugin "X": boom'),
    ("Permit", 'running Permit plugin "X": boom'),
]


def _run_point(point: str, plugin: _Failing) -> Status | None:
    state = CycleState()
    infos = nodes("n1")
    if point == "PreFilter":
        return framework(pre_filter=[plugin]).run_pre_filter(state, POD, infos)[1]
    if point == "PreScore":
        return framework(pre_score=[plugin]).run_pre_score(state, POD, infos)
    if point in ("Score", "Normalize"):
        fwk = framework(score=[(plugin, 1)])
        return fwk.run_score(state, POD, Snapshot(infos), np.array([0]))[2]
    if point == "Reserve":
        return framework(reserve=[plugin]).run_reserve(state, POD, "n1")
    return framework(permit=[plugin]).run_permit(state, POD, "n1")


@pytest.mark.parametrize("raises", [False, True], ids=["returned", "raised"])
@pytest.mark.parametrize(("point", "message"), WRAPPED, ids=[w[0] for w in WRAPPED])
def test_a_plugin_error_reads_as_kube_schedulers_framework_words_it(
    point: str, message: str, raises: bool
) -> None:
    st = _run_point(point, _Failing("X", point, Status.as_error("boom"), raises=raises))
    assert st is not None
    assert (st.code, st.plugin, st.message()) == (Code.ERROR, "X", message)


@pytest.mark.parametrize("point", ["PreFilter", "Reserve", "Permit"])
def test_a_rejection_is_not_wrapped(point: str) -> None:
    st = _run_point(point, _Failing("X", point, Status.unresolvable("no room")))
    assert st is not None
    assert (st.code, st.plugin, st.message()) == (
        Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
        "X",
        "no room",
    )
