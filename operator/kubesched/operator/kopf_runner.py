"""Kopf, embedded in ``kubesched run`` through its public API.

Kopf runs the SchedulingProfile handlers (and, with ``watch_engine: kopf``,
watches every kind the direct informers would). ``run``
starts it with :func:`run_kopf` once the cache is synced and stops it through its stop
flag, after our own tasks are done (see ``term.shutdown``).

Kopf's own orchestration (``kopf.operator``, ``kopf.run_tasks``) ends by cancelling every
task of the loop created after it started, whoever made it ("hung tasks"): our binding
cycles, the HTTP server, the caller's tasks. So :func:`run_kopf` starts Kopf's root tasks
with ``kopf.spawn_tasks`` and ends them itself: the stop flag set first (Kopf then knows
the stop is intended), the root tasks cancelled and awaited; each of them stops the tasks
it started (watchers, workers, the event poster) on its way out. Nothing else in the
loop is touched.

Kopf's API sessions are ours, lent by its login handler (:func:`login_info`) and closed
once Kopf's tasks are done. Two limits remain (``docs/DESIGN.md``, "Dependencies: limits
we accept"): Kopf leaves its watch streams' async generators suspended when its watcher
is cancelled between two events (:func:`_recording_kopf_generators` finds them to close
them), and a few of its tasks outlive its root tasks (:func:`_recording_kopf_tasks` finds
them to end them).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import logging
import os
import sys
import threading
import types
import weakref
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator
from typing import Any, cast

import aiohttp
import kopf
from kubernetes_asyncio import client as k8s_client

from kubesched.api.meta import FINALIZER
from kubesched.cluster.kinds import WATCHED
from kubesched.cluster.sessions import session_for
from kubesched.operator.settings import Settings
from kubesched.operator.stopping import wait_first

__all__ = ["kopf_settings", "login_info", "run_kopf"]

log = logging.getLogger("kubesched.run")


class _WatchOnlyDiffBase(kopf.AnnotationsDiffBaseStorage):
    """No essence for the core kinds Kopf only watches (``@kopf.on.event``: pods, nodes,
    ...), which have no change handlers to diff for: Kopf 1.45 builds the essence (a deep
    copy of the object) and diffs it on every watch event regardless, ~7% of the event
    loop with ``watch_engine: kopf`` under ``kubesched bench``. Custom resources (the
    SchedulingProfile handlers) get the real essence. ``build`` is a public
    method of Kopf's public storage classes, documented for overriding."""

    def build(
        self, *, body: kopf.Body, extra_fields: Iterable[Any] | None = None
    ) -> kopf.BodyEssence:
        if body.get("apiVersion") in _CORE_GROUP_VERSIONS:
            return cast(kopf.BodyEssence, {})
        return super().build(body=body, extra_fields=extra_fields)


_CORE_GROUP_VERSIONS = frozenset(
    w.group_version for w in WATCHED if not w.group_version.startswith("kubesched.dev/")
)


def kopf_settings(settings: Settings) -> kopf.OperatorSettings:
    s = kopf.OperatorSettings()
    # Standalone: Kopf peering is not leader election (we use a Lease), and it would need
    # the kopfpeerings CRD.
    s.peering.standalone = True
    s.peering.mandatory = False
    # Our own prefix, should Kopf ever write to an object we own (never to user pods:
    # only event handlers are registered for them).
    s.persistence.finalizer = FINALIZER
    s.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="kubesched.dev")
    s.persistence.diffbase_storage = _WatchOnlyDiffBase(
        prefix="kubesched.dev", key="last-handled-configuration"
    )
    # Kopf turns log records about an object into Events on it at INFO by default: that
    # would be one Event per watch event. Only problems are worth an Event.
    s.posting.level = logging.WARNING
    # No cluster-wide scanning of CRDs/namespaces: the watched kinds are fixed, and the
    # scanning needs RBAC the scheduler has no other use for.
    s.scanning.disabled = True
    s.watching.server_timeout = settings.watch_server_timeout
    s.watching.client_timeout = settings.watch_client_timeout
    s.watching.connect_timeout = 10.0
    s.networking.request_timeout = settings.request_timeout
    return s


async def login_info(cfg: k8s_client.Configuration) -> kopf.AiohttpSession:
    """Kopf's credentials from our client's configuration (the same kubeconfig), for Kopf's
    login handler in :func:`run_kopf`: an aiohttp session of ours (the TLS of
    ``session_for``, the token as a header, no limit on connections: every watch holds
    one), which ``run_kopf`` closes once Kopf's tasks are done (see "Kopf's API sessions"
    below)."""
    sessions = _lent_sessions.get()
    if sessions is None:
        raise RuntimeError("login_info is for Kopf's login handler, in run_kopf")
    auth = str(await cfg.get_api_key_with_prefix("BearerToken") or "")
    session = session_for(cfg, limit=0, headers={"Authorization": auth} if auth else None)
    sessions[:] = [s for s in sessions if not s.closed]  # Kopf closed those on a re-login
    sessions.append(session)
    return kopf.AiohttpSession(aiohttp_session=session, server=str(cfg.host))


