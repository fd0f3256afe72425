"""``kubesched run``: schedule pods on a real cluster.

Every flag sets one field of :class:`kubesched.operator.settings.Settings`, as does its
``KUBESCHED_<FIELD>`` environment variable; :data:`FLAGS` is that mapping, read both to
build the parser (each flag's help names its variable) and to word a refused value in
the user's terms (the flag or the variable they set, never the field)."""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Mapping
from typing import Any

from kubesched.cli.common import EXIT_OK, BadInput, run_async, seconds

__all__ = ["FLAGS", "add"]

ENV_PREFIX = "KUBESCHED_"  # kubesched.operator.settings.ENV_PREFIX (checked by a test)

#: flag -> Settings field. ``--leader-elect`` also has ``--no-leader-elect``.
FLAGS: dict[str, str] = {
    "--kubeconfig": "kubeconfig",
    "--scheduler-name": "scheduler_names",
    "--namespace": "namespace",
    "--leader-elect": "leader_elect",
    "--lease-name": "lease_name",
    "--leader-elect-lease-duration": "lease_duration",
    "--leader-elect-renew-deadline": "renew_deadline",
    "--leader-elect-retry-period": "retry_period",
    "--delegate-auth": "delegate_auth",
    "--bind-address": "bind_address",
    "--port": "port",
    "--kube-api-qps": "client_qps",
    "--kube-api-burst": "client_burst",
    "--profile-selector": "profile_selector",
    "--watch-engine": "watch_engine",
    "--seed": "seed",
    "--shutdown-flush-seconds": "shutdown_flush_seconds",
}


def env_var(field: str) -> str:
    return ENV_PREFIX + field.upper()


def _dest(flag: str) -> str:
    return flag.removeprefix("--").replace("-", "_")


