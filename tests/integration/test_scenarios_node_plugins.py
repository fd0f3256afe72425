"""Scenario files of the NodeAffinity, NodePorts, ImageLocality and SchedulingGates
families, run through the simulator with the default profile: the placements and
messages a kube-scheduler user would expect (the same files feed the differential test
against kube-scheduler)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kubesched.simulator.engine import PodResult, simulate
from kubesched.simulator.scenario import load_scenarios

SCENARIOS = Path(__file__).resolve().parents[1] / "scenarios"


def run(family: str, name: str) -> dict[str, PodResult]:
    objects = load_scenarios([str(SCENARIOS / family / name)])
    return {p.name: p for p in simulate(objects, seed=0).pods}


def placements(results: dict[str, PodResult]) -> dict[str, str | None]:
    return {name: p.node for name, p in results.items()}


def test_required_node_affinity_and_selector() -> None:
    r = run("node-affinity", "required-and-selector.yaml")
    assert placements(r) == {
        "ssd-pod": "fast",
        "zone-b-pod": "slow",
        "named-pod": "slow",
        "gpu-pod": None,
        "conflict-pod": None,
    }
    assert r["gpu-pod"].message.startswith(
        "0/3 nodes are available: 3 node(s) didn't match Pod's node affinity/selector."
    )
    assert r["conflict-pod"].message.startswith(
        "0/3 nodes are available: pod affinity terms conflict."
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_preferred_node_affinity_wins_ties(seed: int) -> None:
    objects = load_scenarios([str(SCENARIOS / "node-affinity" / "preferred.yaml")])
    pods = {p.name: p.node for p in simulate(objects, seed=seed).pods}
    assert pods == {"prefers-b": "node-b", "prefers-c": "node-c"}


def test_host_port_conflicts() -> None:
    r = run("node-ports", "host-port-conflicts.yaml")
    assert r["web"].node == "node-2"
    assert r["dns"].status == "Scheduled"
    assert r["web-2"].node is None
    assert r["web-2"].message.startswith(
        "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports."
    )


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_image_locality_prefers_the_node_with_the_image(seed: int) -> None:
    objects = load_scenarios([str(SCENARIOS / "image-locality" / "prefer-cached-image.yaml")])
    (trainer,) = simulate(objects, seed=seed).pods
    assert trainer.node == "node-b"


def test_gated_pod_waits_and_others_schedule() -> None:
    r = run("scheduling-gates", "gated.yaml")
    assert r["free"].node == "node-1"
    gated = r["gated"]
    assert (gated.node, gated.status) == (None, "Waiting")
    assert gated.message == "waiting for scheduling gates: [example.com/quota example.com/approval]"
