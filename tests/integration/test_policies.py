"""The example profiles in policies/: every one is valid (``kubesched validate``), and
each changes placement the way its comments promise, shown in the simulator beside
the default profile on the same cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from kubesched.cli import main
from kubesched.simulator.engine import simulate
from kubesched.simulator.scenario import Document, prepare, read_documents

POLICIES = Path(__file__).resolve().parents[2] / "policies"
FILES = sorted(POLICIES.glob("*.yaml"))


def test_policies_exist() -> None:
    assert {f.name for f in FILES} >= {
        "default.yaml",
        "binpacking.yaml",
        "zone-spreading.yaml",
        "batch-gang.yaml",
        "low-latency.yaml",
    }


def test_every_policy_is_valid(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", *map(str, FILES)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == len(FILES)
    assert all(line.endswith("Ready=True Compiled") for line in out), out


def scheduler_name(policy: str) -> str:
    obj = yaml.safe_load((POLICIES / policy).read_text())
    name: str = obj["spec"]["schedulerName"]
    return name


def node(name: str, cpu: str, zone: str = "z1", **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {"topology.kubernetes.io/zone": zone, **labels},
        },
        "status": {"capacity": {"cpu": cpu, "memory": "64Gi", "pods": "110"}},
    }


def pod(name: str, scheduler: str, cpu: str = "1", **extra: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **extra.pop("metadata", {})},
        "spec": {
            "schedulerName": scheduler,
            "containers": [
                {
                    "name": "c",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}},
                }
            ],
            **extra,
        },
    }
    return obj


def placements(policy: str, objects: list[dict[str, Any]]) -> dict[str, str | None]:
    docs = read_documents(str(POLICIES / policy))
    docs += [Document("test", i, o) for i, o in enumerate(objects)]
    result = simulate(prepare(docs), seed=1)
    return {p.name: p.node for p in result.pods}


def two_nodes_two_pods(scheduler: str) -> list[dict[str, Any]]:
    return [
        node("node-1", "8"),
        node("node-2", "8"),
        pod("a", scheduler),
        pod("b", scheduler),
    ]


def test_default_policy_spreads_like_the_builtin_default() -> None:
    got = placements("default.yaml", two_nodes_two_pods(scheduler_name("default.yaml")))
    assert got["a"] is not None and got["b"] is not None and got["a"] != got["b"]


@pytest.mark.parametrize("policy", ["binpacking.yaml", "batch-gang.yaml"])
def test_packing_policies_put_two_pods_on_one_node(policy: str) -> None:
    name = scheduler_name(policy)
    objects = [*two_nodes_two_pods(name), pod("c", "kubesched"), pod("d", "kubesched")]
    got = placements(policy, objects)
    assert got["a"] is not None and got["a"] == got["b"], got
    # The default profile, in the same cluster, spreads its own two pods.
    assert got["c"] != got["d"], got


def test_zone_spreading_puts_replicas_in_both_zones() -> None:
    name = scheduler_name("zone-spreading.yaml")
    rs = {
        "apiVersion": "apps/v1",
        "kind": "ReplicaSet",
        "metadata": {"name": "web"},
        "spec": {"selector": {"matchLabels": {"app": "web"}}},
    }

    def replica(i: int, scheduler: str) -> dict[str, Any]:
        owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web", "controller": True}
        return pod(
            f"{scheduler}-{i}",
            scheduler,
            metadata={"labels": {"app": "web"}, "ownerReferences": [owner]},
        )

    # zone-b's only node is busy: the default profile's weak spreading (System
    # constraints, maxSkew 5, weight 2) loses to free capacity; the policy's does not.
    cluster = [
        node("a-1", "32", "zone-a"),
        node("a-2", "32", "zone-a"),
        node("b-1", "4", "zone-b"),
        pod("load", "kubesched", cpu="2500m", nodeName="b-1"),
    ]
    zone = {"a-1": "zone-a", "a-2": "zone-a", "b-1": "zone-b"}
    spread = placements("zone-spreading.yaml", [rs, *cluster, replica(0, name), replica(1, name)])
    assert {zone[str(spread[f"{name}-{i}"])] for i in range(2)} == {"zone-a", "zone-b"}
    default = placements(
        "zone-spreading.yaml", [rs, *cluster, replica(0, "kubesched"), replica(1, "kubesched")]
    )
    assert {zone[str(default[f"kubesched-{i}"])] for i in range(2)} == {"zone-a"}


def test_low_latency_scores_fewer_nodes() -> None:
    """300 nodes; one in the middle of the scan order is preferred by the pod. The
    default scans 48% of them (144) and finds it; low-latency stops at 100."""
    name = scheduler_name("low-latency.yaml")
    cluster = [node(f"node-{i:03d}", "8") for i in range(300)]
    cluster[120]["metadata"]["labels"]["fast"] = "true"
    prefer = {
        "nodeAffinity": {
            "preferredDuringSchedulingIgnoredDuringExecution": [
                {
                    "weight": 100,
                    "preference": {
                        "matchExpressions": [{"key": "fast", "operator": "In", "values": ["true"]}]
                    },
                }
            ]
        }
    }
    got = placements(
        "low-latency.yaml",
        [
            *cluster,
            pod("default", "kubesched", affinity=prefer),
            pod("fast", name, affinity=prefer),
        ],
    )
    assert got["default"] == "node-120"
    assert got["fast"] not in (None, "node-120")


def test_the_batch_profile_runs_coscheduling_with_its_args() -> None:
    from kubesched.profile_status import validate_spec

    spec = yaml.safe_load((POLICIES / "batch-gang.yaml").read_text())["spec"]
    chain = validate_spec(spec).framework.chain.names()
    assert chain["queueSort"] == ["Coscheduling"]
    assert "Coscheduling" in chain["permit"] and "Coscheduling" in chain["preEnqueue"]