def _settings_message(err: Any, given: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """A pydantic error of Settings in the user's words: the first problem, naming the
    flag (or environment variable) that set the field, and its value."""
    by_field = {f: flag for flag, f in FLAGS.items()}
    e = err.errors()[0]
    loc = [str(x) for x in e["loc"]]
    msg = str(e["msg"]).removeprefix("Value error, ")
    if loc:
        field = loc[0]
        if field in given:
            who = f"{by_field[field]} {given[field]!r}"
        elif env_var(field) in env:
            who = f"{env_var(field)}={env[env_var(field)]!r}"
        else:
            who = by_field.get(field, env_var(field))
        return f"{who}: {msg}"

    # a rule across fields: name them as the user set them
    def word(m: re.Match[str]) -> str:
        field = m.group(0)
        if field in given or env_var(field) not in env:
            return by_field.get(field, env_var(field))
        return env_var(field)

    names = "|".join(sorted(map(re.escape, FLAGS.values()), key=len, reverse=True))
    return re.sub(rf"\b({names})\b", word, msg)


def _run(args: argparse.Namespace) -> int:
    # Imported here: kopf and the kube client are not needed by the other subcommands.
    import logging

    import pydantic

    from kubesched.operator.settings import Settings

    given = {
        field: getattr(args, _dest(flag))
        for flag, field in FLAGS.items()
        if getattr(args, _dest(flag)) is not None
    }
    if "scheduler_names" in given and not given["scheduler_names"]:
        del given["scheduler_names"]
    try:
        settings = Settings.load(given)
    except pydantic.ValidationError as e:
        raise BadInput(_settings_message(e, given, os.environ)) from None
    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    prefetch = None
    if settings.watch_engine == "direct":
        # the first LIST of pods and nodes, while the scheduler's modules are imported
        from kubesched.cluster.prefetch import Prefetch

        prefetch = Prefetch(settings.kubeconfig).start()
    from kubesched.cluster.kubeconfig import load_client_configuration
    from kubesched.framework.cluster_port import ClusterError
    from kubesched.operator.run import LeadershipLost, run

    # A bad kubeconfig (KubeconfigError) ends run() before anything starts: one line.
    try:
        run_async(run(settings=settings, tune_gc=True, prefetch=prefetch))
    except LeadershipLost as e:
        print(f"kubesched run: {e}", file=sys.stderr)
        return 1
    except ClusterError as e:
        # the first LIST failed: the wrong server, a server down, an identity refused
        host = run_async(load_client_configuration(settings.kubeconfig)).host
        raise BadInput(f"the API server at {host}: {e}") from None
    return EXIT_OK


def _help(text: str, field: str) -> str:
    return f"{text} [{env_var(field)}]" if text else f"[{env_var(field)}]"


def add(sub: Any) -> None:
    p = sub.add_parser(
        "run",
        help="schedule pods on a real cluster (a Kopf operator)",
        description=(
            "Watch the cluster and schedule pods whose spec.schedulerName is served "
            "(default: kubesched). Each flag can also be set by the environment variable "
            "shown in brackets; a flag wins over its variable."
        ),
    )

    def flag(name: str, text: str, **kw: Any) -> None:
        p.add_argument(name, help=_help(text, FLAGS[name]), **kw)

    flag("--kubeconfig", "default: KUBECONFIG, ~/.kube/config, in-cluster", metavar="FILE")
    flag(
        "--scheduler-name",
        "a schedulerName to serve (repeatable; the variable takes a comma-separated list; "
        "default: kubesched)",
        metavar="NAME",
        action="append",
    )
    flag("--namespace", "the Lease's namespace (default: POD_NAMESPACE)", metavar="NS")
    flag(
        "--leader-elect",
        "elect a leader on a Lease before scheduling (default: on)",
        action=argparse.BooleanOptionalAction,
        default=None,
    )
    flag("--lease-name", "default: kubesched", metavar="NAME")
    for name, default in (
        ("--leader-elect-lease-duration", "15s"),
        ("--leader-elect-renew-deadline", "10s"),
        ("--leader-elect-retry-period", "2s"),
    ):
        flag(name, f"kube-scheduler's (default: {default})", type=seconds, metavar="DURATION")
    flag(
        "--delegate-auth",
        "serve /metrics, /debug, /explain and /ui only to bearer tokens the API server "
        "authenticates (TokenReview) and authorizes to get the path (SubjectAccessReview, "
        "nonResourceURLs RBAC), as kube-scheduler does; /healthz, /readyz, /livez stay open "
        "(default: off, and the server listens on 127.0.0.1 only)",
        action=argparse.BooleanOptionalAction,
        default=None,
    )
    flag(
        "--bind-address",
        "the address of every endpoint (default: 0.0.0.0 with --delegate-auth, else "
        "127.0.0.1; another address needs --delegate-auth)",
        metavar="ADDR",
    )
    flag("--port", "the port of every endpoint (default: 10251)", type=int, metavar="PORT")
    flag("--kube-api-qps", "default: 50; <= 0 lifts it", type=float, metavar="QPS")
    flag("--kube-api-burst", "default: 100", type=int, metavar="N")
    flag(
        "--profile-selector",
        "label selector of the SchedulingProfiles to apply, e.g. "
        "kubesched.dev/release=team-a (default: every SchedulingProfile)",
        metavar="SELECTOR",
    )
    flag(
        "--watch-engine",
        "how pods and nodes are watched (default: direct; see docs/bench.md)",
        choices=("kopf", "direct"),
    )
    flag(
        "--seed",
        "seed the random choices (preemption's offset, tied gang placements; default: random): placements as "
        "`kubesched simulate --seed S` makes for the same objects",
        type=int,
        metavar="S",
    )
    flag(
        "--shutdown-flush-seconds",
        "on SIGTERM, at most this long to finish binds in flight and write the queued "
        "Events (default: 20)",
        type=float,
        metavar="SECONDS",
    )
    p.add_argument(
        "--log-level",
        choices=("debug", "info", "warning", "error"),
        default="info",
        help="the least severe log records written to stderr (default: info)",
    )
    p.set_defaults(handler=_run)
