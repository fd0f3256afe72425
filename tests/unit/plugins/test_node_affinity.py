from __future__ import annotations

from typing import Any

import numpy as np
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kubesched.framework.cycle_state import CycleState
from kubesched.framework.interface import ActionType, ClusterEvent, EventResource
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.snapshot import Snapshot
from kubesched.framework.status import Code, Status
from kubesched.framework.types import Node, Pod
from kubesched.plugins import node_affinity
from tests.builders import NodeBuilder, make_node, make_pod
from tests.unit.plugins.fakes import FakeHandle

POD_REASON = "node(s) didn't match Pod's node affinity/selector"
ENFORCED_REASON = "node(s) didn't match scheduler-enforced node affinity"


def plugin(args: dict[str, Any] | None = None) -> node_affinity.NodeAffinity:
    return node_affinity.new(node_affinity.Args.model_validate(args or {}), FakeHandle())


def req(op: str, key: str = "zone", *values: str) -> dict[str, Any]:
    r: dict[str, Any] = {"key": key, "operator": op}
    if values:
        r["values"] = list(values)
    return r


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}
        }
    }


def preferred(*terms: tuple[int, dict[str, Any]]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": w, "preference": p} for w, p in terms
            ]
        }
    }


def run_filter(pl: node_affinity.NodeAffinity, pod: Pod, node: NodeInfo) -> Status | None:
    state = CycleState()
    _, s = pl.pre_filter(state, pod, [node])
    if s is not None:
        return None if s.is_skip() else s
    return pl.filter(state, pod, node)


ZONE_A = make_node("n1").label("zone", "a").label("cores", "8")

FILTER_CASES = [
    pytest.param(make_pod("p").pod(), ZONE_A, None, id="nothing-required"),
    pytest.param(make_pod("p").node_selector(zone="a").pod(), ZONE_A, None, id="selector-match"),
    pytest.param(
        make_pod("p").node_selector(zone="b").pod(), ZONE_A, POD_REASON, id="selector-mismatch"
    ),
    pytest.param(
        make_pod("p").node_selector(zone="a", disk="ssd").pod(),
        ZONE_A,
        POD_REASON,
        id="selector-all-labels-needed",
    ),
    pytest.param(
        make_pod("p").affinity(required({"matchExpressions": [req("In", "zone", "a", "b")]})).pod(),
        ZONE_A,
        None,
        id="in",
    ),
    pytest.param(
        make_pod("p").affinity(required({"matchExpressions": [req("NotIn", "zone", "a")]})).pod(),
        ZONE_A,
        POD_REASON,
        id="not-in",
    ),
    pytest.param(
        make_pod("p").affinity(required({"matchExpressions": [req("NotIn", "gpu", "x")]})).pod(),
        ZONE_A,
        None,
        id="not-in-missing-label",
    ),
    pytest.param(
        make_pod("p").affinity(required({"matchExpressions": [req("Exists", "zone")]})).pod(),
        ZONE_A,
        None,
        id="exists",
    ),
    pytest.param(
        make_pod("p").affinity(required({"matchExpressions": [req("DoesNotExist", "zone")]})).pod(),
        ZONE_A,
        POD_REASON,
        id="does-not-exist",
    ),
    pytest.param(
        make_pod("p").affinity(required({"matchExpressions": [req("Gt", "cores", "4")]})).pod(),
        ZONE_A,
        None,
        id="gt",
    ),
    pytest.param(
        make_pod("p").affinity(required({"matchExpressions": [req("Lt", "cores", "8")]})).pod(),
        ZONE_A,
        POD_REASON,
        id="lt-strict",
    ),
    pytest.param(
        make_pod("p").affinity(required({"matchExpressions": [req("Gt", "zone", "1")]})).pod(),
        ZONE_A,
        POD_REASON,
        id="gt-non-integer-label",
    ),
    pytest.param(
        make_pod("p")
        .affinity(
            required(
                {"matchExpressions": [req("In", "zone", "b")]},
                {"matchExpressions": [req("Exists", "cores")]},
            )
        )
        .pod(),
        ZONE_A,
        None,
        id="terms-ored",
    ),
    pytest.param(
        make_pod("p")
        .affinity(
            required({"matchExpressions": [req("In", "zone", "a"), req("In", "cores", "16")]})
        )
        .pod(),
        ZONE_A,
        POD_REASON,
        id="expressions-anded",
    ),
    pytest.param(make_pod("p").affinity(required({})).pod(), ZONE_A, POD_REASON, id="empty-term"),
    pytest.param(
        make_pod("p")
        .node_selector(zone="b")
        .affinity(required({"matchExpressions": [req("Exists")]}))
        .pod(),
        ZONE_A,
        POD_REASON,
        id="selector-and-affinity-both-needed",
    ),
    pytest.param(
        make_pod("p")
        .affinity(required({"matchFields": [req("NotIn", "metadata.name", "n1")]}))
        .pod(),
        ZONE_A,
        POD_REASON,
        id="match-fields-not-in",
    ),
    pytest.param(
        make_pod("p")
        .affinity(
            required(
                {"matchExpressions": [{"key": "zone", "operator": "Bogus"}]},
                {"matchExpressions": [req("In", "zone", "a")]},
            )
        )
        .pod(),
        ZONE_A,
        None,
        id="unparsable-term-ignored",
    ),
]


