"""``kubesched explain``: why a pod is pending, node by node.

Three sources: a scenario (scheduled first, as ``simulate`` would), one read of a live
cluster (:mod:`kubesched.cluster.reading`: every kind the scheduler reads, and its
SchedulingProfiles), or a running kubesched's ``/explain`` endpoint. Scenario and cluster
alike are loaded into an in-memory cluster and explained by the profile that serves the
pod's schedulerName, SchedulingProfiles included."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

import orjson

from kubesched.cli.common import EXIT_OK, BadInput, ctrl_c_deferred, http_url, run_async
from kubesched.cli.simulate import read_scenarios
from kubesched.simulator.scenario import prepare

__all__ = ["add"]


def _pod_key(text: str) -> tuple[str, str]:
    ns, sep, name = text.partition("/")
    if not sep:
        ns, name = "default", text
    if not ns or not name or "/" in name:
        raise argparse.ArgumentTypeError(f"expected NAMESPACE/NAME, got {text!r}")
    return ns, name


def _usable_profiles(
    objects: list[dict[str, Any]], selector: str = ""
) -> tuple[list[dict[str, Any]], list[str]]:
    """A cluster's SchedulingProfiles as an operator with this ``--profile-selector``
    would serve them: an invalid one serves nothing, and of two claiming one
    schedulerName the older serves."""
    from kubesched.framework.labels import parse_label_selector
    from kubesched.profile_status import validate_spec
    from kubesched.profiles import ProfileError

    kept: list[dict[str, Any]] = []
    warnings: list[str] = []
    serving: dict[str, str] = {}
    try:
        chosen = parse_label_selector(selector)
    except ValueError as e:
        raise BadInput(f"--profile-selector: {e}") from None
    profiles = [
        o
        for o in objects
        if o.get("kind") == "SchedulingProfile"
        and chosen.matches((o.get("metadata") or {}).get("labels") or {})
    ]
    profiles.sort(key=lambda o: str((o.get("metadata") or {}).get("creationTimestamp") or ""))
    for obj in profiles:
        name = str((obj.get("metadata") or {}).get("name") or "")
        try:
            compiled = validate_spec(obj.get("spec"))
        except ProfileError as e:
            warnings.append(f"SchedulingProfile {name!r} is invalid and serves nothing: {e}")
            continue
        owner = serving.get(compiled.scheduler_name)
        if owner is not None:
            warnings.append(
                f"SchedulingProfile {name!r} serves nothing: schedulerName "
                f"{compiled.scheduler_name!r} is served by {owner!r}"
            )
            continue
        serving[compiled.scheduler_name] = name
        kept.append(obj)
    rest = [o for o in objects if o.get("kind") != "SchedulingProfile"]
    return rest + kept, warnings


async def explain_objects(
    objects: list[dict[str, Any]], ns: str, name: str, *, schedule: bool
) -> Any:
    """Load objects into an in-memory cluster (scheduling them first if ``schedule``)
    and explain one pod against the result."""
    from kubesched.cluster.memory import MemoryCluster
    from kubesched.framework.types import Pod
    from kubesched.scheduler.eventhandlers import EventHandlers
    from kubesched.scheduler.explain import explain_pod
    from kubesched.scheduler.scheduler import Scheduler
    from kubesched.simulator.engine import run_until_settled, scenario_profiles, start

    profiles, objects = scenario_profiles(objects)
    cluster = MemoryCluster()
    sched = Scheduler(cluster, cluster, profiles=profiles, seed=0)
    bad: list[str] = []
    start(cluster, objects, EventHandlers(sched, on_bad_object=lambda k, o, m: bad.append(m)))
    if schedule:
        await run_until_settled(sched, cluster)
    raw = cluster.pod(f"{ns}/{name}")
    if raw is None:
        raise BadInput(f"pod {ns}/{name} not found")
    try:
        return explain_pod(sched, Pod(dict(raw)))
    except LookupError as e:
        raise BadInput(f"pod {ns}/{name}: {e}") from None


async def _from_cluster(args: argparse.Namespace, ns: str, name: str) -> Any:
    from kubesched.cluster.reading import ClusterReadError, read_cluster

    _usable_profiles([], args.profile_selector)  # a bad selector before any request
    try:
        read = await read_cluster(args.kubeconfig)
    except ClusterReadError as e:
        raise BadInput(str(e)) from None
    objects, warnings = _usable_profiles(read.objects, args.profile_selector)
    for w in read.warnings + warnings:
        print(f"kubesched: warning: {w}", file=sys.stderr)
    return await explain_objects(objects, ns, name, schedule=False)


async def _from_server(url: str, ns: str, name: str) -> dict[str, Any]:
    import aiohttp

    try:
        async with (
            aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=60)) as s,
            s.get(f"{url.rstrip('/')}/explain/{ns}/{name}") as resp,
        ):
            body = await resp.read()
            status = resp.status
    except TimeoutError:
        raise BadInput(f"{url}: no answer within 60 s") from None
    except aiohttp.ClientError as e:
        raise BadInput(f"{url}: cannot connect: {e}") from None
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError:
        doc = None
    if not isinstance(doc, dict):
        raise BadInput(f"{url}: HTTP {status}: not a kubesched endpoint")
    if status != 200:
        raise BadInput(f"{url}: {doc.get('error') or status}")
    return doc


def _explain(args: argparse.Namespace) -> int:
    with ctrl_c_deferred():
        from kubesched.scheduler.explain import Explanation

    ns, name = args.pod
    if args.server and (args.scenario or args.kubeconfig):
        raise BadInput("--server explains on a running kubesched: no --scenario or --kubeconfig")
    if args.scenario and args.kubeconfig:
        raise BadInput("--scenario explains a scenario, --kubeconfig a cluster: give one")
    if args.no_simulate and not args.scenario:
        raise BadInput("--no-simulate goes with --scenario")
    if args.profile_selector and (args.scenario or args.server):
        raise BadInput(
            "--profile-selector chooses a cluster's profiles: not with --scenario or --server"
        )
    if args.server:
        exp = Explanation.from_dict(run_async(_from_server(args.server, ns, name)))
    elif args.scenario:
        from kubesched.simulator.vtime import VirtualTimeLoop

        objects = prepare(read_scenarios(args.scenario))
        # virtual time: backoffs and Permit timeouts cost no wall time, as in `simulate`
        with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
            exp = runner.run(explain_objects(objects, ns, name, schedule=not args.no_simulate))
    else:
        exp = run_async(_from_cluster(args, ns, name))
    if args.output == "json":
        sys.stdout.write(orjson.dumps(exp.to_dict()).decode() + "\n")
    else:
        sys.stdout.write(exp.table())
    return EXIT_OK


def add(sub: Any) -> None:
    p = sub.add_parser(
        "explain",
        help="why a pod is pending: every node's verdict and the scores of those that fit",
        description=(
            "Run the PreFilter and every Filter of the profile serving the pod's "
            "schedulerName (SchedulingProfiles included) on every node for one pod and "
            "show, per node, the plugin and reason that rejected it, and for the nodes "
            "that fit, each Score plugin's weighted score. Reads the cluster once "
            "(--kubeconfig: every kind the scheduler reads), a scenario (--scenario, "
            "scheduled first as `simulate` would), or asks a running kubesched (--server)."
        ),
    )
    p.add_argument("pod", type=_pod_key, metavar="NAMESPACE/NAME")
    p.add_argument(
        "--kubeconfig", metavar="FILE", help="default: KUBECONFIG, ~/.kube/config, in-cluster"
    )
    p.add_argument(
        "--profile-selector",
        metavar="SELECTOR",
        default="",
        help="with a cluster: the SchedulingProfiles the running kubesched applies, as its "
        "own --profile-selector (default: every SchedulingProfile)",
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
        "--server",
        metavar="URL",
        type=http_url,
        help="ask a running kubesched (its /explain endpoint), e.g. http://127.0.0.1:10251",
    )
    p.add_argument("--output", choices=("table", "json"), default="table", help="default: table")
    p.set_defaults(handler=_explain)
