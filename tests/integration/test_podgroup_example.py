"""policies/examples/podgroup-example.yaml does what its comments say, in the simulator:
the four workers are bound together when they fit, and none is when they do not."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kubesched.simulator.engine import simulate
from kubesched.simulator.scenario import Document, prepare, read_documents

EXAMPLE = Path(__file__).resolve().parents[2] / "policies" / "examples" / "podgroup-example.yaml"


def node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name},
        "status": {"capacity": {"cpu": "4", "memory": "16Gi", "pods": "110"}},
    }


@pytest.mark.parametrize(("nodes", "bound"), [(2, 4), (1, 0)], ids=["fits", "does-not-fit"])
def test_the_example_gang_is_all_or_nothing(nodes: int, bound: int) -> None:
    docs = [Document("nodes", i, node(f"node-{i}")) for i in range(nodes)]
    docs += read_documents(str(EXAMPLE))
    result = simulate(prepare(docs), seed=1)
    pods = {p.name: p for p in result.pods}
    assert set(pods) == {f"train-{i}" for i in range(4)}
    assert sum(1 for p in pods.values() if p.node) == bound
    if not bound:
        assert all(p.status == "Unschedulable" for p in pods.values())
        assert all(
            "2/4 members fit; 2 pods: 0/1 nodes are available: 1 Insufficient cpu." in p.message
            for p in pods.values()
        )
