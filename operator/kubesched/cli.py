"""The ``kubesched`` command line: ``run``, ``bench``, ``simulate``, ``explain`` and ``version``.

Each subcommand is a ``_add_<name>`` function that registers its parser and handler;
handlers return the exit code. Bad input (an invalid scenario, a bad flag) prints one
message to stderr and exits with 2, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import sys
import textwrap
from collections.abc import Iterator, Sequence
from importlib import resources
from typing import Any

import orjson

from kubesched import __version__
from kubesched.framework.types import ObjectError
from kubesched.simulator.scenario import Document, ScenarioError, prepare, read_documents
from kubesched.simulator.workloads import NAMES, WORKLOADS, generate, resolve

__all__ = ["main"]

EXIT_OK = 0
EXIT_BAD_INPUT = 2


class BadInput(Exception):
    """Input the user can fix; the message is printed as is."""


def _count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {n}")
    return n


def _seconds(text: str) -> float:
    """A duration as kube-scheduler's flags take it: ``15s``, ``500ms``, ``1m``, or seconds."""
    number, scale = text, 1.0
    for suffix, factor in (("ms", 0.001), ("s", 1.0), ("m", 60.0)):  # "ms" before "s"
        if text.endswith(suffix):
            number, scale = text[: -len(suffix)], factor
            break
    try:
        value = float(number) * scale
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 15s)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


# --- simulate ----------------------------------------------------------------------------


@contextlib.contextmanager
def _demo_path() -> Iterator[str]:
    with resources.as_file(resources.files("kubesched") / "data" / "demo.yaml") as p:
        yield str(p)


def _load(args: argparse.Namespace) -> list[dict[str, Any]]:
    if args.workload is None and (args.nodes is not None or args.pods is not None):
        raise BadInput("--nodes and --pods size a generated workload: add --workload NAME")
    documents: list[Document] = []
    for path in args.scenario:
        documents.extend(read_documents(path))
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


def _summary(pods: Sequence[Any], nodes: int, seconds: float) -> dict[str, Any]:
    scheduled = sum(1 for p in pods if p.status == "Scheduled")
    unschedulable = sum(1 for p in pods if p.status == "Unschedulable")
    return {
        "nodes": nodes,
        "pods": len(pods),
        "scheduled": scheduled,
        "unschedulable": unschedulable,
        "seconds": seconds,
        "pods_per_second": scheduled / seconds if seconds > 0 else 0,
    }


def _duration(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _table(pods: Sequence[Any], summary: dict[str, Any]) -> str:
    header = ("NAMESPACE", "NAME", "NODE", "STATUS", "MESSAGE")
    rows = [header] + [(p.namespace, p.name, p.node or "<none>", p.status, p.message) for p in pods]
    widths = [max(len(r[i]) for r in rows) for i in range(len(header) - 1)]
    lines = [
        "   ".join(cell.ljust(w) for cell, w in zip(r[:-1], widths, strict=True)) + "   " + r[-1]
        for r in rows
    ]
    waiting = summary["pods"] - summary["scheduled"] - summary["unschedulable"]
    lines.append("")
    lines.append(
        f"{summary['scheduled']}/{summary['pods']} pods scheduled, "
        f"{summary['unschedulable']} unschedulable, {waiting} waiting; "
        f"{summary['nodes']} nodes; {_duration(summary['seconds'])} "
        f"({summary['pods_per_second']:.0f} pods/s)"
    )
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _simulate(args: argparse.Namespace) -> int:
    # Imported here: the engine pulls in the whole scheduler, which `version` never needs.
    from kubesched.simulator.engine import run_simulation

    objects = _load(args)
    # asyncio.run, minus its one side effect: with a loop_factory, the Runner leaves the
    # thread's current event loop alone, so main() can be called in-process (tests,
    # embedding) without orphaning the caller's loop.
    with asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner:
        result = runner.run(run_simulation(objects, seed=args.seed))
    summary = _summary(result.pods, result.nodes, result.seconds)
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
            "summary": summary,
        }
        sys.stdout.write(orjson.dumps(payload).decode() + "\n")
    else:
        sys.stdout.write(_table(result.pods, summary))
    sys.stdout.flush()
    return EXIT_OK


