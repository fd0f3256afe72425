"""``kubesched bench --target cluster``: every workload, small, on a real API server.

The harness, not the timing. One throw-away control plane (what ``kubesched bench``
itself starts) serves every workload through ``--kubeconfig``, each run in a namespace
and on nodes of its own, cleaned up afterwards; ``kubesched run`` is the scheduler, a
child process (its Gang on kubesched's own PodGroups: that control plane does not serve
Kubernetes' gang API). Then SchedulingBasic and Gang with ``--compare kube-scheduler``,
each scheduler on a fresh control plane of its own (for Gang with GenericWorkload on:
both schedule the same upstream Workload/PodGroups).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

from kubesched import cli
from kubesched.bench import dra as bench_dra
from kubesched.bench.controlplane import ControlPlane
from kubesched.bench.rest import Rest
from kubesched.simulator.workloads import WORKLOADS, gang_sizes
from tests.controlplane import Binaries
from tests.integration.bench_checks import NODES, PODS, check_workload

pytestmark = pytest.mark.timeout(150)


@pytest.fixture(scope="module")
def cluster(controlplane_binaries: Binaries) -> Iterator[ControlPlane]:
    # a cluster as users run it: the resourceclaim controller makes the DRA workload's
    # claims from their templates (the bench starts it only on a control plane of its own)
    with ControlPlane(controlplane_binaries.etcd.parent) as cp:
        claims = bench_dra.start_claim_controller(cp)
        try:
            yield cp
        finally:
            claims.stop()


def bench(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = cli.main(["bench", "--output", "json", "--idle-timeout", "60s", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc: dict[str, Any] = orjson.loads(out)
    return doc


async def leftovers(kubeconfig: Path) -> tuple[list[str], list[str]]:
    """Nodes and pods left on the cluster."""
    rest = await Rest.from_kubeconfig(str(kubeconfig))
    try:
        nodes = await rest.request("GET", "/api/v1/nodes")
        pods = await rest.request("GET", "/api/v1/pods")
    finally:
        await rest.close()
    return (
        [n["metadata"]["name"] for n in nodes["items"]],
        [p["metadata"]["name"] for p in pods["items"]],
    )


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_every_workload_runs_on_a_real_api_server_and_cleans_up(
    capsys: pytest.CaptureFixture[str], cluster: ControlPlane, name: str
) -> None:
    doc = bench(
        capsys,
        *("--workload", name, "--nodes", str(NODES), "--pods", str(PODS)),
        *("--kubeconfig", str(cluster.kubeconfig)),
    )
    assert (doc["workload"], doc["target"], doc["pods"]) == (name, "cluster", PODS)
    run = doc["kubesched"]
    assert run["scheduled"] == run["pods"] == PODS
    lat = run["latency_seconds"]
    assert 0 <= lat["p50"] <= lat["p90"] <= lat["p99"]
    assert run["cpu_seconds"] > 0 and run["peak_rss_bytes"] > 10 * 2**20
    check_workload(name, run["phases"])
    if name in ("Gang", "LargeGang"):
        gangs = run["gang_latency_seconds"]
        assert gangs["gangs"] == gangs["bound"] == (len(gang_sizes(PODS)) if name == "Gang" else 1)
        assert gangs["partial"] == 0
    assert asyncio.run(leftovers(cluster.kubeconfig)) == ([], [])


@pytest.mark.parametrize(
    ("name", "arrival"),
    [("SchedulingBasic", "stream"), ("Gang", "stream"), ("MixedChurn", "backlog")],
)
def test_compare_measures_both_schedulers_on_identical_copies(
    capsys: pytest.CaptureFixture[str], controlplane_binaries: Binaries, name: str, arrival: str
) -> None:
    # backlog: each scheduler binds the init pods, is stopped while the measured pods
    # are created, and a new process of it works through them (the workload's smoke
    # size, which check_workload knows); stream: enough pods for measurable CPU
    pods = PODS if arrival == "backlog" else 30
    doc = bench(
        capsys,
        *("--workload", name, "--nodes", str(NODES), "--pods", str(pods), "--arrival", arrival),
        *("--compare", "kube-scheduler", "--controlplane-dir"),
        str(controlplane_binaries.etcd.parent),
    )
    assert (doc["target"], doc["arrival"]) == ("cluster", arrival)
    for which in ("kubesched", "kube-scheduler"):
        run = doc[which]
        assert run["scheduled"] == run["pods"] == pods, which
        assert run["throughput"]["overall"] > 0, which
        assert run["cpu_seconds"] > 0 and run["peak_rss_bytes"] > 10 * 2**20, which
    assert doc["ratio"] is not None and doc["ratio"] > 0
    if arrival == "backlog":
        for which in ("kubesched", "kube-scheduler"):
            check_workload(name, doc[which]["phases"])
    if name == "Gang":
        for which in ("kubesched", "kube-scheduler"):
            # the same upstream gangs, kube-scheduler with its own gang scheduling
            run = doc[which]
            assert run["gang_api"] == "scheduling.k8s.io/v1beta1", which
            gangs = run["gang_latency_seconds"]
            assert gangs["gangs"] == gangs["bound"] == len(gang_sizes(pods)), which
            assert gangs["partial"] == 0, which
        assert any("kube-scheduler with its own gang scheduling" in n for n in doc["notes"])
    else:
        assert "notes" not in doc


def test_bench_without_binaries_says_how_to_get_them(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBESCHED_CONTROLPLANE_DIR", raising=False)
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    code = cli.main(["bench", "--nodes", "1", "--pods", "1", "--compare", "kube-scheduler"])
    assert code == 2
    assert "tests/controlplane/build" in capsys.readouterr().err
