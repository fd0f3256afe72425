"""``kubesched simulate``: schedule a scenario (and/or a generated workload) in memory."""

from __future__ import annotations

import argparse
import contextlib
import sys
from collections.abc import Iterator, Sequence
from importlib import resources
from typing import Any

import orjson

from kubesched.cli.common import EXIT_OK, BadInput, count
from kubesched.simulator.scenario import Document, prepare, read_documents
from kubesched.simulator.workloads import NAMES, WORKLOADS, generate

__all__ = ["add"]


@contextlib.contextmanager
def _demo_path() -> Iterator[str]:
    with resources.as_file(resources.files("kubesched") / "data" / "demo.yaml") as p:
        yield str(p)


def read_scenarios(paths: Sequence[str]) -> list[Document]:
    """The documents of scenario files, in order; a file without any is a mistake (a
    wrong path in a glob, a file not saved yet), not an empty cluster."""
    documents: list[Document] = []
    for path in paths:
        docs = read_documents(path)
        if not docs:
            raise BadInput(f"{path}: no objects in the file (expected Nodes, Pods, ...)")
        documents.extend(docs)
    return documents


def _load(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.workload is None and (args.nodes is not None or args.pods is not None):
        raise BadInput("--nodes and --pods size a generated workload: add --workload NAME")
    documents = read_scenarios(args.scenario)
    if args.workload is not None:
        try:
            objs = generate(args.workload, args.nodes, args.pods)
        except ValueError as e:
            raise BadInput(str(e)) from None
        source = f"workload {args.workload}"
        documents.extend(Document(source, i, obj) for i, obj in enumerate(objs))
    if not args.scenario and args.workload is None:
        with _demo_path() as demo:
            documents = read_documents(demo)
    return prepare(documents)


def summary(pods: Sequence[Any], nodes: int, seconds: float) -> dict[str, Any]:
    """The counts the table's last line shows, and the rate."""
    scheduled = sum(1 for p in pods if p.status == "Scheduled")
    unschedulable = sum(1 for p in pods if p.status == "Unschedulable")
    errors = sum(1 for p in pods if p.status == "SchedulerError")
    return {
        "nodes": nodes,
        "pods": len(pods),
        "scheduled": scheduled,
        "unschedulable": unschedulable,
        "errors": errors,
        "waiting": len(pods) - scheduled - unschedulable - errors,
        "seconds": seconds,
        "pods_per_second": scheduled / seconds if seconds > 0 else 0,
    }


def _duration(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def table(pods: Sequence[Any], s: dict[str, Any], preempted: Sequence[Any] = ()) -> str:
    header = ("NAMESPACE", "NAME", "NODE", "STATUS", "MESSAGE")
    rows = [header] + [(p.namespace, p.name, p.node or "<none>", p.status, p.message) for p in pods]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    lines = [
        "   ".join(cell.ljust(w) for cell, w in zip(r[:-1], widths, strict=True)) + "   " + r[-1]
        for r in rows
    ]
    if preempted:
        # Who preempted whom: the victims are gone from the cluster (and the rows above).
        width = max(len("PREEMPTED"), *(len(p.victim) for p in preempted))
        lines.append("")
        lines.append(f"{'PREEMPTED'.ljust(width)}   BY")
        lines.extend(f"{p.victim.ljust(width)}   {p.by}" for p in preempted)
    lines.append("")
    lines.append(
        f"{s['scheduled']}/{s['pods']} pods scheduled, "
        f"{s['unschedulable']} unschedulable, "
        + (f"{_plural(s['errors'], 'error')}, " if s["errors"] else "")
        + f"{s['waiting']} waiting; "
        f"{_plural(s['nodes'], 'node')}; {_duration(s['seconds'])} "
        f"({s['pods_per_second']:.0f} pods/s)"
    )
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _simulate(args: argparse.Namespace) -> int:
    # Imported here: the engine pulls in the whole scheduler, which `version` never needs.
    from kubesched.simulator.engine import simulate

    objects = _load(args)
    pages: list[str] = []
    inspect = None
    if args.html:
        from kubesched.cli.ui import snapshot_page

        source = ", ".join(args.scenario) or (
            f"workload {args.workload}" if args.workload else "the demo"
        )
        inspect = lambda sched: pages.append(snapshot_page(sched, f"simulation of {source}"))  # noqa: E731
    # In this thread: Ctrl-C reaches the simulation's loop and stops it.
    result = simulate(objects, seed=args.seed, inspect=inspect)
    if args.html:
        try:
            with open(args.html, "w", encoding="utf-8") as f:
                f.write(pages[0])
        except OSError as e:
            raise BadInput(f"--html {args.html}: {e.strerror or e}") from None
    s = summary(result.pods, result.nodes, result.seconds)
    if args.output == "json":
        payload = {
            "pods": [
                {
                    "namespace": p.namespace,
                    "name": p.name,
                    "node": p.node,
                    "status": p.status,
                    "message": p.message,
                }
                for p in result.pods
            ],
            "summary": s,
            "preempted": [p.victim for p in result.preempted],
            "preemptedBy": {p.victim: p.by for p in result.preempted},
        }
        sys.stdout.write(orjson.dumps(payload).decode() + "\n")
    else:
        sys.stdout.write(table(result.pods, s, result.preempted))
    sys.stdout.flush()
    return EXIT_OK


def add(sub: Any) -> None:
    p = sub.add_parser(
        "simulate",
        help="schedule a scenario on an in-memory cluster",
        description=(
            "Run kubesched on an in-memory cluster built from Kubernetes manifests "
            "(--scenario, repeatable) and/or a generated workload (--workload). "
            "With neither, a built-in demo cluster and workload are used."
        ),
    )
    p.add_argument(
        "--scenario",
        metavar="FILE",
        action="append",
        default=[],
        help="multi-document YAML of Namespace, Node, Pod, PriorityClass, "
        "PodDisruptionBudget, SchedulingProfile, PodGroup, ... objects; pods with "
        "spec.nodeName are existing load; ReplicaSets, Deployments, StatefulSets and Jobs "
        "create their pods",
    )
    p.add_argument(
        "--workload",
        metavar="NAME",
        choices=list(NAMES),
        help=f"a generated workload modelled on scheduler_perf: {', '.join(WORKLOADS)} "
        "(its objects without background operations; see `kubesched bench --help`)",
    )
    p.add_argument(
        "--nodes", type=count, metavar="N", help="workload nodes (default: 500, as scheduler_perf)"
    )
    p.add_argument(
        "--pods", type=count, metavar="M", help="workload pods (default: 1000, as scheduler_perf)"
    )
    p.add_argument("--output", choices=("table", "json"), default="table", help="default: table")
    p.add_argument(
        "--html",
        metavar="FILE",
        help="also write the web view (queues, gangs, profiles, why each pending pod is "
        "pending) of the end of the simulation as one self-contained HTML file",
    )
    p.add_argument(
        "--seed",
        type=int,
        metavar="S",
        help="seed the random choices (preemption's offset, tied gang placements)",
    )
    p.set_defaults(handler=_simulate)
