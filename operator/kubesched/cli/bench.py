"""``kubesched bench``: measure scheduling throughput and latency on scheduler_perf's
workloads, in this process (``--target simulate``) or against an API server, beside
kube-scheduler (``--compare``)."""

from __future__ import annotations

import argparse
import textwrap
from typing import Any

import orjson

from kubesched.cli.common import EXIT_OK, BadInput, count, run_async, seconds
from kubesched.simulator.workloads import WORKLOADS, resolve

__all__ = ["add"]


def _bench_target(args: argparse.Namespace) -> str:
    if args.target is not None:
        if args.target == "simulate" and args.compare:
            raise BadInput(
                "--compare kube-scheduler needs --target cluster (kube-scheduler runs against "
                "a real API server; the simulate target runs kubesched alone)"
            )
        if args.target == "simulate" and args.kubeconfig:
            raise BadInput("--kubeconfig needs --target cluster")
        return str(args.target)
    return "cluster" if args.compare or args.kubeconfig else "simulate"


def _bench(args: argparse.Namespace) -> int:
    # Imported here: aiohttp and the kube client are not needed by the other subcommands.
    from kubesched.bench.cluster import (
        KUBE_SCHEDULER,
        KUBESCHED,
        BenchOptions,
        bench_cluster,
        notes,
    )
    from kubesched.bench.controlplane import ControlPlaneError, binaries_dir
    from kubesched.bench.report import RunResult, document, render_table
    from kubesched.bench.runner import Limits, RunError
    from kubesched.bench.simulate import bench_simulate
    from kubesched.simulator.workloads import check_fits, plan

    target = _bench_target(args)
    try:
        workload = resolve(args.workload)
        the_plan = plan(workload, args.nodes, args.pods)
        check_fits(the_plan)
    except ValueError as e:
        raise BadInput(str(e)) from None
    results: dict[str, RunResult]
    run_notes: list[str] = []
    try:
        if target == "simulate":
            limits = Limits(args.creators, args.idle_timeout, args.timeout, args.arrival)
            results = {KUBESCHED: run_async(bench_simulate(the_plan, limits, seed=args.seed))}
        else:
            schedulers = [KUBESCHED] + ([KUBE_SCHEDULER] if args.compare else [])
            binaries = None
            if args.kubeconfig is None or args.compare:
                binaries = binaries_dir(args.controlplane_dir)
            options = BenchOptions(
                workload=workload,
                nodes=args.nodes,
                pods=args.pods,
                kubeconfig=args.kubeconfig,
                binaries=binaries,
                creators=args.creators,
                idle_timeout=args.idle_timeout,
                timeout=args.timeout,
                arrival=args.arrival,
            )
            results = run_async(bench_cluster(options, schedulers))
            run_notes = notes(options, results)
    except (ControlPlaneError, RunError) as e:
        raise BadInput(str(e)) from None
    w = WORKLOADS[workload]
    doc = document(
        workload=workload,
        nodes=w.default_nodes if args.nodes is None else args.nodes,
        pods=len(the_plan.measured),
        target=target,
        results=results,
        notes=run_notes,
    )
    doc["arrival"] = args.arrival
    if args.output == "json":
        print(orjson.dumps(doc).decode())
    else:
        print(render_table(doc))
    return EXIT_OK


_BENCH_DESCRIPTION = (
    "\n\n".join(
        textwrap.fill(paragraph, 88, break_on_hyphens=False)
        for paragraph in (
            "Schedule a generated workload and measure throughput (measured pods bound per "
            "second, sampled every second, the first sample dropped), create-to-bound latency, "
            "CPU seconds and peak RSS, and per-gang latency for Gang.",
            "--target simulate runs kubesched in this process on an in-memory cluster (no API "
            "server: the scheduler's own cost). --target cluster runs `kubesched run` (and with "
            "--compare kube-scheduler, the real kube-scheduler on an identical copy) against a "
            "real API server: a fresh etcd + kube-apiserver per scheduler unless --kubeconfig "
            "names a cluster. Gangs are Kubernetes' Workload/PodGroup (scheduling.k8s.io/v1beta1) "
            "for both schedulers, kube-scheduler with its own gang scheduling (the bench's "
            "control plane turns on GenericWorkload and TopologyAwareWorkloadScheduling).",
            "workloads (nodes: 4 CPU, 32Gi, 110 pods, zones as labels):",
        )
    )
    + "\n"
)


def _workload_lines() -> str:
    width = max(len(n) for n in WORKLOADS)
    return "\n".join(f"  {n:<{width}}  {w.description}" for n, w in WORKLOADS.items())


def add(sub: Any) -> None:
    p = sub.add_parser(
        "bench",
        help="measure scheduling throughput and latency (scheduler_perf workloads)",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=_BENCH_DESCRIPTION + _workload_lines(),
    )
    p.add_argument(
        "--workload",
        default="SchedulingBasic",
        metavar="NAME",
        help="one of the workloads above (default: SchedulingBasic)",
    )
    p.add_argument("--nodes", type=count, metavar="N", help="default: the workload's")
    p.add_argument(
        "--pods", type=count, metavar="M", help="measured pods (default: the workload's)"
    )
    p.add_argument(
        "--target",
        choices=("simulate", "cluster"),
        help="where to schedule (default: cluster with --compare or --kubeconfig, else simulate)",
    )
    p.add_argument(
        "--compare",
        choices=("kube-scheduler",),
        help="also measure kube-scheduler on an identical copy (--target cluster only)",
    )
    p.add_argument(
        "--kubeconfig",
        metavar="FILE",
        help="a cluster to use (bare nodes and pods are created there, in a fresh "
        "namespace, then removed); default: a throw-away control plane",
    )
    p.add_argument(
        "--controlplane-dir",
        metavar="DIR",
        help="etcd, kube-apiserver, kube-scheduler (default: "
        "KUBESCHED_CONTROLPLANE_DIR, then KUBEBUILDER_ASSETS)",
    )
    p.add_argument(
        "--arrival",
        choices=("stream", "backlog"),
        default="stream",
        help="stream: measured pods are created while the scheduler runs (scheduler_perf's "
        "way; on a small machine both schedulers often just keep pace with the creators); "
        "backlog: all are created while the scheduler is stopped, then it is started and "
        "works through them (its own throughput; latency counts from its start) "
        "(default: stream)",
    )
    p.add_argument(
        "--creators",
        type=int,
        default=32,
        metavar="N",
        help="pod create requests in flight (default: 32)",
    )
    p.add_argument(
        "--idle-timeout",
        type=seconds,
        default=30.0,
        metavar="DURATION",
        help="give up when no pod of the run changed for this long (default: 30s)",
    )
    p.add_argument(
        "--timeout",
        type=seconds,
        default=600.0,
        metavar="DURATION",
        help="give up on a phase after this long (default: 600s)",
    )
    p.add_argument("--seed", type=int, metavar="S", help="simulate: seed the random choices")
    p.add_argument("--output", choices=("table", "json"), default="table")
    p.set_defaults(handler=_bench)
