"""The Framework runs a profile's chain with kube-scheduler's rules; tiny fake plugins
record what ran, so each test pins one rule a user would see in the pod's fate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import PreFilterResult
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.runtime import Framework, FrameworkServices, PluginChain
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Pod
from tests.builders import make_node, make_pod

Calls = list[str]


# -- fake plugins ------------------------------------------------------------------------------
class FakeFilter:
    """Filter that rejects the nodes in ``reject`` (and optionally PreFilter-skips)."""

    def __init__(
        self,
        name: str,
        calls: Calls,
        reject: Sequence[str] = (),
        pre: Status | None = None,
        nodes: set[str] | None = None,
        code: Code = Code.UNSCHEDULABLE,
    ) -> None:
        self.name = name
        self.calls = calls
        self.reject = set(reject)
        self.pre = pre
        self.nodes = nodes
        self.code = code

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        self.calls.append(f"{self.name}.pre_filter")
        result = PreFilterResult(set(self.nodes)) if self.nodes is not None else None
        return result, self.pre

    def pre_filter_extensions(self) -> None:
        return None

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        self.calls.append(f"{self.name}.filter({node_info.name})")
        if node_info.name in self.reject:
            return Status(self.code, f"{self.name} rejects {node_info.name}")
        return None


class FakeScore:
    def __init__(
        self,
        name: str,
        scores: dict[str, int],
        normalize: bool = False,
        pre: Status | None = None,
        vector: bool = False,
    ) -> None:
        self.name = name
        self.scores = scores
        self.normalize = normalize
        self.pre = pre
        if vector:
            self.score_vector = self._score_vector

    def pre_score(self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]) -> Status | None:
        return self.pre

    def score(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> tuple[int, Status | None]:
        return self.scores[node_info.name], None

    def _score_vector(
        self, state: CycleState, pod: Pod, snapshot: Snapshot, rows: npt.NDArray[np.intp]
    ) -> npt.NDArray[np.int64]:
        names = [snapshot.node_infos[int(r)].name for r in rows]
        return np.array([self.scores[n] for n in names], dtype=np.int64)

    def normalize_score(
        self, state: CycleState, pod: Pod, scores: npt.NDArray[np.int64]
    ) -> Status | None:
        if self.normalize:
            top = int(scores.max())
            scores[:] = scores * 100 // top if top else 0
        return None


class FakeReserve:
    def __init__(self, name: str, calls: Calls, fail: bool = False) -> None:
        self.name = name
        self.calls = calls
        self.fail = fail

    def reserve(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        self.calls.append(f"{self.name}.reserve")
        return Status.unschedulable("no room") if self.fail else None

    def unreserve(self, state: CycleState, pod: Pod, node_name: str) -> None:
        self.calls.append(f"{self.name}.unreserve")
        if self.fail:
            raise RuntimeError("unreserve must not stop the rollback")


class FakePermit:
    def __init__(self, name: str, status: Status | None, timeout: float = 0.0) -> None:
        self.name = name
        self.status = status
        self.timeout = timeout

    def permit(self, state: CycleState, pod: Pod, node_name: str) -> tuple[Status | None, float]:
        return self.status, self.timeout


class FakeBinder:
    def __init__(self, name: str, calls: Calls, status: Status | None) -> None:
        self.name = name
        self.calls = calls
        self.status = status

    async def bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        self.calls.append(f"{self.name}.bind({node_name})")
        return self.status


# -- helpers -------------------------------------------------------------------------------
def framework(services: FrameworkServices | None = None, **points: Any) -> Framework:
    fwk = Framework("test", services)
    fwk.set_chain(PluginChain(**points), {})
    return fwk


def nodes(*names: str) -> list[NodeInfo]:
    return [make_node(n).info() for n in names]


POD = make_pod("p").pod()


# -- PreFilter / Filter --------------------------------------------------------------------------
def test_first_failing_filter_wins_and_later_filters_do_not_run() -> None:
    calls: Calls = []
    fwk = framework(
        filter=[
            FakeFilter("A", calls),
            FakeFilter("B", calls, reject=["n1"]),
            FakeFilter("C", calls, reject=["n1"]),
        ]
    )
    st = fwk.run_filter(CycleState(), POD, nodes("n1")[0])
    assert st is not None
    assert (st.code, st.plugin, st.message()) == (Code.UNSCHEDULABLE, "B", "B rejects n1")
    assert calls == ["A.filter(n1)", "B.filter(n1)"]


def test_prefilter_skip_skips_that_plugins_filter() -> None:
    calls: Calls = []
    skipper = FakeFilter("Skipper", calls, reject=["n1"], pre=Status.skip())
    fwk = framework(pre_filter=[skipper], filter=[skipper, FakeFilter("Other", calls)])
    state = CycleState()
    _, st, _ = fwk.run_pre_filter(state, POD, nodes("n1"))
    assert st is None
    assert fwk.run_filter(state, POD, nodes("n1")[0]) is None
    assert calls == ["Skipper.pre_filter", "Other.filter(n1)"]


PREFILTER_RESULTS: list[tuple[str, list[set[str] | None], set[str] | None, str]] = [
    ("all-nodes", [None, None], None, ""),
    ("one-narrows", [{"a", "b"}, None], {"a", "b"}, ""),
    ("intersection", [{"a", "b"}, {"b", "c"}], {"b"}, ""),
    ("one-empty", [set(), None], set(), "node(s) didn't satisfy plugin P0"),
    (
        "disjoint",
        [{"a"}, {"b"}],
        set(),
        "node(s) didn't satisfy plugin(s) [P0 P1] simultaneously",
    ),
]


@pytest.mark.parametrize(
    ("results", "expected", "message"),
    [c[1:] for c in PREFILTER_RESULTS],
    ids=[c[0] for c in PREFILTER_RESULTS],
)
def test_prefilter_results_merge_by_intersection(
    results: list[set[str] | None], expected: set[str] | None, message: str
) -> None:
    fwk = framework(pre_filter=[FakeFilter(f"P{i}", [], nodes=r) for i, r in enumerate(results)])
    res, st, _ = fwk.run_pre_filter(CycleState(), POD, nodes("a", "b", "c"))
    assert (res.node_names if res is not None else None) == expected
    if message:
        assert st is not None
        assert (st.code, st.message()) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, message)
    else:
        assert st is None


def test_prefilter_unschedulable_still_runs_the_remaining_prefilters() -> None:
    # kube-scheduler runs them all (kubernetes#119770): preemption needs their state.
    calls: Calls = []
    fwk = framework(
        pre_filter=[
            FakeFilter("First", calls, pre=Status.unschedulable("not yet")),
            FakeFilter("Second", calls),
        ]
    )
    _, st, _ = fwk.run_pre_filter(CycleState(), POD, nodes("n1"))
    assert st is not None and (st.code, st.plugin, st.message()) == (
        Code.UNSCHEDULABLE,
        "First",
        "not yet",
    )
    assert calls == ["First.pre_filter", "Second.pre_filter"]


def test_prefilter_unresolvable_stops_at_once() -> None:
    calls: Calls = []
    fwk = framework(
        pre_filter=[
            FakeFilter("First", calls, pre=Status.unresolvable("never")),
            FakeFilter("Second", calls),
        ]
    )
    _, st, _ = fwk.run_pre_filter(CycleState(), POD, nodes("n1"))
    assert st is not None and (st.code, st.plugin) == (Code.UNSCHEDULABLE_AND_UNRESOLVABLE, "First")
    assert calls == ["First.pre_filter"]


class PodCountFilter:
    """Fits at most ``limit`` pods per node (to see nominated pods counted)."""

    name = "PodCount"

    def __init__(self, limit: int) -> None:
        self.limit = limit

    def filter(self, state: CycleState, pod: Pod, node_info: NodeInfo) -> Status | None:
        if len(node_info.pods) >= self.limit:
            return Status.unschedulable("Too many pods")
        return None


@pytest.mark.parametrize(
    ("nominated_priority", "fits"),
    [(10, False), (5, False), (1, True)],
    ids=["higher-priority-nominated-counts", "equal-priority-counts", "lower-priority-ignored"],
)
def test_filter_with_nominated_pods_counts_equal_or_higher_priority(
    nominated_priority: int, fits: bool
) -> None:
    nominated = make_pod("nom").priority(nominated_priority).pod()
    services = FrameworkServices(nominated_pods_for_node=lambda name: [nominated])
    fwk = framework(services, filter=[PodCountFilter(limit=1)])
    pod = make_pod("p").priority(5).pod()
    st = fwk.run_filter_plugins_with_nominated_pods(CycleState(), pod, nodes("n1")[0])
    assert (st is None) is fits
    if st is not None:
        assert st.message() == "Too many pods"


class RefusingAddPod:
    """A PreFilter plugin with an extension whose AddPod refuses every pod."""

    name = "Refusing"

    def pre_filter(
        self, state: CycleState, pod: Pod, nodes: Sequence[NodeInfo]
    ) -> tuple[PreFilterResult | None, Status | None]:
        return None, None

    def pre_filter_extensions(self) -> RefusingAddPod:
        return self

    def add_pod(self, state: CycleState, pod: Pod, other: Pod, node_info: NodeInfo) -> Status:
        return Status.unschedulable(f"cannot account for {other.name}")

    def remove_pod(self, state: CycleState, pod: Pod, other: Pod, node_info: NodeInfo) -> None:
        return None


def test_an_add_pod_that_fails_on_a_nominated_pod_is_an_error_on_that_node() -> None:
    """As kube's addGENominatedPods: the node is not filtered without the nominated pods
    (which would let the pod take their room); the AddPod's failure is the Error."""
    nominated = make_pod("nom").priority(10).pod()
    services = FrameworkServices(nominated_pods_for_node=lambda name: [nominated])
    fwk = framework(services, pre_filter=[RefusingAddPod()], filter=[PodCountFilter(limit=5)])
    state = CycleState()
    _, st, _ = fwk.run_pre_filter(state, POD, nodes("n1"))
    assert st is None
    st = fwk.run_filter_plugins_with_nominated_pods(state, POD, nodes("n1")[0])
    assert st is not None and (st.code, st.message()) == (
        Code.ERROR,
        'running AddPod on PreFilter plugin "Refusing": cannot account for nom',
    )


