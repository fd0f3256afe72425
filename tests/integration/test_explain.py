"""``explain``: each node's verdict and the scores of feasible nodes, on the in-memory cluster."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from kubesched.framework.cluster_port import ClusterError
from kubesched.framework.types import Pod
from kubesched.scheduler.explain import explain, explain_pod
from tests.builders import make_node, make_pod
from tests.integration.harness import Harness, running

pytestmark = pytest.mark.looptime

TAINTED = make_node("gpu").taint("dedicated", "gpu").alloc(cpu="8", memory="32Gi").obj()
SMALL = make_node("small").alloc(cpu="1", memory="2Gi").obj()
ROOMY = make_node("roomy").alloc(cpu="16", memory="64Gi").obj()
BUSY = make_node("busy").alloc(cpu="4", memory="8Gi").obj()
CORDONED = make_node("cordoned").unschedulable().alloc(cpu="8", memory="32Gi").obj()


def harness(*objs: dict[str, Any]) -> Harness:
    h = Harness()
    h.apply(*objs)
    return h


CASES = [
    pytest.param(
        [TAINTED, SMALL, ROOMY],
        make_pod("web").req(cpu="2", memory="1Gi"),
        {"roomy"},
        {
            "gpu": (
                "TaintToleration",
                "UnschedulableAndUnresolvable",
                "node(s) had untolerated taint(s)",
            ),
            "small": ("NodeResourcesFit", "UnschedulableAndUnresolvable", "Insufficient cpu"),
        },
        id="tainted-small-fitting",  # request > allocatable: preemption cannot help
    ),
    pytest.param(
        [TAINTED, SMALL, CORDONED],
        make_pod("web").req(cpu="2"),
        set(),
        {
            "gpu": (
                "TaintToleration",
                "UnschedulableAndUnresolvable",
                "node(s) had untolerated taint(s)",
            ),
            "small": ("NodeResourcesFit", "UnschedulableAndUnresolvable", "Insufficient cpu"),
            "cordoned": (
                "NodeUnschedulable",
                "UnschedulableAndUnresolvable",
                "node(s) were unschedulable",
            ),
        },
        id="nothing-fits",
    ),
    pytest.param(
        [TAINTED, SMALL, ROOMY],
        make_pod("web").req(cpu="2").toleration("dedicated", "gpu"),
        {"gpu", "roomy"},
        {"small": ("NodeResourcesFit", "UnschedulableAndUnresolvable", "Insufficient cpu")},
        id="toleration",
    ),
    pytest.param(
        [TAINTED, SMALL, ROOMY],
        make_pod("web").node_selector(disk="ssd"),
        set(),
        {
            # TaintToleration comes before NodeAffinity in kube's Filter order.
            "gpu": (
                "TaintToleration",
                "UnschedulableAndUnresolvable",
                "node(s) had untolerated taint(s)",
            ),
            **{
                n: (
                    "NodeAffinity",
                    "UnschedulableAndUnresolvable",
                    "node(s) didn't match Pod's node affinity/selector",
                )
                for n in ("small", "roomy")
            },
        },
        id="first-failing-plugin-in-filter-order",
    ),
]


@pytest.mark.parametrize(("nodes", "pod", "feasible", "rejected"), CASES)
async def test_every_node_gets_a_verdict(
    nodes: list[dict[str, Any]],
    pod: Any,
    feasible: set[str],
    rejected: dict[str, tuple[str, str, str]],
) -> None:
    h = harness(*nodes)
    p = pod.pod()
    fwk = h.sched.framework_for(p)
    assert fwk is not None
    exp = explain(fwk, p, h.sched.cache.update_snapshot())
    assert {n.node for n in exp.feasible} == feasible
    got = {n.node: (n.plugin, n.code, n.reasons[0]) for n in exp.rejected}
    assert got == rejected
    if not feasible:
        # The summary is kube-scheduler's message (without PostFilter's part).
        assert exp.message.startswith(f"0/{len(nodes)} nodes are available: ")
    totals = [n.total for n in exp.feasible]
    assert totals == sorted(totals, reverse=True)
    for n in exp.feasible:
        assert n.total == sum(n.scores.values())


async def test_scores_rank_the_emptier_node_first() -> None:
    h = harness(ROOMY, BUSY, make_pod("load").req(cpu="3", memory="6Gi").node("busy").obj())
    p = make_pod("web").req(cpu="1", memory="1Gi").pod()
    fwk = h.sched.framework_for(p)
    assert fwk is not None
    exp = explain(fwk, p, h.sched.cache.update_snapshot())
    assert [n.node for n in exp.feasible] == ["roomy", "busy"]
    best, other = exp.feasible
    assert best.scores["NodeResourcesFit"] > other.scores["NodeResourcesFit"]
    assert exp.message == f"2/2 nodes are available; best: roomy (score {best.total})"
    assert "NodeResourcesFit:1" in exp.score_plugins


async def test_table_and_json_renderings() -> None:
    h = harness(TAINTED, SMALL, ROOMY)
    p = make_pod("web").req(cpu="2").pod()
    fwk = h.sched.framework_for(p)
    assert fwk is not None
    exp = explain(fwk, p, h.sched.cache.update_snapshot())
    text = exp.table()
    assert text.startswith("Pod default/web (profile kubesched): Pending\n")
    assert "Feasible nodes (1), best first:" in text
    assert "Rejected nodes (2):" in text
    lines = text.splitlines()
    assert any(line.split()[:2] == ["gpu", "TaintToleration"] for line in lines)
    doc = orjson.loads(orjson.dumps(exp.to_dict()))
    assert doc["feasible"][0]["node"] == "roomy"
    assert {r["node"]: r["plugin"] for r in doc["rejected"]} == {
        "gpu": "TaintToleration",
        "small": "NodeResourcesFit",
    }


async def test_a_pod_whose_last_attempt_failed_with_an_error_says_so() -> None:
    # the bind is refused (not a rejection: kube's reason SchedulerError); an evaluation
    # against the cache finds a node, which alone would read as if nothing were wrong
    h = harness(ROOMY, make_pod("web").obj())
    err = ClusterError("POST /api/v1/namespaces/default/pods/web/binding: 403 forbidden")
    err.server_message, err.code, err.retryable = "forbidden", "403", False
    h.cluster.fail_next("bind", err, times=100)
    async with running(h):
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/web"))
        exp = explain_pod(h.sched, Pod(dict(h.cluster.pod("default/web") or {})))
    assert exp.status == "SchedulerError"
    first, _, rest = exp.message.partition("\n")
    assert first == 'the last attempt failed: running Bind plugin "DefaultBinder": forbidden'
    assert [n.node for n in exp.feasible] == ["roomy"] and rest


async def test_explain_pod_after_scheduling() -> None:
    h = harness(TAINTED, SMALL, make_pod("big").req(cpu="32").obj(), make_pod("ok").obj())
    async with running(h):
        await h.wait_for(lambda: "FailedScheduling" in h.reasons("default/big"))
        await h.wait_for(lambda: h.node_of("default/ok") is not None)
    big = Pod(dict(h.cluster.pod("default/big") or {}))
    exp = explain_pod(h.sched, big)
    assert exp.status == "Unschedulable"
    assert exp.message == (
        "0/2 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s)."
    )
    ok = Pod(dict(h.cluster.pod("default/ok") or {}))
    exp = explain_pod(h.sched, ok)
    assert (exp.status, exp.node) == ("Scheduled", "small")
    assert [n.node for n in exp.feasible] == ["small"]
    # The cache is left as it was: the bound pod still counts on its node.
    ni = h.sched.cache.node_info("small")
    assert ni is not None and any(q.uid == ok.uid for q in ni.pods)
