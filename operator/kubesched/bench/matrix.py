"""The benchmark matrix: every workload at each size that fits a 2-core machine.

``python -m kubesched.bench.matrix run --out FILE`` runs ``kubesched bench ... --target
cluster --compare kube-scheduler --output json`` once per cell, each in a process of its
own, appending one JSON document per line to FILE (a run that fails is recorded with its
error, and the matrix goes on). ``python -m kubesched.bench.matrix render FILE`` turns
the lines into the Markdown tables of docs/benchmarks.md.

Cells are (workload, nodes, pods). The sizes follow scheduler_perf where it has a case
(500 nodes / 1000 pods, 5000 nodes / 10000 pods) and stop where two shared cores stop:
100 and 1000 nodes for every workload, 5000 nodes for SchedulingBasic. Workloads whose
pods are limited by the node count (one anti-affine pod per node) get at most one pod
per node.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from kubesched.bench.report import samples_compared, throughput_ratio

__all__ = ["MATRIX", "Cell", "main", "render"]

Cell = tuple[str, int, int]

WORKLOAD_ORDER = (
    "SchedulingBasic",
    "NodeAffinity",
    "TopologySpreading",
    "PreferredTopologySpreading",
    "PodAntiAffinity",
    "PodAffinity",
    "PodAntiAffinitySymmetric",
    "MixedAffinitySpread",
    "Unschedulable",
    "MixedChurn",
    "PreemptionBasic",
    "SchedulingWhileGated",
    "Gang",
)

#: Measured pods per workload at 100 and at 1000 nodes: enough for a backlog to last
#: several one-second samples, within what the nodes hold (40 pod-default pods a node).
PODS: Mapping[str, tuple[int, int]] = {
    "PodAntiAffinity": (100, 1000),  # one per node: the node count bounds the pods
    "PodAffinity": (1000, 3000),  # all in one zone: a third of the nodes
    # one pod of each of 10 groups per node: 10 pods a node at most
    "PodAntiAffinitySymmetric": (500, 2000),
    "MixedAffinitySpread": (500, 2000),
    "PreemptionBasic": (200, 1000),  # every measured pod preempts
}
DEFAULT_PODS = (2000, 3000)


def _cells() -> list[Cell]:
    cells: list[Cell] = []
    for index, nodes in enumerate((100, 1000)):
        for w in WORKLOAD_ORDER:
            cells.append((w, nodes, PODS.get(w, DEFAULT_PODS)[index]))
    cells.append(("SchedulingBasic", 5000, 10000))
    return cells


MATRIX: tuple[Cell, ...] = tuple(_cells())


def _command(cell: Cell, arrival: str = "backlog") -> list[str]:
    workload, nodes, pods = cell
    return [
        "kubesched", "bench",
        "--workload", workload,
        "--nodes", str(nodes),
        "--pods", str(pods),
        "--target", "cluster",
        "--compare", "kube-scheduler",
        "--arrival", arrival,
        "--output", "json",
    ]  # fmt: skip


def _loadavg() -> float | None:
    try:
        return float(Path("/proc/loadavg").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _run_cell(argv: list[str], timeout: float) -> dict[str, Any]:
    """One ``kubesched bench`` process: its JSON document, or ``{"error": ...}``."""
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "kubesched", *argv[1:]],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if proc.returncode == 0:
        doc: dict[str, Any] = orjson.loads(proc.stdout.strip().splitlines()[-1])
        return doc
    return {"error": (proc.stderr or proc.stdout).strip()[-2000:]}


def run(
    cells: Iterable[Cell],
    out: Path,
    timeout: float,
    arrival: str = "backlog",
    retries: int = 1,
) -> int:
    """Run each cell; append its document (or its failure) to ``out``. A cell that fails is
    run again up to ``retries`` times (a shared machine's control plane sometimes stalls for
    a few seconds and a bench then fails on timeouts); the earlier failures stay in the
    document under ``failed_attempts``. Cells failed on every attempt count."""
    failed = 0
    for cell in cells:
        argv = _command(cell, arrival)
        started, load_before = time.time(), _loadavg()
        print(f"# {' '.join(argv)}", file=sys.stderr, flush=True)
        doc = _run_cell(argv, timeout)
        earlier: list[str] = []
        while "error" in doc and len(earlier) < retries:
            earlier.append(str(doc["error"])[-500:])
            print("  -> failed, running it again", file=sys.stderr, flush=True)
            doc = _run_cell(argv, timeout)
        if earlier:
            doc["failed_attempts"] = earlier
        doc.update(
            arrival=arrival,
            workload=cell[0],
            nodes=cell[1],
            pods=cell[2],
            command=" ".join(argv),
            wall_seconds=round(time.time() - started, 1),
            loadavg=[load_before, _loadavg()],
        )
        failed += "error" in doc
        with out.open("ab") as f:
            f.write(orjson.dumps(doc) + b"\n")
        summary = doc.get("error") or f"ratio {doc.get('ratio')}"
        print(f"  -> {summary}", file=sys.stderr, flush=True)
    return failed


# -- rendering --------------------------------------------------------------------------


def _num(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    return f"{value:.{digits}f}"


def _mib(value: Any) -> str:
    return "-" if value is None else f"{value / 2**20:.0f}"


def _side(doc: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    side = doc.get(name)
    return side if isinstance(side, Mapping) else {}


def _latency(side: Mapping[str, Any]) -> str:
    lat = side.get("latency_seconds") or {}
    return f"{_num(lat.get('p50'), 2)} / {_num(lat.get('p99'), 2)}"


def _throughput(side: Mapping[str, Any], other: Mapping[str, Any]) -> str:
    """The figure the ratio compares: the average of one-second samples, or overall
    throughput marked with * when either run has too few samples or samples that miss
    the binds an even rate would put in them (:func:`samples_compared`)."""
    tp = side.get("throughput") or {}
    if samples_compared(side, other):
        return _num(tp.get("average"))
    value = tp.get("overall")
    return "-" if value is None else f"{value:.0f}*"


def _ratio(doc: Mapping[str, Any]) -> float | None:
    """The ratio by today's rule (:func:`throughput_ratio`), so results recorded before
    a change of the rule render alike; the recorded one when a side is missing."""
    ks, kube = _side(doc, "kubesched"), _side(doc, "kube-scheduler")
    if "throughput" in ks and "throughput" in kube:
        return throughput_ratio(ks, kube)
    ratio = doc.get("ratio")
    return float(ratio) if isinstance(ratio, (int, float)) else None


def _rss_ratio(doc: Mapping[str, Any]) -> str:
    a = _side(doc, "kubesched").get("peak_rss_bytes")
    b = _side(doc, "kube-scheduler").get("peak_rss_bytes")
    return f"{a / b:.2f}" if a and b else "-"


def _control_plane_cpu(side: Mapping[str, Any]) -> str:
    other = side.get("other_cpu_seconds") or {}
    parts = [other.get("kube-apiserver"), other.get("etcd")]
    if all(x is None for x in parts):
        return "-"
    return "+".join(_num(x, 1) for x in parts)


def _gang(side: Mapping[str, Any]) -> str:
    g = side.get("gang_latency_seconds")
    if not isinstance(g, Mapping):
        return ""
    return (
        f"gangs {g.get('gangs')} (partial {g.get('partial')}), per-gang latency "
        f"p50 {_num(g.get('p50'), 2)} s / p99 {_num(g.get('p99'), 2)} s"
    )


HEADER = (
    "| workload | nodes | pods | kubesched pods/s | kube-scheduler pods/s "
    "| **ratio** | latency p50 / p99 s (ks / kube) | CPU s (ks / kube) "
    "| waiting for a CPU s (ks / kube) "
    "| apiserver+etcd CPU s (ks run / kube run) "
    "| peak RSS MiB (ks / kube) | RSS ratio | start to first bind s (ks / kube) "
    "| load (start, end) |\n"
    "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
)


def render(docs: Sequence[Mapping[str, Any]]) -> str:
    """The results tables, one per arrival, one row per cell (its last run wins)."""
    latest: dict[tuple[str, int, int, str], Mapping[str, Any]] = {}
    for doc in docs:
        arrival = str(doc.get("arrival") or "stream")
        latest[(doc["workload"], doc["nodes"], doc["pods"], arrival)] = doc
    order = {w: i for i, w in enumerate(WORKLOAD_ORDER)}
    out: list[str] = []
    for arrival in ("backlog", "stream"):
        keys = [k for k in latest if k[3] == arrival]
        if not keys:
            continue
        rows = [f"**arrival: {arrival}**", "", HEADER]
        notes: list[str] = []
        for key in sorted(keys, key=lambda k: (k[1], order.get(k[0], 99), k[2])):
            rows.append(_row(latest[key], notes))
        out.append("\n".join(rows) + ("\n\n" + "\n".join(notes) if notes else ""))
    return "\n\n".join(out) + "\n"


def _row(doc: Mapping[str, Any], notes: list[str]) -> str:
    w, nodes, pods = doc["workload"], doc["nodes"], doc["pods"]
    if "error" in doc:
        notes.append(f"- {w} {nodes}/{pods}: {str(doc['error']).splitlines()[-1][:300]}")
        return f"| {w} | {nodes} | {pods} | failed: see note | | | | | | | | | | |"
    ks, kube = _side(doc, "kubesched"), _side(doc, "kube-scheduler")
    load = doc.get("loadavg") or [None, None]
    for name, side in (("kubesched", ks), ("kube-scheduler", kube)):
        if side.get("scheduled") is not None and side.get("scheduled") != side.get("pods"):
            notes.append(f"- {w} {nodes}/{pods}: {name} bound {side['scheduled']}/{side['pods']}")
        gang = _gang(side)
        if gang:
            notes.append(f"- {w} {nodes}/{pods}, {name}: {gang}")
    for note in doc.get("notes") or []:
        notes.append(f"- {w} {nodes}/{pods}: {note}")
    for err in doc.get("failed_attempts") or []:
        last = str(err).strip().splitlines()[-1][:200] if str(err).strip() else "?"
        notes.append(f"- {w} {nodes}/{pods}: run again after a failed attempt ({last})")
    return (
        f"| {w} | {nodes} | {pods} "
        f"| {_throughput(ks, kube)} "
        f"| {_throughput(kube, ks)} "
        f"| **{_num(_ratio(doc), 2)}** "
        f"| {_latency(ks)} ; {_latency(kube)} "
        f"| {_num(ks.get('cpu_seconds'), 1)} / {_num(kube.get('cpu_seconds'), 1)} "
        f"| {_num(ks.get('cpu_wait_seconds'), 1)} / {_num(kube.get('cpu_wait_seconds'), 1)} "
        f"| {_control_plane_cpu(ks)} / {_control_plane_cpu(kube)} "
        f"| {_mib(ks.get('peak_rss_bytes'))} / {_mib(kube.get('peak_rss_bytes'))} "
        f"| {_rss_ratio(doc)} "
        f"| {_num(ks.get('start_to_first_bind_seconds'), 2)} / "
        f"{_num(kube.get('start_to_first_bind_seconds'), 2)} "
        f"| {_num(load[0], 1)}, {_num(load[1], 1)} |"
    )


SHARED = ("kube-apiserver", "etcd", "bench")
"""The processes both halves of a cell share the machine with (``other_cpu_seconds``)."""

BOUNDS_HEADER = (
    "| workload | nodes | pods | **ratio** | predicted | CPU ms a pod, shared (ks run / kube run) "
    "| CPU ms a pod, scheduler (ks / kube) | cores busy (ks run / kube run) "
    "| kubesched's CPU ms a pod for 1.5x |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def cpu_per_pod(side: Mapping[str, Any]) -> tuple[float, float, float] | None:
    """(CPU seconds a measured pod cost the shared processes, :data:`SHARED`; cost the
    scheduler; cores the two kept busy over the window), or None without the figures."""
    other = side.get("other_cpu_seconds") or {}
    pods, own, seconds = side.get("pods"), side.get("cpu_seconds"), side.get("seconds")
    if not pods or own is None or not seconds or any(other.get(p) is None for p in SHARED):
        return None
    shared = sum(float(other[p]) for p in SHARED)
    return shared / pods, float(own) / pods, (shared + float(own)) / float(seconds)


def bounds(docs: Sequence[Mapping[str, Any]], target: float = 1.5) -> str:
    """Where the machine bounds each cell's ratio: the CPU a measured pod cost each half
    of the run, the shared processes apart from the scheduler. When both halves keep the
    machine's cores busy (with stream arrival the API server takes the pods' creations as
    fast as it can), each half's pods/s is the cores over its CPU per pod, so the ratio
    is about (kube-scheduler's half's CPU per pod) / (kubesched's). The last column is the
    CPU per pod kubesched would need for ``target`` with the shared cost of its half as
    measured."""
    rows = [BOUNDS_HEADER]
    latest: dict[tuple[str, int, int], Mapping[str, Any]] = {}
    for doc in docs:
        if "error" not in doc:
            latest[(doc["workload"], doc["nodes"], doc["pods"])] = doc
    order = {w: i for i, w in enumerate(WORKLOAD_ORDER)}
    for key in sorted(latest, key=lambda k: (k[1], order.get(k[0], 99), k[2])):
        doc = latest[key]
        ks = cpu_per_pod(_side(doc, "kubesched"))
        kube = cpu_per_pod(_side(doc, "kube-scheduler"))
        if ks is None or kube is None:
            continue
        predicted = (kube[0] + kube[1]) / (ks[0] + ks[1])
        needed = (kube[0] + kube[1]) / target - ks[0]
        rows.append(
            f"| {key[0]} | {key[1]} | {key[2]} | **{_num(_ratio(doc), 2)}** | {predicted:.2f} "
            f"| {ks[0] * 1e3:.2f} / {kube[0] * 1e3:.2f} | {ks[1] * 1e3:.2f} / {kube[1] * 1e3:.2f} "
            f"| {ks[2]:.2f} / {kube[2]:.2f} | {needed * 1e3:.2f} |"
        )
    return "\n".join(rows) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m kubesched.bench.matrix", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run the matrix (or part of it), appending to --out")
    r.add_argument("--out", type=Path, required=True)
    r.add_argument("--workload", action="append", help="only these workloads")
    r.add_argument("--nodes", type=int, action="append", help="only these node counts")
    r.add_argument("--timeout", type=float, default=1800.0, help="per cell, seconds")
    r.add_argument(
        "--arrival",
        choices=("backlog", "stream"),
        default="backlog",
        help="how measured pods arrive (see kubesched bench --help; default: backlog, "
        "the scheduler's own throughput)",
    )
    r.add_argument(
        "--retries",
        type=int,
        default=1,
        help="run a failed cell again this many times (default 1; earlier failures are kept "
        "in its document)",
    )
    r.add_argument("--list", action="store_true", help="print the cells and exit")
    p = sub.add_parser("render", help="print the Markdown table of a results file")
    p.add_argument("results", type=Path)
    b = sub.add_parser(
        "bounds",
        help="print, per cell of a results file, the CPU a pod cost each half of the run "
        "and the ratio that predicts (see docs/benchmarks.md, What bounds each number)",
    )
    b.add_argument("results", type=Path)
    args = parser.parse_args(argv)
    if args.command in ("render", "bounds"):
        lines = args.results.read_bytes().splitlines()
        docs = [orjson.loads(line) for line in lines if line.strip()]
        print((render if args.command == "render" else bounds)(docs), end="")
        return 0
    cells = [
        c
        for c in MATRIX
        if (not args.workload or c[0] in args.workload) and (not args.nodes or c[1] in args.nodes)
    ]
    if args.list:
        for cell in cells:
            print(" ".join(_command(cell, args.arrival)))
        return 0
    if not os.environ.get("KUBESCHED_CONTROLPLANE_DIR") and not os.environ.get(
        "KUBEBUILDER_ASSETS"
    ):
        print(
            "set KUBESCHED_CONTROLPLANE_DIR (tests/controlplane/build prints it)", file=sys.stderr
        )
        return 2
    return 1 if run(cells, args.out, args.timeout, args.arrival, args.retries) else 0


if __name__ == "__main__":
    sys.exit(main())