def _add_simulate(sub: Any) -> None:
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
        "PodDisruptionBudget objects; pods with spec.nodeName are existing load",
    )
    p.add_argument(
        "--workload",
        metavar="NAME",
        choices=list(NAMES),
        help=f"a generated workload modelled on scheduler_perf: {', '.join(WORKLOADS)} "
        "(its objects without background operations; see `kubesched bench --help`)",
    )
    p.add_argument(
        "--nodes", type=_count, metavar="N", help="workload nodes (default: 500, as scheduler_perf)"
    )
    p.add_argument(
        "--pods", type=_count, metavar="M", help="workload pods (default: 1000, as scheduler_perf)"
    )
    p.add_argument("--output", choices=("table", "json"), default="table", help="default: table")
    p.add_argument(
        "--seed", type=int, metavar="S", help="seed the random tie-breaking among equal scores"
    )
    p.set_defaults(handler=_simulate)


# --- run -----------------------------------------------------------------------------------


def _run(args: argparse.Namespace) -> int:
    # Imported here: kopf and the kube client are not needed by the other subcommands.
    import logging

    import pydantic

    from kubesched.operator.run import LeadershipLost, run
    from kubesched.operator.settings import Settings

    overrides = {
        "kubeconfig": args.kubeconfig,
        "scheduler_names": args.scheduler_name or None,
        "namespace": args.namespace,
        "leader_elect": args.leader_elect,
        "lease_name": args.lease_name,
        "lease_duration": args.leader_elect_lease_duration,
        "renew_deadline": args.leader_elect_renew_deadline,
        "retry_period": args.leader_elect_retry_period,
        "bind_address": args.bind_address,
        "port": args.port,
        "client_qps": args.kube_api_qps,
        "client_burst": args.kube_api_burst,
        "profile_selector": args.profile_selector,
        "watch_engine": args.watch_engine,
        "seed": args.seed,
    }
    try:
        settings = Settings.load(overrides)
    except pydantic.ValidationError as e:
        raise BadInput(str(e)) from None
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    with asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner:
        try:
            runner.run(run(settings=settings, tune_gc=True))
        except LeadershipLost as e:
            print(f"kubesched run: {e}", file=sys.stderr)
            return 1
    return EXIT_OK


def _add_run(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="schedule pods on a real cluster (a Kopf operator)",
        description=(
            "Watch the cluster and schedule pods whose spec.schedulerName is served "
            "(default: kubesched). Every flag has a KUBESCHED_<FIELD> environment variable."
        ),
    )
    p.add_argument(
        "--kubeconfig", metavar="FILE", help="default: KUBECONFIG, ~/.kube/config, in-cluster"
    )
    p.add_argument(
        "--scheduler-name",
        metavar="NAME",
        action="append",
        help="a schedulerName to serve (repeatable; default: kubesched)",
    )
    p.add_argument(
        "--namespace", metavar="NS", help="the Lease's namespace (default: POD_NAMESPACE)"
    )
    p.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="elect a leader on a Lease before scheduling (default: on)",
    )
    p.add_argument("--lease-name", metavar="NAME", help="default: kubesched")
    for flag, default in (
        ("--leader-elect-lease-duration", "15s"),
        ("--leader-elect-renew-deadline", "10s"),
        ("--leader-elect-retry-period", "2s"),
    ):
        p.add_argument(
            flag, type=_seconds, metavar="DURATION", help=f"kube-scheduler's (default: {default})"
        )
    p.add_argument(
        "--bind-address", metavar="ADDR", help="health/metrics address (default: 0.0.0.0)"
    )
    p.add_argument("--port", type=int, metavar="PORT", help="health/metrics port (default: 10251)")
    p.add_argument("--kube-api-qps", type=float, metavar="QPS", help="default: 50; <= 0 lifts it")
    p.add_argument("--kube-api-burst", type=int, metavar="N", help="default: 100")
    p.add_argument(
        "--profile-selector",
        metavar="SELECTOR",
        help="label selector of the SchedulingProfiles to apply, e.g. "
        "kubesched.dev/release=team-a (default: every SchedulingProfile)",
    )
    p.add_argument(
        "--watch-engine",
        choices=("kopf", "direct"),
        help="how pods and nodes are watched (default: direct; see docs/bench.md)",
    )
    p.add_argument(
        "--seed",
        type=int,
        metavar="S",
        help="seed the tie-breaking among equal scores (default: random): placements as "
        "`kubesched simulate --seed S` makes for the same objects",
    )
    p.add_argument("--log-level", choices=("debug", "info", "warning", "error"), default="info")
    p.set_defaults(handler=_run)


# --- explain -------------------------------------------------------------------------------


def _pod_key(text: str) -> tuple[str, str]:
    ns, sep, name = text.partition("/")
    if not sep:
        ns, name = "default", text
    if not ns or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"expected NAMESPACE/NAME, got {text!r}")
    return ns, name


