"""The web view's data shaping (kubesched.ui.shape): what the page's pictures say."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.ui.shape import (
    FEASIBLE_COLOUR,
    GangFacts,
    QueueHistory,
    explain_view,
    gangs_view,
    plugin_colour,
    plugin_colours,
    profile_view,
    queues_view,
)


def pending(pod: str, pool: str, reason: str = "", attempts: int = 1) -> dict[str, Any]:
    return {
        "pod": pod,
        "profile": "kubesched",
        "pool": pool,
        "attempts": attempts,
        "reason": reason,
        "unschedulablePlugins": ["NodeResourcesFit"] if reason else [],
    }


def test_queues_are_counted_per_pool_with_their_pods_by_name() -> None:
    view = queues_view(
        [
            pending("ns/b", "unschedulable", "0/3 nodes are available: 3 Insufficient cpu."),
            pending("ns/a", "unschedulable", "0/3 nodes are available: 3 Insufficient cpu."),
            pending("ns/g", "gated", "waiting for scheduling gates: [x]"),
            pending("ns/c", "active"),
        ],
        in_flight=2,
    )
    assert view["counts"] == {
        "active": 1,
        "backoff": 0,
        "unschedulable": 2,
        "gated": 1,
        "inFlight": 2,
    }
    assert [p["pod"] for p in view["pods"]["unschedulable"]] == ["ns/a", "ns/b"]
    assert view["pods"]["unschedulable"][0]["reason"].endswith("3 Insufficient cpu.")
    assert view["pods"]["unschedulable"][0]["plugins"] == ["NodeResourcesFit"]
    assert view["pods"]["backoff"] == []


def test_queue_history_keeps_the_last_samples_only() -> None:
    h = QueueHistory(size=3)
    for t in range(5):
        h.record(float(t), {"active": t, "gated": 1})
    samples = h.samples()
    assert [s["t"] for s in samples] == [2.0, 3.0, 4.0]
    assert samples[-1] == {"t": 4.0, "active": 4, "backoff": 0, "unschedulable": 0, "gated": 1}


@pytest.mark.parametrize(
    ("facts", "status", "missing", "blocker"),
    [
        pytest.param(
            GangFacts("k", "ml/train", "kubesched.dev", 3, bound=["a", "b", "c"]),
            "Scheduled",
            0,
            "",
            id="minimum-bound",
        ),
        pytest.param(
            GangFacts(
                "k",
                "ml/gpu",
                "kubesched.dev",
                3,
                waiting=["a", "b", "c"],
                blocker='pod group "ml/gpu": 2/3 members fit',
            ),
            "Blocked",
            0,
            'pod group "ml/gpu": 2/3 members fit',
            id="last-attempt-failed",
        ),
        pytest.param(
            GangFacts("k", "ml/eval", "kubesched.dev", 4, waiting=["a", "b", "c"]),
            "Waiting",
            1,
            "1 of minMember 4 member(s) do not exist yet",
            id="a-member-missing",
        ),
        pytest.param(
            GangFacts(
                "k",
                "ml/x",
                "kubesched.dev",
                None,
                waiting=["a"],
                problem='pod group "kubesched.dev/ml/x" does not exist',
            ),
            "Blocked",
            0,
            'pod group "kubesched.dev/ml/x" does not exist',
            id="no-podgroup",
        ),
        pytest.param(
            GangFacts("k", "ml/new", "kubesched.dev", 2, waiting=["a", "b"]),
            "Pending",
            0,
            "",
            id="not-tried-yet",
        ),
    ],
)
def test_a_gangs_counts_status_and_blocker(
    facts: GangFacts, status: str, missing: int, blocker: str
) -> None:
    (view,) = gangs_view([facts])
    assert (view["status"], view["missing"], view["blocker"]) == (status, missing, blocker)
    assert (view["bound"], view["waiting"]) == (len(facts.bound), len(facts.waiting))


def test_gangs_that_need_attention_come_first() -> None:
    views = gangs_view(
        [
            GangFacts("1", "a/done", "x", 1, bound=["p"]),
            GangFacts("2", "b/waiting", "x", 2, waiting=["p"]),
            GangFacts("3", "c/blocked", "x", 1, waiting=["p"], blocker="no"),
        ]
    )
    assert [v["name"] for v in views] == ["c/blocked", "b/waiting", "a/done"]


def test_a_profile_lists_its_chain_in_order() -> None:
    view = profile_view(
        "kubesched",
        {"filter": ["NodeName", "NodeResourcesFit"], "score": ["NodeResourcesFit:1"]},
        source="default plugins",
    )
    assert view["ready"] is True
    assert view["chain"] == [
        {"point": "filter", "plugins": ["NodeName", "NodeResourcesFit"]},
        {"point": "score", "plugins": ["NodeResourcesFit:1"]},
    ]


EXPLANATION: dict[str, Any] = {
    "namespace": "ns",
    "name": "web",
    "profile": "kubesched",
    "status": "Unschedulable",
    "node": None,
    "message": "2/5 nodes are available; best: n2 (score 180)",
    "scorePlugins": ["TaintToleration:3", "NodeResourcesFit:1", "ImageLocality:1"],
    "feasible": [
        {
            "node": "n2",
            "feasible": True,
            "total": 180,
            "scores": {"NodeResourcesFit": 80, "TaintToleration": 100},
        },
        {
            "node": "n1",
            "feasible": True,
            "total": 90,
            "scores": {"NodeResourcesFit": 90, "TaintToleration": 0},
        },
    ],
    "rejected": [
        {
            "node": "n5",
            "feasible": False,
            "plugin": "NodeAffinity",
            "code": "UnschedulableAndUnresolvable",
            "reasons": ["node(s) didn't match Pod's node affinity/selector"],
        },
        {
            "node": "n3",
            "feasible": False,
            "plugin": "NodeResourcesFit",
            "code": "Unschedulable",
            "reasons": ["Insufficient cpu", "Insufficient memory"],
        },
        {
            "node": "n4",
            "feasible": False,
            "plugin": "NodeResourcesFit",
            "code": "Unschedulable",
            "reasons": ["Insufficient cpu"],
        },
    ],
}


def test_the_heat_map_colours_each_node_by_its_rejecting_plugin() -> None:
    view = explain_view(EXPLANATION)
    cells = {c["node"]: c for c in view["cells"]}
    assert [c["node"] for c in view["cells"]] == ["n1", "n2", "n3", "n4", "n5"]
    assert cells["n3"]["colour"] == cells["n4"]["colour"] == plugin_colour("NodeResourcesFit")
    assert cells["n5"]["colour"] == plugin_colour("NodeAffinity") != cells["n3"]["colour"]
    assert cells["n3"]["reason"] == "Insufficient cpu; Insufficient memory"
    assert (cells["n2"]["colour"], cells["n2"]["shade"]) == (FEASIBLE_COLOUR, 1.0)
    assert cells["n1"]["shade"] == 0.5  # half the best total
    assert view["legend"] == [
        {"plugin": "fits", "nodes": 2, "colour": FEASIBLE_COLOUR},
        {"plugin": "NodeResourcesFit", "nodes": 2, "colour": plugin_colour("NodeResourcesFit")},
        {"plugin": "NodeAffinity", "nodes": 1, "colour": plugin_colour("NodeAffinity")},
    ]


def test_a_bar_per_score_plugin_for_the_best_node() -> None:
    view = explain_view(EXPLANATION)
    assert view["best"] == {"node": "n2", "total": 180}
    # ImageLocality scored no node: no bar. Limits are 100 x weight.
    assert view["bars"] == [
        {"plugin": "TaintToleration", "weight": 3, "score": 100, "max": 100, "limit": 300},
        {"plugin": "NodeResourcesFit", "weight": 1, "score": 80, "max": 90, "limit": 100},
    ]


def test_nothing_fits_no_bars_and_the_message_kept() -> None:
    exp = {**EXPLANATION, "feasible": [], "message": "0/3 nodes are available: 3 Insufficient cpu."}
    view = explain_view(exp)
    assert (view["bars"], view["best"]) == ([], None)
    assert view["message"] == "0/3 nodes are available: 3 Insufficient cpu."
    assert [r["node"] for r in view["rejected"]] == ["n3", "n4", "n5"]


def test_plugin_colours_are_stable_and_drop_weights() -> None:
    assert plugin_colour("MyOutOfTreePlugin") == plugin_colour("MyOutOfTreePlugin")
    assert plugin_colours(["NodeResourcesFit:5", "X"]) == {
        "NodeResourcesFit": plugin_colour("NodeResourcesFit"),
        "X": plugin_colour("X"),
    }
