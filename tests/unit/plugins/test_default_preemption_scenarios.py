"""DefaultPreemption through the real simulator: the victims kube-scheduler would pick
are deleted (with DisruptionTarget and a Preempted event) and the preemptor lands on the
nominated node. Scenarios live in tests/scenarios/preemption/."""

from __future__ import annotations

import pathlib
from collections.abc import Mapping
from typing import Any

import pytest

import kubesched.simulator.engine as engine
from kubesched.cluster.memory import MemoryCluster
from kubesched.simulator.engine import SimulationResult, simulate
from kubesched.simulator.scenario import load_scenarios
from kubesched.simulator.vtime import VirtualTimeLoop

SCENARIOS = pathlib.Path(__file__).parents[2] / "scenarios" / "preemption"


def load(name: str) -> list[dict[str, Any]]:
    """The scenario as the simulator's loader validates and defaults it."""
    return load_scenarios([str(SCENARIOS / name)])


class Run:
    """A simulation that also records each deleted pod's last version (the victims'
    final status, with the DisruptionTarget condition)."""

    def __init__(self, objects: list[dict[str, Any]], monkeypatch: pytest.MonkeyPatch) -> None:
        deleted: dict[str, Mapping[str, Any]] = {}
        self.deleted = deleted

        class Recording(MemoryCluster):
            def delete(self, kind: str, key: str) -> None:
                obj = self.objects.get(kind, {}).get(key)
                if kind == "Pod" and obj is not None:
                    deleted[key] = obj
                super().delete(kind, key)

        monkeypatch.setattr(engine, "MemoryCluster", Recording)
        loop = VirtualTimeLoop()
        try:
            self.result, _, self.cluster = loop.run_until_complete(
                engine._simulate(objects, None, 0)
            )
        finally:
            loop.close()

    def placement(self) -> dict[str, str | None]:
        return {p.name: p.node for p in self.result.pods}

    def remaining_pods(self) -> set[str]:
        return {k.split("/", 1)[1] for k in self.cluster.objects.get("Pod", {})}


@pytest.mark.parametrize(
    ("scenario", "victims", "placement"),
    [
        ("fewest-pdb-violations.yaml", {"web-1", "web-2"}, {"high": "n2"}),
        ("reprieve.yaml", {"c"}, {"high": "n1"}),
        ("lowest-priority-victims.yaml", {"low"}, {"high": "n2", "never": None}),
    ],
    ids=["fewest-pdb-violations-beats-fewer-victims", "reprieve-keeps-most", "lowest-priority"],
)
def test_preemption_scenarios(
    scenario: str,
    victims: set[str],
    placement: dict[str, str | None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    run = Run(load(scenario), monkeypatch)
    assert run.placement() == placement
    assert set(run.deleted) == {f"default/{v}" for v in victims}
    high_uid = next(
        (o["metadata"].get("uid") or "default/high")
        for k, o in run.cluster.objects["Pod"].items()
        if k == "default/high"
    )
    for key, obj in run.deleted.items():
        (cond,) = [c for c in obj["status"]["conditions"] if c["type"] == "DisruptionTarget"]
        assert cond == {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "message": "kubesched: preempting to accommodate a higher priority pod",
        }
        (ev,) = [e for e in run.cluster.events_for(key) if e.reason == "Preempted"]
        assert ev.type == "Normal"
        assert ev.message == f"Preempted by pod {high_uid} on node {placement['high']}"
    failed = [e for e in run.cluster.events_for("default/high") if e.reason == "FailedScheduling"]
    # kube 1.37: a successful preemption ends the FailedScheduling message with its plan.
    assert failed and failed[0].message.startswith("0/")
    assert failed[0].message.endswith(
        f" preemption: found a potential placement for pod on node {placement['high']}, "
        f"preempting {len(victims)} victims"
    )


def test_never_and_no_victims_messages() -> None:
    result: SimulationResult = simulate(load("lowest-priority-victims.yaml"), seed=0)
    never = next(p for p in result.pods if p.name == "never")
    assert never.status == "Unschedulable"
    assert never.message == (
        "0/2 nodes are available: 2 Insufficient cpu. "
        "preemption: not eligible due to preemptionPolicy=Never."
    )
    objs = load("reprieve.yaml")
    for o in objs:
        if o["kind"] == "Pod" and o["metadata"]["name"] != "high":
            o["spec"]["priority"] = 100
    (high,) = [p for p in simulate(objs, seed=0).pods if p.name == "high"]
    assert high.message == (
        "0/1 nodes are available: 1 Insufficient cpu. "
        "preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod."
    )