async def run_kopf(
    *,
    after: asyncio.Event,
    stop_flag: asyncio.Event,
    on_spawned: Callable[[], None],
    **kwargs: Any,
) -> None:
    """Kopf's operator (``kwargs`` for ``kopf.spawn_tasks``), started once ``after`` is set
    (the cache synced: Kopf's start-up and its own listing of every kind it watches stay
    off the way to the first bind) unless ``stop_flag`` comes first, until ``stop_flag``
    is set or one of its root tasks ends; ``on_spawned`` runs once Kopf has set up (and
    installed its signal handlers). Cancelling this stops Kopf too."""
    if await wait_first(after, stop_flag):
        return
    generators: _Generators = weakref.WeakValueDictionary()
    kopf_tasks: weakref.WeakSet[asyncio.Task[Any]] = weakref.WeakSet()
    sessions: list[aiohttp.ClientSession] = []
    with _kopf_line_levels(stop_flag):
        try:
            with (
                _recording_kopf_generators(generators),
                _recording_kopf_tasks(kopf_tasks),
                _lending_sessions(sessions),
            ):
                tasks = await kopf.spawn_tasks(stop_flag=stop_flag, **kwargs)
                on_spawned()
                await _run_root_tasks(tasks, stop_flag)
        finally:
            await _end_kopf_tasks(kopf_tasks)
            await _close_generators(generators)
            for session in sessions:
                await session.close()


async def _run_root_tasks(tasks: Iterable[asyncio.Task[Any]], stop_flag: asyncio.Event) -> None:
    """Until one of Kopf's root tasks ends (its stop-flag checker, once ``stop_flag`` is
    set), then the others cancelled and awaited; a root task's failure is raised."""
    roots = set(tasks)
    try:
        done, _ = await asyncio.wait(roots, return_when=asyncio.FIRST_COMPLETED)
    finally:
        # The flag first: with it set, Kopf takes the cancellation for an intended stop
        # (otherwise its "ultimate termination" task arms a SIGKILL).
        stop_flag.set()
        for t in roots:
            t.cancel()
        await asyncio.gather(*roots, return_exceptions=True)
    for t in done:
        if not t.cancelled() and t.exception() is not None:
            raise cast(BaseException, t.exception())


# -- Kopf's request failures at its stop ---------------------------------------------------------
#
# Kopf's cleanup closes the session it was lent (see below) while a read of its API
# discovery, left over from a stop that came while Kopf was starting, is still to be made.
# That read fails on the closed connector, and Kopf logs "Request attempt #1/9 failed; will
# retry: GET /apis -> ClientConnectionError('Connector is closed.')" at ERROR, once per
# group version: an error on every such stop, though nothing is wrong and the task is
# cancelled a moment later (HUNG_TASKS_GRACE). From the stop on, Kopf's request failures
# are logged at DEBUG instead (a filter on the process's log handlers, as for
# kubesched.operator.logredact); before it they are Kopf's to report, as they were.
#
# The same filter makes Kopf's "Unresolved resources cannot be served (try creating their
# CRDs): ..." an INFO line. Kopf warns so on every start without a kind's CRD, a setting
# kubesched supports (the built-in profiles serve; a gang API may be off), and kubesched's
# own INFO lines have said which kinds are not served and that it looks for them.


class _KopfLineLevels(logging.Filter):
    """Kopf's "Request attempt ... failed" records, once ``stopped`` is set, as DEBUG (or
    dropped where DEBUG is not logged); its "Unresolved resources ..." as INFO."""

    def __init__(self, stopped: asyncio.Event) -> None:
        super().__init__()
        self.stopped = stopped

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno <= logging.INFO or not (
            record.name == "kopf" or record.name.startswith("kopf.")
        ):
            return True
        msg = str(record.msg)
        if msg.startswith(_UNRESOLVED):
            return _demoted(record, logging.INFO)
        if self.stopped.is_set() and msg.startswith(_REQUEST_FAILED):
            return _demoted(record, logging.DEBUG)
        return True


def _demoted(record: logging.LogRecord, level: int) -> bool:
    """``record`` at ``level``; False (dropped) where its logger does not log that level."""
    if not logging.getLogger(record.name).isEnabledFor(level):
        return False
    record.levelno, record.levelname = level, logging.getLevelName(level)
    return True


_REQUEST_FAILED = "Request attempt "
"""How Kopf's API client begins every line about a failed request (``kopf._cogs.clients.api``)."""
_UNRESOLVED = "Unresolved resources cannot be served"
"""How Kopf begins its warning about watched kinds not served at its start
(``kopf._core.reactor.observation``)."""


