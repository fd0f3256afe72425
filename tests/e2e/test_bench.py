"""``kubesched bench --target cluster --compare kube-scheduler``: the harness, not the timing.

20 nodes and 50 pods of SchedulingBasic, each scheduler on a throw-away control plane of
its own, started as child processes: every pod is bound by both, and the document has
every number the issue asks for.
"""

from __future__ import annotations

import pytest

from kubesched import cli
from kubesched.bench.cluster import KUBE_SCHEDULER, KUBESCHED, BenchOptions, bench_cluster
from kubesched.bench.report import document, render_table
from tests.controlplane import Binaries

pytestmark = pytest.mark.timeout(120)


async def test_both_schedulers_bind_every_pod_and_are_measured(
    controlplane_binaries: Binaries,
) -> None:
    options = BenchOptions(nodes=20, pods=50, binaries=controlplane_binaries.etcd.parent)
    results = await bench_cluster(options, (KUBESCHED, KUBE_SCHEDULER))
    doc = document(workload="SchedulingBasic", nodes=20, pods=50, target="cluster", results=results)
    assert (doc["workload"], doc["nodes"], doc["pods"]) == ("SchedulingBasic", 20, 50)
    for name in ("kubesched", "kube-scheduler"):
        run = doc[name]
        assert run["scheduled"] == run["pods"] == 50, name
        lat = run["latency_seconds"]
        assert 0 <= lat["p50"] <= lat["p90"] <= lat["p99"], name
        assert run["throughput"]["overall"] > 0, name
        assert run["cpu_seconds"] is not None and run["cpu_seconds"] > 0, name
        assert run["peak_rss_bytes"] > 10 * 2**20, name
    assert doc["ratio"] is not None and doc["ratio"] > 0
    table = render_table(doc)
    assert "kube-scheduler" in table and "ratio" in table


def test_bench_without_binaries_says_how_to_get_them(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBESCHED_CONTROLPLANE_DIR", raising=False)
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    code = cli.main(["bench", "--nodes", "1", "--pods", "1", "--compare", "kube-scheduler"])
    assert code == 2
    assert "tests/controlplane/build" in capsys.readouterr().err
