"""The volume plugins through the real simulator, on the scenario files of
tests/scenarios/volumes (the differential corpus)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kubesched.simulator.engine import PodResult, _simulate, simulate
from kubesched.simulator.scenario import load_scenarios
from kubesched.simulator.vtime import VirtualTimeLoop

SCENARIOS = Path(__file__).parents[2] / "scenarios" / "volumes"


def load(name: str) -> list[dict[str, Any]]:
    return load_scenarios([str(SCENARIOS / name)])


def by_name(name: str) -> dict[str, PodResult]:
    return {p.name: p for p in simulate(load(name), seed=0).pods}


def test_pod_with_zonal_bound_pv_lands_in_that_zone() -> None:
    pods = by_name("zonal-bound-pv.yaml")
    assert pods["db"].node == "node-b"
    assert pods["stranded"].status == "Unschedulable"
    assert pods["stranded"].message.startswith(
        "0/3 nodes are available: 3 node(s) had no available volume zone."
    )


def test_wait_for_first_consumer_local_pv_binds_on_its_node() -> None:
    loop = VirtualTimeLoop()
    try:
        result, _, cluster = loop.run_until_complete(_simulate(load("wffc-local-pv.yaml"), None, 0))
    finally:
        loop.close()
    pods = {p.name: p for p in result.pods}
    assert pods["app"].node == "node-2"
    pv = cluster.get("PersistentVolume", "", "local-ssd-node-2")
    assert pv is not None
    assert pv["spec"]["claimRef"]["name"] == "cache"
    pvc = cluster.get("PersistentVolumeClaim", "default", "cache")
    assert pvc is not None and pvc["spec"]["volumeName"] == "local-ssd-node-2"
    assert pods["app-2"].status == "Unschedulable"
    assert pods["app-2"].message.startswith(
        "0/3 nodes are available: 3 node(s) didn't find available persistent volumes to bind."
    )


def test_read_write_once_pod_claim_in_use_blocks_a_second_pod() -> None:
    pods = by_name("rwop-conflict.yaml")
    assert pods["second-writer"].status == "Unschedulable"
    assert pods["second-writer"].message.startswith(
        "0/2 nodes are available: 2 node(s) unavailable due to PersistentVolumeClaim with "
        "ReadWriteOncePod access mode already in-use by another pod."
    )


def test_csi_attach_limit() -> None:
    pods = by_name("csi-attach-limit.yaml")
    assert pods["b"].node == "node-2"
    assert pods["c"].status == "Unschedulable"
    assert pods["c"].message.startswith(
        "0/2 nodes are available: 2 node(s) exceed max volume count."
    )