async def _explain_objects(
    objects: list[dict[str, Any]], ns: str, name: str, *, schedule: bool
) -> Any:
    """Load objects into an in-memory cluster (scheduling them first if ``schedule``)
    and explain one pod against the result."""
    from kubesched.cluster.memory import MemoryCluster
    from kubesched.framework.types import Pod
    from kubesched.scheduler.eventhandlers import EventHandlers
    from kubesched.scheduler.explain import explain_pod
    from kubesched.scheduler.scheduler import Scheduler
    from kubesched.simulator.engine import start

    cluster = MemoryCluster()
    sched = Scheduler(cluster, cluster, seed=0)
    bad: list[str] = []
    start(cluster, objects, EventHandlers(sched, on_bad_object=lambda k, o, m: bad.append(m)))
    if schedule:
        await sched.run_until_idle()
    raw = cluster.pod(f"{ns}/{name}")
    if raw is None:
        raise BadInput(f"pod {ns}/{name} not found")
    try:
        return explain_pod(sched, Pod(dict(raw)))
    except LookupError as e:
        raise BadInput(f"pod {ns}/{name}: {e}") from None


async def _cluster_objects(kubeconfig: str | None) -> list[dict[str, Any]]:
    """One consistent list of what the plugins read, from the API server."""
    from kubernetes_asyncio import client as k8s_client

    from kubesched.cluster.kube import API_PATHS, KubeCluster, load_client_configuration

    cfg = await load_client_configuration(kubeconfig)
    objects: list[dict[str, Any]] = []
    async with k8s_client.ApiClient(configuration=cfg) as api:
        kube = KubeCluster(api, reporting_instance_suffix="explain")
        for kind, (prefix, _) in API_PATHS.items():
            try:
                items = await kube.list_objects(kind)
            except Exception as e:
                if kind in ("Pod", "Node"):
                    raise BadInput(f"cannot list {kind}s: {e}") from None
                print(f"kubesched explain: skipping {kind}s: {e}", file=sys.stderr)
                continue
            api_version = prefix.removeprefix("/api/").removeprefix("/apis/")
            objects.extend({**o, "kind": kind, "apiVersion": api_version} for o in items)
    return objects


async def _explain_from_server(url: str, ns: str, name: str) -> dict[str, Any]:
    import aiohttp

    async with (
        aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as s,
        s.get(f"{url.rstrip('/')}/explain/{ns}/{name}") as resp,
    ):
        body = await resp.read()
        try:
            doc: dict[str, Any] = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise BadInput(f"{url}: HTTP {resp.status}: not a kubesched endpoint") from None
        if resp.status != 200:
            raise BadInput(f"{url}: {doc.get('error') or resp.status}")
        return doc


def _explain(args: argparse.Namespace) -> int:
    from kubesched.scheduler.explain import Explanation

    ns, name = args.pod
    if args.server and (args.scenario or args.kubeconfig):
        raise BadInput("--server explains on a running kubesched: no --scenario or --kubeconfig")
    if args.server:
        with asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner:
            doc = runner.run(_explain_from_server(args.server, ns, name))
        exp = Explanation.from_dict(doc)
    elif args.scenario:
        from kubesched.simulator.vtime import VirtualTimeLoop

        documents: list[Document] = []
        for path in args.scenario:
            documents.extend(read_documents(path))
        objects = prepare(documents)
        loop = VirtualTimeLoop()
        try:
            exp = loop.run_until_complete(
                _explain_objects(objects, ns, name, schedule=not args.no_simulate)
            )
        finally:
            loop.close()
    else:
        with asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner:
            objects = runner.run(_cluster_objects(args.kubeconfig))
            exp = runner.run(_explain_objects(objects, ns, name, schedule=False))
    if args.output == "json":
        sys.stdout.write(orjson.dumps(exp.to_dict()).decode() + "\n")
    else:
        sys.stdout.write(exp.table())
    return EXIT_OK


def _add_explain(sub: Any) -> None:
    p = sub.add_parser(
        "explain",
        help="why a pod is pending: every node's verdict and the scores of those that fit",
        description=(
            "Run the default profile's PreFilter and every Filter on every node for one pod "
            "and show, per node, the plugin and reason that rejected it, and for the nodes "
            "that fit, each Score plugin's weighted score. Reads the cluster once "
            "(--kubeconfig), a scenario (--scenario, scheduled first as `simulate` would), "
            "or asks a running kubesched (--server)."
        ),
    )
    p.add_argument("pod", type=_pod_key, metavar="NAMESPACE/NAME")
    p.add_argument(
        "--kubeconfig", metavar="FILE", help="default: KUBECONFIG, ~/.kube/config, in-cluster"
    )
    p.add_argument(
        "--scenario",
        metavar="FILE",
        action="append",
        default=[],
        help="explain a pod of a scenario file (repeatable) instead of a cluster",
    )
    p.add_argument(
        "--no-simulate",
        action="store_true",
        help="with --scenario: explain before any pod is scheduled, not after",
    )
    p.add_argument(
        "--server", metavar="URL", help="ask a running kubesched (its /explain endpoint)"
    )
    p.add_argument("--output", choices=("table", "json"), default="table", help="default: table")
    p.set_defaults(handler=_explain)


