"""``kubesched ui``: the web view of a cluster, served locally; schedules nothing.

The cluster is read as ``kubesched explain --kubeconfig`` reads it
(:mod:`kubesched.cluster.reading`: every kind the scheduler reads, and its
SchedulingProfiles), loaded into an in-memory scheduler that never runs a cycle, and
read again every ``--refresh`` seconds. Pending pods therefore sit in activeQ (or gated),
and the page explains each against the cluster as it is. :func:`snapshot_page` is the
same page for ``simulate --html``.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import sys
from typing import Any

from kubesched.cli.common import EXIT_OK, BadInput, count, run_async, seconds

__all__ = ["add", "snapshot_page"]


def snapshot_page(sched: Any, source: str) -> str:
    """The web view of ``sched`` now, as one HTML file (every pending pod explained, up
    to 200)."""
    import time

    from kubesched.ui import collect
    from kubesched.ui.shape import QueueHistory
    from kubesched.ui.web import render_page

    doc = collect.state(sched, QueueHistory(), now=time.time(), source=source, explain_all=200)
    return render_page(doc)


async def _load(args: argparse.Namespace) -> Any:
    """An in-memory scheduler holding one read of the cluster (no cycle runs)."""
    from kubesched.cli.explain import _usable_profiles
    from kubesched.cluster.memory import MemoryCluster
    from kubesched.cluster.reading import ClusterReadError, read_cluster
    from kubesched.scheduler.eventhandlers import EventHandlers
    from kubesched.scheduler.scheduler import Scheduler
    from kubesched.simulator.engine import scenario_profiles, start

    try:
        read = await read_cluster(args.kubeconfig)
    except ClusterReadError as e:
        raise BadInput(str(e)) from None
    objects, warnings = _usable_profiles(read.objects, args.profile_selector)
    for w in read.warnings + warnings:
        print(f"kubesched: warning: {w}", file=sys.stderr)
    profiles, objects = scenario_profiles(objects)
    cluster = MemoryCluster()
    sched = Scheduler(cluster, cluster, profiles=profiles, seed=0)
    start(cluster, objects, EventHandlers(sched, on_bad_object=lambda k, o, m: None))
    return sched


async def _serve(args: argparse.Namespace) -> None:
    from aiohttp import web

    from kubesched.cli.explain import _usable_profiles
    from kubesched.ui.web import SchedulerSource, add_routes

    _usable_profiles([], args.profile_selector)  # a bad selector before any request
    current = [await _load(args)]
    source = SchedulerSource(lambda: current[0], source="cluster (read-only, schedules nothing)")
    app = web.Application()
    add_routes(app, source)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    try:
        # Our own socket: its bound port is known when --port is 0.
        try:
            sock = socket.create_server((args.address, args.port))
        except OSError as e:
            raise BadInput(f"cannot listen on {args.address}:{args.port}: {e.strerror}") from None
        await web.SockSite(runner, sock).start()
        port = sock.getsockname()[1]
        host = f"[{args.address}]" if ":" in args.address else args.address
        print(f"kubesched: the web view is at http://{host}:{port}/ui/", flush=True)
        while True:
            await asyncio.sleep(args.refresh)
            try:
                current[0] = await _load(args)
            except BadInput as e:  # keep showing the last read
                print(f"kubesched: warning: {e}", file=sys.stderr)
    finally:
        await runner.cleanup()


def _ui(args: argparse.Namespace) -> int:
    run_async(_serve(args))
    return EXIT_OK


def add(sub: Any) -> None:
    p = sub.add_parser(
        "ui",
        help="serve the web view of a cluster locally (queues, gangs, profiles, why pending)",
        description=(
            "Read the cluster as `kubesched explain` does and serve the web view at "
            "http://ADDRESS:PORT/ui/, read again every --refresh seconds. Nothing is "
            "scheduled: pending pods are shown as they are and explained node by node."
        ),
    )
    p.add_argument(
        "--kubeconfig", metavar="FILE", help="default: KUBECONFIG, ~/.kube/config, in-cluster"
    )
    p.add_argument(
        "--profile-selector",
        metavar="SELECTOR",
        default="",
        help="the SchedulingProfiles the running kubesched applies (default: every one)",
    )
    p.add_argument("--address", default="127.0.0.1", help="default: 127.0.0.1")
    p.add_argument("--port", type=count, default=10270, help="default: 10270 (0: any free port)")
    p.add_argument(
        "--refresh",
        type=seconds,
        default=10.0,
        metavar="SECONDS",
        help="read the cluster again this often (default: 10)",
    )
    p.set_defaults(handler=_ui)