@pytest.mark.parametrize(("pod", "node", "reason"), FILTER_CASES)
def test_filter(pod: Pod, node: NodeBuilder, reason: str | None) -> None:
    st_ = run_filter(plugin(), pod, node.info())
    if reason is None:
        assert st_ is None
    else:
        assert st_ == Status.unresolvable(reason, plugin="NodeAffinity")


ADDED = {
    "addedAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [{"matchExpressions": [req("In", "pool", "batch")]}]
        }
    }
}


def test_added_affinity_is_checked_first_and_applies_to_every_pod() -> None:
    pl = plugin(ADDED)
    batch = make_node("n").label("pool", "batch").label("zone", "a").info()
    other = make_node("m").label("zone", "a").info()
    plain = make_pod("p").pod()
    assert run_filter(pl, plain, batch) is None
    assert run_filter(pl, plain, other) == Status.unresolvable(
        ENFORCED_REASON, plugin="NodeAffinity"
    )
    wants_b = make_pod("q").node_selector(zone="b").pod()
    assert run_filter(pl, wants_b, other) == Status.unresolvable(
        ENFORCED_REASON, plugin="NodeAffinity"
    )
    assert run_filter(pl, wants_b, batch) == Status.unresolvable(POD_REASON, plugin="NodeAffinity")


def _names(*names: str) -> dict[str, Any]:
    return {"matchFields": [req("In", "metadata.name", *names)]}


@pytest.mark.parametrize(
    ("affinity", "names", "code"),
    [
        pytest.param(required(_names("n1", "n2")), {"n1", "n2"}, None, id="one-term"),
        pytest.param(required(_names("n1"), _names("n3")), {"n1", "n3"}, None, id="terms-union"),
        pytest.param(
            required(
                {
                    "matchFields": [req("In", "metadata.name", "n1", "n2")] * 1
                    + [req("In", "metadata.name", "n2", "n3")]
                }
            ),
            {"n2"},
            None,
            id="requirements-intersect",
        ),
        pytest.param(
            required(_names("n1"), {"matchExpressions": [req("Exists")]}),
            None,
            None,
            id="term-without-names-no-narrowing",
        ),
        pytest.param(
            required(
                {
                    "matchFields": [
                        req("In", "metadata.name", "n1"),
                        req("In", "metadata.name", "n2"),
                    ]
                }
            ),
            None,
            Code.UNSCHEDULABLE_AND_UNRESOLVABLE,
            id="conflict",
        ),
    ],
)
def test_pre_filter_narrows_to_named_nodes(
    affinity: dict[str, Any], names: set[str] | None, code: Code | None
) -> None:
    r, s = plugin().pre_filter(CycleState(), make_pod("p").affinity(affinity).pod(), [])
    if code is not None:
        assert s == Status.unresolvable("pod affinity terms conflict", plugin="NodeAffinity")
        return
    assert s is None
    assert (None if r is None else r.node_names) == names


def test_pre_filter_skips_pods_with_nothing_required() -> None:
    _, s = plugin().pre_filter(CycleState(), make_pod("p").affinity(preferred()).pod(), [])
    assert s is not None and s.is_skip()
    _, s = plugin(ADDED).pre_filter(CycleState(), make_pod("p").pod(), [])
    assert s is None  # addedAffinity applies to every pod


