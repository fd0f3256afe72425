"""What the subcommands share: the user-error exception, exit codes, argument types and
the way a coroutine is run so that Ctrl-C stops it promptly."""

from __future__ import annotations

import argparse
import contextlib
import signal
import threading
import urllib.parse
from collections.abc import Callable, Coroutine, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from asyncio import AbstractEventLoop

__all__ = [
    "EXIT_BAD_INPUT",
    "EXIT_INTERRUPTED",
    "EXIT_INVALID",
    "EXIT_OK",
    "BadInput",
    "count",
    "ctrl_c_deferred",
    "http_url",
    "run_async",
    "seconds",
]

EXIT_OK = 0
EXIT_INVALID = 1
"""``validate``: the input was read and found invalid (the report says why)."""
EXIT_BAD_INPUT = 2
"""A user mistake (a bad flag, file or cluster address): one line on stderr."""
EXIT_INTERRUPTED = 130
"""Ctrl-C, as shells report a process ended by SIGINT (128 + 2)."""

T = TypeVar("T")


class BadInput(Exception):
    """Input the user can fix; the message is printed as is, on one line."""


@contextlib.contextmanager
def ctrl_c_deferred() -> Iterator[None]:
    """A Ctrl-C while the block runs raises KeyboardInterrupt as the block ends, not in
    the middle of it. For the blocks that import a command's modules: a KeyboardInterrupt
    raised inside an import can be lost or turned into another error there (seen: one
    raised inside the import of PyYAML's C loader lost, so ``explain --server`` went on
    to wait for its answer; pydantic-core's initialisation turning it into a
    PanicException; a class's ``__set_name__`` into a RuntimeError). SIGINT is blocked
    in this thread for the block (threads started in it keep it blocked, so the signal
    is not delivered to them either) and the mask restored after it; a SIGINT that came
    meanwhile is delivered then. Only where Python's own Ctrl-C handling is in place, in
    the main thread."""
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    before = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, before)


def count(text: str) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {n}")
    return n


def seconds(text: str) -> float:
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


def http_url(text: str) -> str:
    """An ``http://`` or ``https://`` URL with a host."""
    parts = urllib.parse.urlsplit(text)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise argparse.ArgumentTypeError(
            f"not an http(s) URL: {text!r} (e.g. http://127.0.0.1:10251)"
        )
    try:
        parts.port  # noqa: B018 (raises on a bad port)
    except ValueError as e:
        raise argparse.ArgumentTypeError(f"not an http(s) URL: {text!r} ({e})") from None
    return text


def run_async(
    coro: Coroutine[Any, Any, T],
    loop_factory: Callable[[], AbstractEventLoop] | None = None,
) -> T:
    """Run ``coro`` on a fresh event loop (``loop_factory``'s; default asyncio's). In the
    main thread the first Ctrl-C cancels it (its ``finally`` blocks run) and raises
    KeyboardInterrupt, as ``asyncio.run`` does; the loop is private, so ``main()`` can be
    called in-process (tests, embedding) without touching the caller's current loop."""
    import asyncio  # here: main() imports this module before its Ctrl-C handling starts

    with asyncio.Runner(loop_factory=loop_factory or asyncio.new_event_loop) as runner:
        return runner.run(coro)
