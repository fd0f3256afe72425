"""The ``kubesched`` command line: ``run``, ``bench``, ``explain``, ``simulate``, ``ui``,
``validate`` and ``version``, one module per subcommand, each with an ``add(subparsers)`` that
registers its parser and a handler returning the exit code.

A user's mistake (a bad flag, file, scenario, kubeconfig or address) prints one line,
``kubesched: error: <what is wrong>``, and exits with 2: never a traceback. Ctrl-C stops
any command promptly with exit status 130. ``kubectl_main`` is the same command as a
kubectl plugin (``kubectl kubesched explain ns/pod``).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from kubesched import __version__
from kubesched.cli.common import EXIT_BAD_INPUT, EXIT_INTERRUPTED, EXIT_OK, BadInput

__all__ = ["kubectl_main", "main"]

PROG = "kubesched"


class _Parser(argparse.ArgumentParser):
    """argparse, with a usage mistake worded like every other one: a single line."""

    def error(self, message: str) -> NoReturn:
        if "required: COMMAND" in message:
            self.print_usage(sys.stderr)  # no command at all: show what there is
        hint = f" (see {self.prog} --help)"
        self.exit(EXIT_BAD_INPUT, f"{PROG}: error: {message}{hint}\n")


def _version(args: argparse.Namespace) -> int:
    print(f"kubesched {__version__}")
    return EXIT_OK


def _parser(prog: str = PROG) -> argparse.ArgumentParser:
    # Imported here, inside main()'s Ctrl-C handling: importing the scheduler takes a
    # moment, and an interrupt then must not print a traceback either.
    from kubesched.cli import bench, explain, run, simulate, ui, validate

    parser = _Parser(
        prog=prog,
        description="A Kubernetes scheduler in Python with kube-scheduler's plugin framework.",
    )
    parser.add_argument("--version", action="version", version=f"kubesched {__version__}")
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_Parser
    )
    run.add(sub)
    bench.add(sub)
    explain.add(sub)
    simulate.add(sub)
    ui.add(sub)
    validate.add(sub)
    sub.add_parser("version", help="print the version").set_defaults(handler=_version)
    return parser


def _fail(message: str) -> int:
    # one line: a message spanning lines (a YAML snippet) is joined
    text = " ".join(part.strip() for part in str(message).splitlines() if part.strip())
    print(f"{PROG}: error: {text}", file=sys.stderr)
    return EXIT_BAD_INPUT


def main(argv: Sequence[str] | None = None, *, prog: str = PROG) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    try:
        from kubesched.cluster.kubeconfig import KubeconfigError
        from kubesched.framework.types import ObjectError
        from kubesched.simulator.scenario import ScenarioError

        parser = _parser(prog)
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:  # --help, --version, or a usage error already printed
            return e.code if isinstance(e.code, int) else EXIT_BAD_INPUT
        try:
            code: int = args.handler(args)
        except (BadInput, ScenarioError, ObjectError, KubeconfigError) as e:
            return _fail(str(e))
        except BrokenPipeError:
            # The reader went away (e.g. `| head`): stop quietly, as other CLIs do.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 1
        return code
    except KeyboardInterrupt:
        print(file=sys.stderr)  # end the ^C line
        return EXIT_INTERRUPTED


def kubectl_main(argv: Sequence[str] | None = None) -> int:
    """``kubectl-kubesched``: kubectl runs it for ``kubectl kubesched ...`` (its help
    and usage lines say so)."""
    return main(argv, prog="kubectl kubesched")


if __name__ == "__main__":
    sys.exit(main())