def score_all(
    pl: node_affinity.NodeAffinity, pod: Pod, nodes: list[NodeBuilder]
) -> dict[str, int] | None:
    infos = [n.info() for n in nodes]
    snap = Snapshot(infos)
    state = CycleState()
    s = pl.pre_score(state, pod, infos)
    if s is not None:
        assert s.is_skip()
        return None
    raw = np.array([pl.score(state, pod, ni)[0] for ni in infos], dtype=np.int64)
    vec = pl.score_vector(state, pod, snap, np.arange(len(infos), dtype=np.intp))
    assert vec is not None and vec.tolist() == raw.tolist()
    pl.normalize_score(state, pod, raw)
    return dict(zip([ni.name for ni in infos], raw.tolist(), strict=True))


NODES = [
    make_node("a").label("zone", "a").label("disk", "ssd"),
    make_node("b").label("zone", "b").label("disk", "ssd"),
    make_node("c").label("zone", "c"),
]


@pytest.mark.parametrize(
    ("pod", "args", "expected"),
    [
        pytest.param(make_pod("p").pod(), None, None, id="no-preferences-skip"),
        pytest.param(
            make_pod("p")
            .affinity(
                preferred(
                    (2, {"matchExpressions": [req("In", "disk", "ssd")]}),
                    (3, {"matchExpressions": [req("In", "zone", "a")]}),
                )
            )
            .pod(),
            None,
            # raw a=5, b=2, c=0 -> 100*s//5
            {"a": 100, "b": 40, "c": 0},
            id="weights-summed-then-normalized",
        ),
        pytest.param(
            make_pod("p")
            .affinity(
                preferred(
                    (0, {"matchExpressions": [req("In", "zone", "c")]}),
                    (5, {}),
                    (1, {"matchExpressions": [req("In", "zone", "b")]}),
                )
            )
            .pod(),
            None,
            {"a": 0, "b": 100, "c": 0},
            id="zero-weight-and-empty-terms-dropped",
        ),
        pytest.param(
            make_pod("p")
            .affinity(preferred((7, {"matchExpressions": [req("In", "zone", "x")]})))
            .pod(),
            None,
            {"a": 0, "b": 0, "c": 0},
            id="nothing-matches-all-zero",
        ),
        pytest.param(
            make_pod("p")
            .affinity(preferred((4, {"matchFields": [req("In", "metadata.name", "c")]})))
            .pod(),
            None,
            {"a": 0, "b": 0, "c": 100},
            id="preferred-match-fields",
        ),
        pytest.param(
            make_pod("p")
            .affinity(preferred((1, {"matchExpressions": [req("In", "zone", "a")]})))
            .pod(),
            {
                "addedAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {"weight": 3, "preference": {"matchExpressions": [req("In", "zone", "b")]}}
                    ]
                }
            },
            # raw a=1, b=3, c=0 -> 33, 100, 0
            {"a": 33, "b": 100, "c": 0},
            id="added-preferred-terms",
        ),
    ],
)
def test_score(pod: Pod, args: dict[str, Any] | None, expected: dict[str, int] | None) -> None:
    assert score_all(plugin(args), pod, NODES) == expected


def test_pre_score_error_on_unparsable_preferred_term() -> None:
    pod = (
        make_pod("p")
        .affinity(preferred((1, {"matchExpressions": [{"key": "k", "operator": "In"}]})))
        .pod()
    )
    s = plugin().pre_score(CycleState(), pod, [])
    assert s is not None and s.code == Code.ERROR


@pytest.mark.parametrize(
    "added",
    [
        pytest.param(
            {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}},
            id="no-terms",
        ),
        pytest.param(
            {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "k", "operator": "Gt", "values": ["x"]}]}
                    ]
                }
            },
            id="gt-not-integer",
        ),
        pytest.param(
            {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 0, "preference": {}}]},
            id="weight-out-of-range",
        ),
        pytest.param({"requiredDuringSchedulingRequiredDuringExecution": {}}, id="unknown-field"),
    ],
)
def test_args_validation(added: dict[str, Any]) -> None:
    with pytest.raises(pydantic.ValidationError):
        node_affinity.Args.model_validate({"addedAffinity": added})


def test_node_event_hint() -> None:
    pl = plugin()
    (reg,) = pl.events_to_register()
    assert reg.event == ClusterEvent(
        EventResource.NODE, ActionType.ADD | ActionType.UPDATE_NODE_LABEL
    )
    hint = reg.hint
    assert hint is not None
    pod = make_pod("p").node_selector(zone="a").pod()
    a = make_node("n").label("zone", "a").node()
    b = make_node("n").label("zone", "b").node()
    assert hint(pod, None, a) is True  # added, matches
    assert hint(pod, None, b) is False
    assert hint(pod, b, a) is True  # now matches
    assert hint(pod, a, a) is False  # matched before already
    assert plugin(ADDED).events_to_register()[0].hint(pod, None, a) is False  # type: ignore[misc]


