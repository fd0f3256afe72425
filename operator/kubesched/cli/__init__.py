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
import gc
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

from kubesched import __version__
from kubesched.cli.common import (
    EXIT_BAD_INPUT,
    EXIT_INTERRUPTED,
    EXIT_OK,
    BadInput,
    ctrl_c_deferred,
)

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


def _parser(prog: str = PROG, command: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``command`` "run", only ``run``'s: the other subcommands' modules
    import the simulator (about a second on a busy machine) that ``kubesched run`` does
    not need on its way to the first bind. ``run``'s flags, help and errors are the same
    either way."""
    # Imported here, inside main()'s Ctrl-C handling: importing the scheduler takes a
    # moment, and an interrupt then must not print a traceback either.
    from kubesched.cli import run

    parser = _Parser(
        prog=prog,
        description="A Kubernetes scheduler in Python with kube-scheduler's plugin framework.",
    )
    parser.add_argument("--version", action="version", version=f"kubesched {__version__}")
    sub = parser.add_subparsers(
        dest="command", metavar="COMMAND", required=True, parser_class=_Parser
    )
    run.add(sub)
    if command == "run":
        return parser
    from kubesched.cli import bench, explain, simulate, ui, validate

    bench.add(sub)
    explain.add(sub)
    simulate.add(sub)
    ui.add(sub)
    validate.add(sub)
    sub.add_parser("version", help="print the version").set_defaults(handler=_version)
    return parser


def _user_errors() -> tuple[type[Exception], ...]:
    """The exceptions that are a user's mistake, of the modules imported so far (one not
    imported cannot have raised): ``kubesched run`` does not import the simulator."""
    errors: list[type[Exception]] = [BadInput]
    for module, name in (
        ("kubesched.cluster.kubeconfig", "KubeconfigError"),
        ("kubesched.operator.listen", "ListenError"),
        ("kubesched.framework.types", "ObjectError"),
        ("kubesched.simulator.scenario", "ScenarioError"),
    ):
        # a module another thread is still importing (run's early listing imports the
        # kubeconfig loader) may not define its class yet: then nothing raised one
        error = getattr(sys.modules.get(module), name, None)
        if error is not None:
            errors.append(error)
    return tuple(errors)


def _fail(message: str) -> int:
    # one line: a message spanning lines (a YAML snippet) is joined
    text = " ".join(part.strip() for part in str(message).splitlines() if part.strip())
    print(f"{PROG}: error: {text}", file=sys.stderr)
    return EXIT_BAD_INPUT


def main(argv: Sequence[str] | None = None, *, prog: str = PROG) -> int:
    """Run the command line; returns the exit code (the console script exits with it)."""
    try:
        with ctrl_c_deferred():  # the imports (a Ctrl-C during them: exit 130 after them)
            words = sys.argv[1:] if argv is None else list(argv)
            command = words[0] if words else None
            listing = None
            if command == "run":  # its first LIST, before the imports (see cli/early.py)
                from kubesched.cli import early

                listing = early.start(words[1:])
                # pydantic looks for its plugins (observability hooks) in every installed
                # package's metadata when it builds the first validator; a scheduler has
                # none (PYDANTIC_DISABLE_PLUGINS, pydantic's setting; a value set is kept)
                os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
                # the imports allocate ~70,000 objects and free few: no collection until
                # run tunes the collector (kubesched.operator.run.tune_garbage_collector)
                gc.disable()
                if argv is None:  # this process is `kubesched run`: no schema written
                    from kubesched.api import field_docstrings

                    field_docstrings(False)
            parser = _parser(prog, command)
        try:
            args = parser.parse_args(argv)
        except SystemExit as e:  # --help, --version, or a usage error already printed
            return e.code if isinstance(e.code, int) else EXIT_BAD_INPUT
        if command == "run":
            args.early_listing = listing
        try:
            code: int = args.handler(args)
        except BrokenPipeError:
            # The reader went away (e.g. `| head`): stop quietly, as other CLIs do.
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
            return 1
        except Exception as e:
            if not isinstance(e, _user_errors()):
                raise
            return _fail(str(e))
        return code
    except KeyboardInterrupt:
        print(file=sys.stderr)  # end the ^C line
        return EXIT_INTERRUPTED
    finally:
        gc.enable()  # run ended (or never started): the collector as it was


def kubectl_main(argv: Sequence[str] | None = None) -> int:
    """``kubectl-kubesched``: kubectl runs it for ``kubectl kubesched ...`` (its help
    and usage lines say so)."""
    return main(argv, prog="kubectl kubesched")


if __name__ == "__main__":
    sys.exit(main())