@contextlib.contextmanager
def _kopf_line_levels(stopped: asyncio.Event) -> Iterator[None]:
    """:class:`_KopfLineLevels` on the root logger's handlers, for the ``with`` block."""
    quiet = _KopfLineLevels(stopped)
    handlers = list(logging.getLogger().handlers)
    for handler in handlers:
        handler.addFilter(quiet)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(quiet)


# -- Kopf's API sessions -----------------------------------------------------------------------
#
# With a ``kopf.ConnectionInfo`` from the login handler, Kopf makes an aiohttp session per
# credentials on first use and closes it when its cleanup closes its credentials vault, which
# then forgets it. A request of Kopf's begun after that cleanup makes a new one, which nothing
# closes. Kopf's API discovery does that at a stop: ``scan_resources`` reads the group
# versions in tasks (``asyncio.as_completed``) that outlive the resource observer cancelled by
# the stop, and one that reached the vault once it was closed opened a session and its
# connections, left open when the hung tasks were cancelled (the "unclosed transport"
# warnings of a ``kubesched run`` in a thread of its own). So the login handler gives Kopf a
# session of ours (``kopf.AiohttpSession``, Kopf's documented way to bring one's own
# session): whatever Kopf makes from it after its cleanup closed it finds it closed and
# connects nowhere, and ``run_kopf`` closes every session it lent once Kopf's tasks are done.
# The sessions are lent through a context variable that Kopf's tasks (its login handler's
# among them) inherit, as for the generators and tasks below.

_lent_sessions: contextvars.ContextVar[list[aiohttp.ClientSession] | None] = contextvars.ContextVar(
    "kubesched_kopf_sessions", default=None
)


@contextlib.contextmanager
def _lending_sessions(sessions: list[aiohttp.ClientSession]) -> Iterator[None]:
    """:func:`login_info` called from tasks created in this context adds to ``sessions``."""
    token = _lent_sessions.set(sessions)
    try:
        yield
    finally:
        _lent_sessions.reset(token)


# -- Kopf's watch streams, closed ---------------------------------------------------------------
#
# Kopf's watcher task iterates its watch stream (``infinite_watch``, an async generator over
# nested ones down to the aiohttp response) with a plain ``async for``. When the operator
# stops, the watcher is cancelled wherever it awaits: inside the stream (reading the next
# line) the cancellation unwinds the generators and closes the response, but in the loop's
# body (handing an event to a worker: most of the time when events are arriving) the
# generators stay suspended at their ``yield`` with the HTTP response open. Nothing closes
# them: the loop's ``shutdown_asyncgens`` at its very end (where ``infinite_watch`` fails
# with "generator didn't stop after athrow()", its ``streaming_block`` having been closed
# concurrently), or the garbage collector whenever it finds them, maybe after the loop
# closed ("Exception ignored in: <async_generator ...>", unclosed transport and response
# ResourceWarnings in whatever code runs then). Kopf has no hook for this, so ``run_kopf``
# records the async generators Kopf's tasks start (a first-iteration hook, attributed
# through a context variable that those tasks inherit: other ``run`` calls in the same loop
# keep theirs) and closes the ones left suspended, outermost first, once Kopf's tasks are
# all done. Only generators of Kopf's own code (its package directory in the code's file
# name): one of our handlers, called in Kopf's workers, may start a task that outlives
# them and whose generators are not Kopf's to close.

CLOSE_GENERATORS_TIMEOUT = 5.0

_KOPF_CODE = f"{os.sep}kopf{os.sep}"
_Generators = weakref.WeakValueDictionary[int, types.AsyncGeneratorType[Any, Any]]
"""By start order; the finished ones drop out as they are freed (Kopf starts a few per
API request: a long run must not accumulate them)."""
_owned_generators: contextvars.ContextVar[_Generators | None] = contextvars.ContextVar(
    "kubesched_kopf_generators", default=None
)
_started = itertools.count()


class _HookState(threading.local):
    """The thread's async-generator hooks before ours, and how many runs record (the
    hooks are per thread; nested runs in one loop share one installation)."""

    users = 0
    previous: Any = None


_hooks = _HookState()


def _firstiter(agen: AsyncGenerator[Any, Any]) -> None:
    owned = _owned_generators.get()
    code = getattr(agen, "ag_code", None)
    if owned is not None and code is not None and _KOPF_CODE in code.co_filename:
        owned[next(_started)] = cast(types.AsyncGeneratorType[Any, Any], agen)
    previous = _hooks.previous.firstiter if _hooks.previous is not None else None
    if previous is not None:
        previous(agen)  # the event loop's own bookkeeping (shutdown_asyncgens, finalizer)