# -- Score ---------------------------------------------------------------------------------------
def test_scores_are_normalized_then_weighted_and_summed() -> None:
    snap = Snapshot(nodes("n1", "n2"))
    fwk = framework(
        score=[
            (FakeScore("Raw", {"n1": 10, "n2": 50}), 2),
            (FakeScore("Norm", {"n1": 3, "n2": 6}, normalize=True), 1),
            (FakeScore("Vec", {"n1": 40, "n2": 0}, vector=True), 3),
        ]
    )
    total, per_plugin, st = fwk.run_score(CycleState(), POD, snap, np.array([0, 1]))
    assert st is None
    assert per_plugin["Raw"].tolist() == [20, 100]
    assert per_plugin["Norm"].tolist() == [50, 100]
    assert per_plugin["Vec"].tolist() == [120, 0]
    assert total.tolist() == [190, 200]


def test_prescore_skip_skips_that_plugins_score() -> None:
    snap = Snapshot(nodes("n1", "n2"))
    fwk = framework(
        pre_score=[skipper := FakeScore("Skipped", {"n1": 1000, "n2": 1000}, pre=Status.skip())],
        score=[(skipper, 1), (FakeScore("Kept", {"n1": 1, "n2": 2}), 1)],
    )
    state = CycleState()
    assert fwk.run_pre_score(state, POD, snap.node_infos) is None
    total, per_plugin, st = fwk.run_score(state, POD, snap, np.array([0, 1]))
    assert st is None
    assert list(per_plugin) == ["Kept"]
    assert total.tolist() == [1, 2]


