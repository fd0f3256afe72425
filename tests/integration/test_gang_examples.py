"""The gang examples under policies/examples/ do in ``kubesched simulate`` what their
comments say (kube-apiserver accepting them is tests/e2e/test_gang_examples_e2e.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubesched.simulator.engine import SimulationResult, simulate
from kubesched.simulator.scenario import Document, prepare, read_documents

EXAMPLES = Path(__file__).resolve().parents[2] / "policies" / "examples"


def node(name: str, cpu: str = "4", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "status": {"capacity": {"cpu": cpu, "memory": "16Gi", "pods": "110"}},
    }


def run(example: str, *objects: dict[str, Any]) -> SimulationResult:
    docs = [Document("cluster", i, o) for i, o in enumerate(objects)]
    docs += read_documents(str(EXAMPLES / example))
    return simulate(prepare(docs), seed=1)


def placed(result: SimulationResult) -> dict[str, str | None]:
    return {p.name: p.node for p in result.pods}


@pytest.mark.parametrize(("nodes", "bound"), [(2, 4), (1, 0)], ids=["fits", "does-not-fit"])
def test_the_upstream_gang_is_all_or_nothing(nodes: int, bound: int) -> None:
    result = run("gang-upstream.yaml", *(node(f"n{i}") for i in range(nodes)))
    got = placed(result)
    assert set(got) == {f"train-{i}" for i in range(4)}
    assert sum(1 for n in got.values() if n) == bound
    if not bound:
        for p in result.pods:
            assert p.status == "Unschedulable"
            assert p.message.startswith(
                'pod group "scheduling.k8s.io/ml-upstream/train": 2/4 members fit'
            )


def test_the_scheduler_plugins_gang_is_bound_whole() -> None:
    got = placed(run("gang-scheduler-plugins.yaml", node("n0")))
    assert got == {f"train-{i}": "n0" for i in range(3)}


def test_the_topology_gang_takes_the_one_zone_that_holds_it() -> None:
    zone = "topology.kubernetes.io/zone"
    nodes = [
        node("a-0", **{zone: "a"}),  # 2 of the 3 members
        node("b-0", **{zone: "b"}),
        node("b-1", **{zone: "b"}),
        node("big", cpu="64"),  # no zone label: in no domain
    ]
    got = placed(run("gang-topology.yaml", *nodes))
    assert set(got.values()) <= {"b-0", "b-1"} and all(got.values()), got


def test_the_urgent_gang_evicts_a_lower_gang_whole() -> None:
    low: list[dict[str, Any]] = [
        {
            "apiVersion": "kubesched.dev/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "batch", "namespace": "ml-urgent"},
            "spec": {"minMember": 2},
        }
    ]
    for i in range(2):
        low.append(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {
                    "name": f"batch-{i}",
                    "namespace": "ml-urgent",
                    "labels": {"kubesched.dev/pod-group": "batch"},
                },
                "spec": {
                    "nodeName": f"n{i}",
                    "containers": [
                        {"name": "c", "image": "pause", "resources": {"requests": {"cpu": "3"}}}
                    ],
                },
            }
        )
    result = run("gang-preemption.yaml", node("n0"), node("n1"), *low)
    assert sorted(p.victim for p in result.preempted) == ["ml-urgent/batch-0", "ml-urgent/batch-1"]
    assert {p.by for p in result.preempted} == {"pod group ml-urgent/urgent"}
    got = placed(result)
    assert sorted(n for k, n in got.items() if k.startswith("urgent") and n) == ["n0", "n1"]
