"""The benchmark matrix: which cells it runs, and the table docs/benchmarks.md shows."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from kubesched.bench import matrix
from kubesched.bench.report import RunResult, document
from kubesched.simulator.workloads import check_fits, plan


def _doc(workload: str, nodes: int, pods: int, ours: float, theirs: float) -> dict[str, object]:
    results = {
        "kubesched": RunResult(
            "kubesched", pods, scheduled=pods, samples=[ours] * 3, seconds=1.0,
            peak_rss_bytes=300 * 2**20, cpu_seconds=2.0, latencies=[0.5, 1.5],
        ),
        "kube-scheduler": RunResult(
            "kube-scheduler", pods, scheduled=pods - 1, samples=[theirs] * 3, seconds=1.0,
            peak_rss_bytes=200 * 2**20, cpu_seconds=4.0, latencies=[0.25],
        ),
    }  # fmt: skip
    return document(workload=workload, nodes=nodes, pods=pods, target="cluster", results=results)


def test_every_workload_runs_at_100_and_1000_nodes_and_basic_at_5000() -> None:
    by_nodes: dict[int, set[str]] = {}
    for workload, nodes, pods in matrix.MATRIX:
        by_nodes.setdefault(nodes, set()).add(workload)
        assert pods > 0
    assert by_nodes[100] == by_nodes[1000] == set(matrix.WORKLOAD_ORDER)
    assert by_nodes[5000] == {"SchedulingBasic"}
    # one anti-affine pod per node at most: more could never be bound
    assert all(p <= n for w, n, p in matrix.MATRIX if w == "PodAntiAffinity")
    for w, n, p in matrix.MATRIX:
        check_fits(plan(w, n, p))  # no cell asks for more than its nodes can bind


def test_the_table_shows_the_ratio_rss_and_what_was_left_unbound() -> None:
    table = matrix.render(
        [
            _doc("SchedulingBasic", 100, 50, 300.0, 200.0),
            _doc("SchedulingBasic", 100, 50, 240.0, 200.0),  # a rerun: the last one wins
            {"workload": "Gang", "nodes": 100, "pods": 50, "error": "boom\nno nodes"},
        ]
    )
    rows = [line for line in table.splitlines() if line.startswith("| SchedulingBasic")]
    assert len(rows) == 1
    assert "| 240 | 200 | **1.20** |" in rows[0]
    assert "| 300 / 200 | 1.50 |" in rows[0]
    assert "kube-scheduler bound 49/50" in table
    assert "Gang 100/50: no nodes" in table


def test_the_table_shows_start_to_first_bind_per_side() -> None:
    doc = _doc("SchedulingBasic", 1000, 5000, 700.0, 450.0)
    doc["kubesched"]["start_to_first_bind_seconds"] = 0.204  # type: ignore[index]
    doc["kube-scheduler"]["start_to_first_bind_seconds"] = 0.25  # type: ignore[index]
    doc["kubesched"]["cpu_wait_seconds"] = 31.04  # type: ignore[index]
    table = matrix.render([{**doc, "arrival": "backlog"}])
    assert "start to first bind s (ks / kube)" in table
    (row,) = [line for line in table.splitlines() if line.startswith("| SchedulingBasic")]
    assert "| 0.20 / 0.25 |" in row
    assert "| 2.0 / 4.0 | 31.0 / - |" in row  # CPU, then waiting for a CPU (kube: unknown)
    assert row.count("|") == matrix.HEADER.splitlines()[0].count("|")


def test_run_records_a_failing_cell_and_goes_on(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    # a workload the CLI refuses: the cell fails fast with the CLI's message
    failed = matrix.run([("NoSuchWorkload", 1, 1), ("NoSuchWorkload", 2, 2)], out, 60.0)
    lines = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert failed == 2
    assert [(d["nodes"], d["pods"]) for d in lines] == [(1, 1), (2, 2)]
    assert all("unknown workload" in d["error"] for d in lines)


def test_backlog_and_stream_runs_get_tables_of_their_own() -> None:
    stream = _doc("SchedulingBasic", 100, 50, 300.0, 200.0)
    backlog = {**_doc("SchedulingBasic", 100, 50, 100.0, 200.0), "arrival": "backlog"}
    table = matrix.render([stream, backlog])
    first, second = table.split("**arrival: stream**")
    assert "**arrival: backlog**" in first and "**0.50**" in first and "**1.50**" not in first
    assert "**1.50**" in second
    assert "--arrival backlog" in " ".join(matrix._command(("SchedulingBasic", 1, 1)))


def test_a_failed_cell_is_run_again_and_its_failure_kept(tmp_path: Path) -> None:
    out = tmp_path / "results.jsonl"
    failed = matrix.run([("NoSuchWorkload", 1, 1)], out, 60.0, retries=2)
    (doc,) = [orjson.loads(line) for line in out.read_bytes().splitlines()]
    assert failed == 1
    assert len(doc["failed_attempts"]) == 2
    assert all("unknown workload" in e for e in doc["failed_attempts"])


def test_a_cell_that_needed_a_second_attempt_says_so() -> None:
    doc = {
        **_doc("Gang", 1000, 3000, 70.0, 50.0),
        "arrival": "backlog",
        "failed_attempts": ["...\nkubesched: error: the API server at x: TimeoutError:"],
    }
    table = matrix.render([doc])
    assert "Gang 1000/3000: run again after a failed attempt (kubesched: error" in table


def test_bounds_show_the_cpu_a_pod_cost_each_half_and_the_ratio_it_predicts(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = _doc("SchedulingBasic", 1000, 3000, 400.0, 300.0)
    # kubesched's half: 3000 pods, 3 CPU s of its own, 9 s of the API server, etcd and
    # bench, in 6 s; kube-scheduler's: 6 CPU s of its own and 12 shared, in 9 s
    doc["kubesched"].update(  # type: ignore[attr-defined]
        cpu_seconds=3.0,
        seconds=6.0,
        other_cpu_seconds={"kube-apiserver": 7.0, "etcd": 1.5, "bench": 0.5},
    )
    doc["kube-scheduler"].update(  # type: ignore[attr-defined]
        cpu_seconds=6.0,
        seconds=9.0,
        other_cpu_seconds={"kube-apiserver": 9.5, "etcd": 2.0, "bench": 0.5},
    )
    no_figures = _doc("Gang", 1000, 3000, 400.0, 300.0)  # no shared CPU recorded: left out
    table = matrix.bounds([doc, no_figures])
    rows = [line for line in table.splitlines() if line.startswith("| ")][1:]  # no header
    # predicted (4 + 2) / (3 + 1) = 1.50; for 1.5x kubesched may spend 6 / 1.5 - 3 = 1 ms
    measured = f"{matrix._ratio(doc):.2f}"  # the table's ratio, as the results table has it
    assert rows == [
        f"| SchedulingBasic | 1000 | 3000 | **{measured}** | 1.50 | 3.00 / 4.00 | 1.00 / 2.00 "
        "| 2.00 / 2.00 | 1.00 |"
    ]
    results = tmp_path / "r.jsonl"
    results.write_bytes(orjson.dumps(doc) + b"\n")
    assert matrix.main(["bounds", str(results)]) == 0
    assert f"| SchedulingBasic | 1000 | 3000 | **{measured}** | 1.50 |" in capsys.readouterr().out
