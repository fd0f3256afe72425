"""kubesched bench's numbers: nearest-rank percentiles and the ratio in the document."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.bench.report import RunResult, document, percentile, throughput_summary


@pytest.mark.parametrize(
    ("values", "q", "expected"),
    [
        ([], 50, None),
        ([3.0], 99, 3.0),
        ([1.0, 2.0, 3.0, 4.0], 50, 2.0),
        ([4.0, 1.0, 3.0, 2.0], 90, 4.0),
        ([float(i) for i in range(1, 101)], 99, 99.0),
    ],
    ids=["empty", "one", "median-of-four", "unsorted-p90", "p99-of-100"],
)
def test_percentile_is_nearest_rank(values: list[float], q: float, expected: float | None) -> None:
    assert percentile(values, q) == expected


def test_ratio_is_the_average_of_one_second_samples() -> None:
    ours = RunResult("kubesched", 300, scheduled=300, samples=[100.0] * 3, seconds=4.0)
    theirs = RunResult("kube-scheduler", 300, scheduled=300, samples=[200.0] * 3, seconds=2.5)
    doc = document(
        workload="SchedulingBasic",
        nodes=10,
        pods=300,
        target="cluster",
        results={"kubesched": ours, "kube-scheduler": theirs},
    )
    assert doc["ratio"] == 0.5
    assert doc["kubesched"]["throughput"]["average"] == 100.0
    assert throughput_summary([])["average"] is None


def test_one_or_two_samples_compare_overall_throughput_not_their_average() -> None:
    # a 2.9 s run whose binds came in a burst: one sample, of the wrong second
    ours = RunResult("kubesched", 200, scheduled=200, samples=[40.0] * 5, seconds=6.3)
    theirs = RunResult("kube-scheduler", 200, scheduled=200, samples=[0.0], seconds=2.9)
    doc = document(
        workload="PreemptionBasic",
        nodes=100,
        pods=200,
        target="cluster",
        results={"kubesched": ours, "kube-scheduler": theirs},
    )
    assert doc["ratio"] == round((200 / 6.3) / (200 / 2.9), 3)


def test_runs_too_short_for_a_sample_compare_overall_throughput() -> None:
    ours = RunResult("kubesched", 50, scheduled=50, seconds=0.5)
    theirs = RunResult("kube-scheduler", 50, scheduled=50, seconds=0.25)
    doc = document(
        workload="SchedulingBasic",
        nodes=20,
        pods=50,
        target="cluster",
        results={"kubesched": ours, "kube-scheduler": theirs},
    )
    assert doc["ratio"] == 0.5


def test_samples_that_miss_most_binds_compare_overall_throughput() -> None:
    """A run whose binds nearly all came in a burst outside its whole seconds (the
    preemptors' last second): its samples hold 120 of 1000 binds, and their average
    (2 pods/s) would make the other run look 8 times as fast as it was."""
    ours = RunResult("kubesched", 1000, scheduled=1000, samples=[16.0] * 45, seconds=46.7)
    theirs = RunResult("kube-scheduler", 1000, scheduled=1000, samples=[2.0] * 60, seconds=54.9)
    doc = document(
        workload="PreemptionBasic",
        nodes=1000,
        pods=1000,
        target="cluster",
        results={"kubesched": ours, "kube-scheduler": theirs},
    )
    assert doc["ratio"] == round((1000 / 46.7) / (1000 / 54.9), 3)


def _doc(ours: RunResult, theirs: RunResult) -> dict[str, Any]:
    return document(
        workload="PreemptionBasic",
        nodes=1000,
        pods=ours.pods,
        target="cluster",
        results={"kubesched": ours, "kube-scheduler": theirs},
    )


def test_samples_holding_half_the_binds_of_a_window_they_nearly_cover_compare_overall() -> None:
    """The stream PreemptionBasic cell of 0c17140: kubesched's 23 samples covered 23 s of
    its 24.5 s window yet held half its binds (the rest came in a burst in its last part
    second), so their average, 21.8 pods/s, said the run was as fast as kube-scheduler's
    47.7 s run (21.2). Overall throughput says it was twice as fast."""
    ours = RunResult("kubesched", 1000, scheduled=1000, samples=[21.8] * 23, seconds=24.5)
    theirs = RunResult("kube-scheduler", 1000, scheduled=999, samples=[21.25] * 47, seconds=47.7)
    assert _doc(ours, theirs)["ratio"] == round((1000 / 24.5) / (999 / 47.7), 3)


def test_a_short_run_whose_samples_hold_what_their_seconds_would_compares_averages() -> None:
    """A 6.5 s run has 5 whole seconds after the dropped first one: they can hold no more
    than about 5/6.5 of its binds at an even rate, so 70% in them is an even run, and
    scheduler_perf's average is compared."""
    ours = RunResult("kubesched", 3000, scheduled=3000, samples=[420.0] * 5, seconds=6.5)
    theirs = RunResult("kube-scheduler", 3000, scheduled=3000, samples=[350.0] * 7, seconds=8.2)
    assert _doc(ours, theirs)["ratio"] == round(420.0 / 350.0, 3)
