"""``kubesched bench --target simulate``: every workload, small, through the CLI.

The harness, not the timing: each workload's document says that every measured pod was
bound and measured, and that its phases did what the workload is about (gated pods
stayed pending, preemption victims are gone, the unschedulable trickle stayed pending
and was not counted, the churn happened, no gang was bound partly).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from kubesched.cli import main
from kubesched.simulator.workloads import WORKLOADS, gang_sizes
from tests.integration.bench_checks import NODES, PODS, check_workload


def bench(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code = main(["bench", "--target", "simulate", "--output", "json", "--seed", "1", *args])
    out, err = capsys.readouterr()
    assert code == 0, err
    doc: dict[str, Any] = orjson.loads(out)
    return doc


@pytest.mark.parametrize("name", list(WORKLOADS))
def test_every_workload_binds_its_measured_pods_and_does_its_part(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    doc = bench(capsys, "--workload", name, "--nodes", str(NODES), "--pods", str(PODS))
    assert (doc["workload"], doc["nodes"], doc["pods"], doc["target"]) == (
        name, NODES, PODS, "simulate"
    )  # fmt: skip
    assert doc["ratio"] is None and "kube-scheduler" not in doc
    run = doc["kubesched"]
    assert run["scheduled"] == run["pods"] == PODS
    lat = run["latency_seconds"]
    assert 0 <= lat["p50"] <= lat["p90"] <= lat["p99"]
    assert run["throughput"]["overall"] > 0
    assert run["cpu_seconds"] >= 0 and run["peak_rss_bytes"] > 10 * 2**20
    phases = run["phases"]
    assert phases["measured"]["pods"] == phases["measured"]["bound"] == PODS
    check_workload(name, phases)
    if name in ("Gang", "LargeGang"):
        gangs = run["gang_latency_seconds"]
        assert gangs["gangs"] == gangs["bound"] == (len(gang_sizes(PODS)) if name == "Gang" else 1)
        assert gangs["partial"] == 0
        assert 0 <= gangs["p50"] <= gangs["p90"] <= gangs["p99"]
    else:
        assert "gang_latency_seconds" not in run


@pytest.mark.parametrize(
    "name", ["SchedulingBasic", "MixedChurn", "PreemptionBasic", "SchedulingWhileGated", "Gang"]
)
def test_a_backlog_is_worked_through_with_the_same_outcome(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    doc = bench(
        capsys,
        *("--workload", name, "--nodes", str(NODES), "--pods", str(PODS), "--arrival", "backlog"),
    )
    assert doc["arrival"] == "backlog"
    run = doc["kubesched"]
    assert run["scheduled"] == run["pods"] == PODS
    check_workload(name, run["phases"])
    if name == "Gang":
        assert run["gang_latency_seconds"]["partial"] == 0


def test_gangs_mix_many_small_and_few_large() -> None:
    sizes = gang_sizes(1000)
    assert sum(sizes) == 1000
    large = [s for s in sizes if s >= 50]
    small = [s for s in sizes if s < 50]
    assert 1 <= len(large) < len(small)
    assert all(50 <= s <= 100 for s in large) and all(s <= 8 for s in small)
    assert sum(large) == pytest.approx(400, abs=100)


def test_the_old_workload_names_still_work(capsys: pytest.CaptureFixture[str]) -> None:
    doc = bench(capsys, "--workload", "SchedulingPodAntiAffinity", "--nodes", "3", "--pods", "3")
    assert doc["workload"] == "PodAntiAffinity" and doc["kubesched"]["scheduled"] == 3


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(
            ["--target", "simulate", "--compare", "kube-scheduler"],
            "--compare kube-scheduler needs --target cluster",
            id="compare-needs-cluster",
        ),
        pytest.param(["--workload", "Nope"], "unknown workload 'Nope'", id="unknown"),
        pytest.param(
            ["--workload", "PodAntiAffinity", "--nodes", "2", "--pods", "3"],
            "one pod per node",
            id="anti-affinity-too-many-pods",
        ),
    ],
)
def test_bad_requests_say_what_is_wrong(
    capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    assert main(["bench", *args]) == 2
    assert message in capsys.readouterr().err


def test_help_names_every_workload(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "--help"]) == 0
    out = capsys.readouterr().out
    for name, w in WORKLOADS.items():
        assert f"{name}  " in out and w.description in out