# -- Reserve / Permit ---------------------------------------------------------------------------
def test_reserve_failure_then_unreserve_runs_every_plugin_in_reverse() -> None:
    calls: Calls = []
    fwk = framework(
        reserve=[
            FakeReserve("R1", calls),
            FakeReserve("R2", calls, fail=True),
            FakeReserve("R3", calls),
        ]
    )
    st = fwk.run_reserve(CycleState(), POD, "n1")
    assert st is not None and (st.code, st.plugin, st.message()) == (
        Code.UNSCHEDULABLE,
        "R2",
        "no room",
    )
    fwk.run_unreserve(CycleState(), POD, "n1")
    assert calls == ["R1.reserve", "R2.reserve", "R3.unreserve", "R2.unreserve", "R1.unreserve"]


def test_permit_rejection_names_the_plugin_and_holds_nothing() -> None:
    fwk = framework(
        permit=[
            FakePermit("Wait", Status.wait(), 10),
            FakePermit("No", Status.unschedulable("full")),
        ]
    )
    st = fwk.run_permit(CycleState(), POD, "n1")
    assert st is not None and (st.code, st.plugin, st.message()) == (
        Code.UNSCHEDULABLE,
        "No",
        "full",
    )
    assert fwk.get_waiting_pod(POD.uid) is None


