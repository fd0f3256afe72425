"""``kubesched run``: schedule pods on a real cluster.

The parser is built from :func:`kubesched.operator.settings.options`: every setting has
one flag, typed after its field, whose help ends with its environment variable
(``[env KUBESCHED_PORT]``). A refused value is worded in the user's terms (the flag or the
variable they set, never the field)."""

from __future__ import annotations

import argparse
import os
import re
import sys
import types
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, Literal

from kubesched.cli.common import EXIT_OK, BadInput, ctrl_c_deferred, run_async, seconds
from kubesched.operator.environ import variables
from kubesched.operator.settings import ENV_PREFIX, Option, Settings, env_name, options

if TYPE_CHECKING:
    import asyncio

__all__ = ["ENV_PREFIX", "FLAGS", "add", "env_var", "loop_factory"]

#: flag -> Settings field, for every setting. A bool's ``--x`` also has ``--no-x``.
FLAGS: dict[str, str] = {opt.flag: field for field, opt in options().items()}

env_var = env_name


def _settings_message(err: Any, given: Mapping[str, Any], env: Mapping[str, str]) -> str:
    """A pydantic error of Settings in the user's words: the first problem, naming the
    flag (or environment variable, as spelled) that set the field, and its value."""
    by_field = {f: flag for flag, f in FLAGS.items()}
    set_by = variables(env, ENV_PREFIX)  # field -> (the variable as set, its value)
    e = err.errors()[0]
    loc = [str(x) for x in e["loc"]]
    msg = str(e["msg"]).removeprefix("Value error, ")
    if loc:
        field = loc[0]
        if field in given:
            who = f"{by_field[field]} {given[field]!r}"
        elif field in set_by:
            name, text = set_by[field]
            who = f"{name}={text!r}"
        else:
            who = by_field.get(field, env_var(field))
        return f"{who}: {msg}"

    # a rule across fields: name them as the user set them
    def word(m: re.Match[str]) -> str:
        field = m.group(0)
        if field in given or field not in set_by:
            return by_field.get(field, env_var(field))
        return set_by[field][0]

    names = "|".join(sorted(map(re.escape, FLAGS.values()), key=len, reverse=True))
    return re.sub(rf"\b({names})\b", word, msg)


def _given(args: argparse.Namespace) -> dict[str, Any]:
    """The settings whose flags were given (each flag's ``dest`` is its field)."""
    given = {field: getattr(args, field) for field in FLAGS.values()}
    return {field: value for field, value in given.items() if value is not None}


def loop_factory(choice: str) -> Callable[[], asyncio.AbstractEventLoop]:
    """The event loop ``--event-loop`` chooses (see the ``event_loop`` setting)."""
    import asyncio

    if choice == "asyncio":
        return asyncio.new_event_loop
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise BadInput(
                "--event-loop uvloop: uvloop is not installed (pip install uvloop, or "
                "--event-loop asyncio)"
            ) from None
        return asyncio.new_event_loop
    return uvloop.new_event_loop


def _run(args: argparse.Namespace) -> int:
    # Imported here: kopf and the kube client are not needed by the other subcommands.
    import logging

    import pydantic

    given = _given(args)
    try:
        settings = Settings.load(given)
    except pydantic.ValidationError as e:
        raise BadInput(_settings_message(e, given, os.environ)) from None
    new_loop = loop_factory(settings.event_loop)
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # the first LIST of pods and nodes, while the scheduler's modules are imported
    from kubesched.cli import early

    prefetch = early.take(
        getattr(args, "early_listing", None), settings.kubeconfig, settings.watch_engine
    )
    with ctrl_c_deferred():
        from kubesched.cluster.kubeconfig import load_client_configuration
        from kubesched.framework.cluster_port import ClusterError
        from kubesched.operator.run import LeadershipLost, run

    # A bad kubeconfig (KubeconfigError) ends run() before anything starts: one line.
    try:
        run_async(run(settings=settings, tune_gc=True, prefetch=prefetch), new_loop)
    except LeadershipLost as e:
        print(f"kubesched run: {e}", file=sys.stderr)
        return 1
    except ClusterError as e:
        # the first LIST failed: the wrong server, a server down, an identity refused
        host = run_async(load_client_configuration(settings.kubeconfig)).host
        raise BadInput(f"the API server at {host}: {e}") from None
    return EXIT_OK


def _argument(field: str, opt: Option) -> dict[str, Any]:
    """``add_argument``'s keywords for one setting, its type read from the field's."""
    kw: dict[str, Any] = {"dest": field, "default": None}
    kw["help"] = f"{opt.help} [env {env_var(field)}]"
    if opt.metavar:
        kw["metavar"] = opt.metavar
    annotation = Settings.model_fields[field].annotation
    if isinstance(annotation, types.UnionType):  # X | None: the flag gives an X
        (annotation,) = [a for a in typing.get_args(annotation) if a is not type(None)]
    origin = typing.get_origin(annotation)
    if annotation is bool:
        kw["action"] = argparse.BooleanOptionalAction
    elif origin is list:
        kw["action"] = "append"
    elif origin is Literal:
        kw["choices"] = typing.get_args(annotation)
    elif opt.duration:
        kw["type"] = seconds
    elif annotation in (int, float):
        kw["type"] = annotation
    elif annotation is not str:
        raise TypeError(f"Settings.{field}: no flag type for {annotation!r}")
    return kw


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
    for field, opt in options().items():
        p.add_argument(opt.flag, **_argument(field, opt))
    p.set_defaults(handler=_run)