# --- validate ----------------------------------------------------------------------------

EXIT_INVALID = 1


def _validate(args: argparse.Namespace) -> int:
    from kubesched.profile_status import check_objects

    code = EXIT_OK
    for path in args.files:
        try:
            docs = [d for d in read_documents(path) if d.obj is not None]
        except ScenarioError as e:
            print(e)
            code = EXIT_INVALID
            continue
        if not docs:
            print(f"{path}: no SchedulingProfile in the file")
            code = EXIT_INVALID
        for doc, (name, err) in zip(docs, check_objects([d.obj for d in docs]), strict=True):
            where = f"{doc.where()} (SchedulingProfile {name})"
            if err is None:
                print(f"{where}: Ready=True Compiled")
            else:
                print(f"{where}: Ready=False {err.reason}: {err.message}")
                code = EXIT_INVALID
    sys.stdout.flush()
    return code


def _add_validate(sub: Any) -> None:
    p = sub.add_parser(
        "validate",
        help="check SchedulingProfile files offline",
        description="Check SchedulingProfile files with the operator's validation and "
        "messages (unknown plugins, plugins at points they do not implement, plugin args, "
        "two QueueSort plugins, schedulerName conflicts among the files). Exit status 0 if "
        "every profile is valid, 1 otherwise.",
    )
    p.add_argument("files", metavar="FILE", nargs="+", help="YAML, one or more documents")
    p.set_defaults(handler=_validate)


# --- version -----------------------------------------------------------------------------


def _version(args: argparse.Namespace) -> int:
    print(f"kubesched {__version__}")
    return EXIT_OK


def _add_version(sub: Any) -> None:
    p = sub.add_parser("version", help="print the version")
    p.set_defaults(handler=_version)


# --- bench ---------------------------------------------------------------------------------


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
        with asyncio.Runner(loop_factory=asyncio.new_event_loop) as runner:
            if target == "simulate":
                limits = Limits(args.creators, args.idle_timeout, args.timeout, args.arrival)
                results = {KUBESCHED: runner.run(bench_simulate(the_plan, limits, seed=args.seed))}
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
                run_notes = notes(options, schedulers)
                results = runner.run(bench_cluster(options, schedulers))
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
            "names a cluster. kube-scheduler has no gang scheduling: for Gang it schedules the "
            "same pods without PodGroups.",
            "workloads (nodes: 4 CPU, 32Gi, 110 pods, zones as labels):",
        )
    )
    + "\n"
)


def _workload_lines() -> str:
    width = max(len(n) for n in WORKLOADS)
    return "\n".join(f"  {n:<{width}}  {w.description}" for n, w in WORKLOADS.items())


def _add_bench(sub: Any) -> None:
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
    p.add_argument("--nodes", type=_count, metavar="N", help="default: the workload's")
    p.add_argument(
        "--pods", type=_count, metavar="M", help="measured pods (default: the workload's)"
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
        type=_seconds,
        default=30.0,
        metavar="DURATION",
        help="give up when no pod of the run changed for this long (default: 30s)",
    )
    p.add_argument(
        "--timeout",
        type=_seconds,
        default=600.0,
        metavar="DURATION",
        help="give up on a phase after this long (default: 600s)",
    )
    p.add_argument("--seed", type=int, metavar="S", help="simulate: seed the tie-breaking")
    p.add_argument("--output", choices=("table", "json"), default="table")
    p.set_defaults(handler=_bench)


# --- entry point -------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kubesched",
        description="A Kubernetes scheduler in Python with kube-scheduler's plugin framework.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_run(sub)
    _add_bench(sub)
    _add_explain(sub)
    _add_simulate(sub)
    _add_validate(sub)
    _add_version(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    parser = _parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, or a usage error argparse already printed
        return e.code if isinstance(e.code, int) else EXIT_BAD_INPUT
    try:
        code: int = args.handler(args)
    except (BadInput, ScenarioError, ObjectError) as e:
        print(f"kubesched {args.command}: {e}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (e.g. `| head`): stop quietly, as other CLIs do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    return code


if __name__ == "__main__":
    sys.exit(main())