def test_memoised_mask_follows_node_label_changes() -> None:
    pl = plugin()
    infos = [make_node(f"n{i}").label("zone", "a" if i % 2 else "b").info() for i in range(4)]
    snap = Snapshot(infos)
    pod = make_pod("p").node_selector(zone="a").pod()
    state = CycleState()
    pl.pre_filter(state, pod, infos)
    m1 = pl.filter_mask(state, pod, snap)
    assert m1 is not None and m1.tolist() == [False, True, False, True]
    # A status-only node update keeps the labels version (and the memo).
    version = snap.labels_version
    infos[0].node = Node(make_node("n0").label("zone", "b").obj())
    snap.refresh_row(infos[0])
    assert snap.labels_version == version
    # A label change moves it.
    infos[0].node = Node(make_node("n0").label("zone", "a").obj())
    snap.refresh_row(infos[0])
    assert snap.labels_version != version
    m2 = pl.filter_mask(state, pod, snap)
    assert m2 is not None and m2.tolist() == [True, True, False, True]


KEYS = ("zone", "disk")
VALUES = ("a", "b", "1", "5")


@st.composite
def requirements(draw: st.DrawFn) -> dict[str, Any]:
    op = draw(st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")))
    r: dict[str, Any] = {"key": draw(st.sampled_from(KEYS)), "operator": op}
    if op in ("In", "NotIn"):
        r["values"] = draw(st.lists(st.sampled_from(VALUES), min_size=1, max_size=2))
    elif op in ("Gt", "Lt"):
        r["values"] = [draw(st.sampled_from(("0", "3")))]
    return r


@st.composite
def terms(draw: st.DrawFn) -> dict[str, Any]:
    t: dict[str, Any] = {"matchExpressions": draw(st.lists(requirements(), max_size=2))}
    if draw(st.integers(0, 3)) == 0:
        t["matchFields"] = [req("In", "metadata.name", draw(st.sampled_from(("n0", "n1"))))]
    return t


@st.composite
def affinity_pods(draw: st.DrawFn) -> Pod:
    b = make_pod("p")
    if draw(st.booleans()):
        b.node_selector(**{draw(st.sampled_from(KEYS)): draw(st.sampled_from(VALUES))})
    aff: dict[str, Any] = {"nodeAffinity": {}}
    if draw(st.booleans()):
        aff["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] = {
            "nodeSelectorTerms": draw(st.lists(terms(), min_size=1, max_size=2))
        }
    prefs = draw(st.lists(st.tuples(st.integers(1, 5), terms()), max_size=3))
    if prefs:
        aff["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = [
            {"weight": w, "preference": t} for w, t in prefs
        ]
    return b.affinity(aff).pod()


@st.composite
def label_snapshots(draw: st.DrawFn) -> Snapshot:
    infos = []
    for i in range(draw(st.integers(1, 6))):
        b = make_node(f"n{i}")
        for k in KEYS:
            v = draw(st.sampled_from((None, *VALUES)))
            if v is not None:
                b.label(k, v)
        infos.append(b.info())
    return Snapshot(infos)


PLUGINS = [plugin(), plugin(ADDED)]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(snap=label_snapshots(), pod=affinity_pods(), which=st.integers(0, 1))
def test_vector_equals_scalar(snap: Snapshot, pod: Pod, which: int) -> None:
    pl = PLUGINS[which]  # shared across examples: the memo must never leak between snapshots
    infos = snap.node_infos
    state = CycleState()
    _, s = pl.pre_filter(state, pod, infos)
    if s is None:
        mask = pl.filter_mask(state, pod, snap)
        assert mask is not None
        assert mask.tolist() == [pl.filter(state, pod, ni) is None for ni in infos]
    s = pl.pre_score(state, pod, infos)
    if s is None:
        rows = np.arange(len(infos), dtype=np.intp)[::-1].copy()
        vec = pl.score_vector(state, pod, snap, rows)
        assert vec is not None
        assert vec.tolist() == [pl.score(state, pod, infos[int(r)])[0] for r in rows]