# -- Bind -----------------------------------------------------------------------------------------
BIND_CASES: list[tuple[str, list[Status | None], Code | None, list[str]]] = [
    ("first-binds", [None, None], None, ["B0.bind(n1)"]),
    ("skip-falls-through", [Status.skip(), None], None, ["B0.bind(n1)", "B1.bind(n1)"]),
    (
        "failure-stops",
        [Status.as_error("api down"), None],
        Code.ERROR,
        ["B0.bind(n1)"],
    ),
    (
        "all-skip-is-an-error",
        [Status.skip(), Status.skip()],
        Code.ERROR,
        ["B0.bind(n1)", "B1.bind(n1)"],
    ),
    ("no-binder-is-an-error", [], Code.ERROR, []),
]


@pytest.mark.parametrize(
    ("statuses", "code", "expected_calls"),
    [c[1:] for c in BIND_CASES],
    ids=[c[0] for c in BIND_CASES],
)
async def test_bind_chain(
    statuses: list[Status | None], code: Code | None, expected_calls: list[str]
) -> None:
    calls: Calls = []
    fwk = framework(bind=[FakeBinder(f"B{i}", calls, s) for i, s in enumerate(statuses)])
    st = await fwk.run_bind(CycleState(), POD, "n1")
    assert (st.code if st is not None else None) == code
    assert calls == expected_calls


class FakePreBind:
    def __init__(self, name: str, outcome: Status | Exception | None) -> None:
        self.name = name
        self.outcome = outcome

    async def pre_bind(self, state: CycleState, pod: Pod, node_name: str) -> Status | None:
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome


@pytest.mark.parametrize(
    ("outcome", "message"),
    [
        (Status.as_error("claim gone"), 'running PreBind plugin "P": claim gone'),
        (RuntimeError("api down"), 'running PreBind plugin "P": api down'),
        # a rejection is the plugin's own words (kube sets only its name)
        (Status.unschedulable("node(s) too full"), "node(s) too full"),
    ],
)
async def test_a_prebind_failure_reads_as_kube_schedulers(
    outcome: Status | Exception, message: str
) -> None:
    """The pod's condition and FailedScheduling event carry kube-scheduler's wording:
    ``running PreBind plugin "<name>": <error>`` for an error."""
    fwk = framework(pre_bind=[FakePreBind("P", outcome)])
    st = await fwk.run_pre_bind(CycleState(), POD, "n1")
    assert st is not None and st.message() == message and st.plugin == "P"


async def test_a_bind_error_names_the_bind_plugin_and_keeps_the_error() -> None:
    gone = RuntimeError('pods "p" not found')
    calls: Calls = []
    fwk = framework(bind=[FakeBinder("DefaultBinder", calls, Status.as_error(gone))])
    st = await fwk.run_bind(CycleState(), POD, "n1")
    assert st is not None and st.code == Code.ERROR and st.error is gone
    assert st.message() == 'running Bind plugin "DefaultBinder": pods "p" not found'
