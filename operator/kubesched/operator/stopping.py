"""How ``kubesched run`` stops: the signals it traps, and the connections it waits for.

:func:`connections_closed` reads the event loop's private ``_transports``: asyncio has no
public way to list a loop's transports, and aiohttp none to await the connections it
closed mid-stream (``docs/DESIGN.md``, "Dependencies: limits we accept")."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading

__all__ = [
    "TRANSPORTS_CLOSE_TIMEOUT",
    "connections_closed",
    "trap_signals",
    "until_set",
    "wait_first",
]

log = logging.getLogger("kubesched.run")


def trap_signals(stop: asyncio.Event) -> list[signal.Signals]:
    """SIGTERM and SIGINT set ``stop`` (replacing the handlers Kopf installed).

    Kopf's own handling stops its watches first and then waits 5 s for its stop-flag
    waiter, which nothing ends; ours stops scheduling, lets binds in flight finish,
    releases the lease, and only then stops Kopf through its stop flag: the follower
    takes over within a retry period and the process exits at once. Main thread only
    (the only one that receives signals)."""
    if threading.current_thread() is not threading.main_thread():
        return []
    loop = asyncio.get_running_loop()

    def received(sig: signal.Signals) -> None:
        log.info("signal %s received: stopping", sig.name)
        stop.set()

    trapped = []
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, received, sig)
        except (NotImplementedError, RuntimeError):  # no signals here (e.g. Windows)
            continue
        trapped.append(sig)
    return trapped


TRANSPORTS_CLOSE_TIMEOUT = 5.0
"""At most this long for the TLS connections being closed to finish closing."""


async def connections_closed() -> None:
    """Wait until the connections being closed are closed (at most
    ``TRANSPORTS_CLOSE_TIMEOUT``).

    Closing a TLS connection takes a round trip: asyncio sends close_notify and closes
    the socket once the API server answered (or after ``ssl_shutdown_timeout``). The
    responses closed mid-stream (the watch streams of Kopf and of the informers, ended by
    the stop) are closed that way, and nothing awaits them: aiohttp's session close waits
    only for the connections still in its pool. So when ``run``'s caller ends the event
    loop right after (``asyncio.run``; a test's loop), a connection whose answer had not
    come yet (a loaded machine, a slow API server) is left with its socket open:
    "unclosed transport" ResourceWarnings when it is collected, in whatever code runs
    then. The loop's transports are only reachable through its private ``_transports``
    (selector loops; another loop, e.g. uvloop, is not waited for)."""
    transports = getattr(asyncio.get_running_loop(), "_transports", None)
    if transports is None:
        return

    def closing() -> int:
        n = 0
        for t in list(transports.values()):
            sock = t.get_extra_info("socket")
            if sock is None or sock.fileno() == -1:
                continue  # closed
            # TLS: the socket's transport stays open while the TLS layer above it (the
            # transport aiohttp closed) shuts down
            tls = getattr(t.get_protocol(), "_app_transport", None)
            if t.is_closing() or (tls is not None and tls.is_closing()):
                n += 1
        return n

    loop = asyncio.get_running_loop()
    start = loop.time()
    first = left = closing()
    for _ in range(int(TRANSPORTS_CLOSE_TIMEOUT / 0.01)):
        if not left:
            break
        await asyncio.sleep(0.01)  # no event to wait on: asyncio closes them in callbacks
        left = closing()
    if first:
        log.debug(
            "%d connection(s) closing at the end of run: %d left after %.2f s",
            first,
            left,
            loop.time() - start,
        )


async def wait_first(event: asyncio.Event, stop_flag: asyncio.Event) -> bool:
    """Wait until ``event`` or ``stop_flag`` is set; True if ``stop_flag`` is (the caller
    then starts nothing)."""
    waits = [asyncio.ensure_future(event.wait()), asyncio.ensure_future(stop_flag.wait())]
    try:
        await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for w in waits:
            w.cancel()
    return stop_flag.is_set()


async def until_set(event: asyncio.Event, seconds: float) -> None:
    """Until ``event`` is set or ``seconds`` have passed, whichever comes first. Not
    ``asyncio.wait_for``: on Python 3.11 a cancellation that arrives as the awaited event
    is set is lost there (it returns instead of raising, CPython gh-86296). ``run``'s
    waits for the first bind (the initial sync's, the server's) were such waits: a
    SIGTERM right at the first bind left both running past the shutdown's cancel, and
    the process waited for them forever."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(seconds):
            await event.wait()