@contextlib.contextmanager
def _recording_kopf_generators(owned: _Generators) -> Iterator[None]:
    """Record into ``owned`` the async generators Kopf's code starts from tasks created
    in this context (they inherit it: Kopf's root tasks, and the tasks those start)."""
    token = _owned_generators.set(owned)
    if _hooks.users == 0:
        _hooks.previous = sys.get_asyncgen_hooks()
        sys.set_asyncgen_hooks(firstiter=_firstiter, finalizer=_hooks.previous.finalizer)
    _hooks.users += 1
    try:
        yield
    finally:
        _hooks.users -= 1
        if _hooks.users == 0:
            previous, _hooks.previous = _hooks.previous, None
            sys.set_asyncgen_hooks(firstiter=previous.firstiter, finalizer=previous.finalizer)
        _owned_generators.reset(token)


async def _close_generators(owned: _Generators) -> None:
    """Close the recorded generators still suspended, in the order they started (an outer
    one before those it iterates: its context managers exit before their generators are
    closed under them)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(CLOSE_GENERATORS_TIMEOUT):
            for _, agen in sorted(owned.items(), key=lambda item: item[0]):
                if agen.ag_frame is None or agen.ag_running:
                    continue  # collected, finished, or (never: Kopf's tasks are done) running
                try:
                    await agen.aclose()
                except Exception as e:  # Kopf's code, ending anyway: nothing else to do
                    log.debug("closing Kopf's %s: %r", agen.ag_code.co_name, e)
    owned.clear()


# -- Kopf's tasks that outlive its root tasks ---------------------------------------------------
#
# A task Kopf starts without keeping it under a root task (a handler's worker sleeping out a
# retry's backoff, API discovery's reads) survives the root tasks. ``kopf.run_tasks``
# sweeps such "hung" tasks by cancelling every task created after Kopf started, ours too;
# left alone, one wakes after the stop, finds the lent session closed (Kopf's cleanup
# closed it) and waits for a new login that never comes: pending when the loop ends. So while
# Kopf runs, a task factory (asyncio's public hook, chained to the loop's own) records the
# tasks that Kopf's code starts from this run's context, and they are given
# HUNG_TASKS_GRACE seconds after the root tasks end, then cancelled. Attribution as for the
# generators above: the run's context, and Kopf's package directory in the code's file name.

HUNG_TASKS_GRACE = 1.0

_owned_tasks: contextvars.ContextVar[weakref.WeakSet[asyncio.Task[Any]] | None] = (
    contextvars.ContextVar("kubesched_kopf_tasks", default=None)
)


class _FactoryState:
    """A loop's task factory before ours, and how many runs record on it."""

    def __init__(self, previous: Any) -> None:
        self.previous = previous
        self.users = 0


_factories: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _FactoryState] = (
    weakref.WeakKeyDictionary()
)


def _task_factory(
    loop: asyncio.AbstractEventLoop, coro: Any, context: contextvars.Context | None = None
) -> asyncio.Task[Any]:
    state = _factories.get(loop)
    previous = state.previous if state is not None else None
    task: asyncio.Task[Any]
    if previous is None:
        task = asyncio.Task(coro, loop=loop, context=context)
    elif context is None:
        task = previous(loop, coro)
    else:
        task = previous(loop, coro, context=context)
    owned = _owned_tasks.get() if context is None else context.get(_owned_tasks)
    code = getattr(coro, "cr_code", None)
    if owned is not None and code is not None and _KOPF_CODE in code.co_filename:
        owned.add(task)
    return task


@contextlib.contextmanager
def _recording_kopf_tasks(owned: weakref.WeakSet[asyncio.Task[Any]]) -> Iterator[None]:
    """Record into ``owned`` the tasks Kopf's code starts from this context."""
    loop = asyncio.get_running_loop()
    state = _factories.get(loop)
    if state is None:
        state = _factories[loop] = _FactoryState(loop.get_task_factory())
        loop.set_task_factory(_task_factory)
    state.users += 1
    token = _owned_tasks.set(owned)
    try:
        yield
    finally:
        _owned_tasks.reset(token)
        state.users -= 1
        if state.users == 0:
            del _factories[loop]
            loop.set_task_factory(state.previous)


async def _end_kopf_tasks(owned: weakref.WeakSet[asyncio.Task[Any]]) -> None:
    """Kopf's tasks still running once its root tasks are done: a grace, then cancelled."""
    me = asyncio.current_task()
    hung = [t for t in owned if not t.done() and t is not me]
    owned.clear()
    if not hung:
        return
    _, pending = await asyncio.wait(hung, timeout=HUNG_TASKS_GRACE)
    for t in pending:
        t.cancel()
    if pending:
        log.debug("cancelled %d of Kopf's tasks left after its stop", len(pending))
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(CLOSE_GENERATORS_TIMEOUT):
                await asyncio.gather(*pending, return_exceptions=True)
