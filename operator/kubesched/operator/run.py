"""``kubesched run``: the scheduler on a real cluster, in one event loop.

``run`` builds the kube adapter, the Scheduler (one default profile per served scheduler
name) and its EventHandlers, starts the Kopf operator that feeds them (login through the
same kubeconfig resolution as our client) and, with ``watch_engine: direct`` (the
default), the lean informers for pods and nodes, lists every watched kind once so the cache is
warm before the first cycle, and schedules only while it leads (or always, with leader
election off). A follower keeps watching, so its cache is warm when it takes over.

Losing the lease ends ``run`` with :class:`LeadershipLost` (kube-scheduler exits too:
state built while leading, such as assumed pods, must not leak into a new term). A
term, its end and the stop are :mod:`kubesched.operator.term`'s.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import importlib
import logging
import signal
import socket
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, cast

from kubernetes_asyncio import client as k8s_client

from kubesched.backend.queue import ACTIVE
from kubesched.cluster.event_writer import EventWriterCollector
from kubesched.cluster.informer import Informer
from kubesched.cluster.kinds import WATCHED
from kubesched.cluster.kube import KubeCluster
from kubesched.cluster.kubeconfig import load_client_configuration
from kubesched.cluster.prefetch import Page, Prefetch
from kubesched.cluster.sessions import WRITES, RateLimiter
from kubesched.operator import logredact, podgroup_handlers
from kubesched.operator.gang_sources import GangSources
from kubesched.operator.handlers import DIRECT_KINDS, WatchRouter
from kubesched.operator.kopf_start import start_kopf
from kubesched.operator.listen import listen
from kubesched.operator.profile_handlers import ProfileController
from kubesched.operator.settings import Settings
from kubesched.operator.stopping import trap_signals, until_set
from kubesched.operator.term import LeadershipLost, lead, schedule, shutdown
from kubesched.profiles import default_profile_spec
from kubesched.scheduler.eventhandlers import EventHandlers
from kubesched.scheduler.scheduler import Scheduler

if TYPE_CHECKING:  # imported once the cache is synced: see operator/kopf_start.py
    import kopf

    from kubesched.operator.delegated_auth import DelegatedAuth  # and _serve

__all__ = ["LeadershipLost", "Runtime", "all_or_none", "run", "tune_garbage_collector"]

log = logging.getLogger("kubesched.run")

WRITE_CONNECTIONS = 32
"""At most this many connections to the API server for writes (binds, status patches,
deletions; HTTP/1.1, one request in flight each). Events and watches have pools of their
own (:data:`kubesched.cluster.sessions.POOLS`). kubernetes_asyncio's default is 100, and
every TLS connection holds asyncio's 256 KiB read buffer: a 3000-pod burst opened ~55,
14 MiB of buffers that stayed for good. 32 is several times what a few hundred binds a
second keep busy (binds take milliseconds; more wait their turn): PodAntiAffinity on 1000
nodes under ``kubesched bench``, 100 vs 32, two runs each on the loaded 2-core machine:
165 / 222 vs 163 / 224 pods a second."""

SERVE_WITHIN = 2.0
"""Seconds after ``run`` starts by which the HTTP endpoints listen even if the caches
are not synced yet (see :func:`_serve`): liveness (/healthz) answers within seconds of
the start however long the first LIST takes (the chart's probe starts after 10 s)."""

WATCHES_WITHIN = 1.0
"""Every informer watches once the first bind is out (``Runtime.watches_open``), or at
once after the cache sync when no pod waits in an active queue, or this many seconds
after it (nothing bound: unschedulable, or not the leader). Opening them sooner put their
TLS handshakes (19 kinds, 2-3 ms of CPU apiece) and aiohttp's import (about 60 ms:
kubesched.cluster.aio) ahead of the first cycle. Nothing is missed meanwhile: each watch
starts from its listing's resourceVersion."""

RECONCILE_DELAYS = (1.0, 60.0)
"""With ``watch_engine: kopf``, after Kopf starts, the kinds it watches are reconciled
twice: 1 s later and again a minute after that, when Kopf's own watchers have surely
listed (their backoffs add up to 54 s): something deleted between the initial sync's
listing and Kopf's, which reports no DELETED for it, is forgotten then."""


class Runtime:
    """What ``run`` builds, exposed to the HTTP endpoints and to tests."""

    def __init__(
        self, settings: Settings, cfg: k8s_client.Configuration, prefetch: Prefetch | None = None
    ) -> None:
        self.settings = settings
        self.cfg = cfg
        """Where the API server is and how to log in."""
        self.cluster = KubeCluster(
            cfg,
            reporting_instance_suffix=socket.gethostname(),
            qps=settings.client_qps,
            burst=settings.client_burst,
            request_timeout=settings.request_timeout,
        )
        self.scheduler = Scheduler(
            self.cluster,
            self.cluster,
            profiles=[default_profile_spec(n) for n in settings.scheduler_names],
            seed=settings.seed,
            opportunistic_batching=settings.opportunistic_batching,
            pop_from_backoff=settings.pop_from_backoff,
        )
        self.router = WatchRouter(
            self.cluster,
            scheduler_names=settings.scheduler_names,
            reporting_controller=settings.scheduler_names[0],
        )
        self.scheduler.metrics.registry.register(
            EventWriterCollector(lambda: self.cluster.event_writer)
        )
        self.handlers = EventHandlers(self.scheduler, on_bad_object=self.router.on_bad_object)
        # the initial listing requeues nothing pod by pod: _initial_sync looks once
        self.scheduler.queues.hold_moves()
        self.router.attach(self.handlers)
        self.prefetch = prefetch
        """The first LIST of the watched kinds, made ahead (taken by the initial sync)."""
        self.watches_open = asyncio.Event()
        """Set once the first bind is out (see :data:`WATCHES_WITHIN`): the
        informers' watches open, Kopf and the HTTP endpoints start."""
        self.informers = self._direct_informers(prefetch)
        """Every watched kind's with ``watch_engine: direct`` (Kopf watches them otherwise)."""
        self.profiles = ProfileController(
            self.scheduler,
            self.cluster,
            builtin_names=settings.scheduler_names,
            reporter=settings.scheduler_names[0],
            selector=settings.profile_selector,
        )
        """SchedulingProfiles: applied before the first cycle, then by Kopf handlers."""
        # PodGroup status (Coscheduling's gangs), written by the leader only.
        self.podgroups = podgroup_handlers.attach(
            self.router,
            self.scheduler,
            reporter=settings.scheduler_names[0],
            leading=lambda: self.leading,
        )
        self.registry: kopf.OperatorRegistry | None = None
        """Kopf's handlers, registered once the cache is synced (operator/kopf_start.py)."""
        self.gang_sources = GangSources(
            self.cluster, self.router.dispatch, informer=lambda kind: self._informer(kind)
        )
        """Kubernetes' and scheduler-plugins' gang kinds, watched while served."""
        self.cache_synced = asyncio.Event()
        """Set once every watched kind is listed into the cache: scheduling may start."""
        self.synced = asyncio.Event()
        """Set once the cache is synced and Kopf is up (readiness)."""
        self.leading = False
        """Scheduling (the lease is held, or leader election is off)."""
        self.stopping = False
        """A graceful stop began: the leading term ends by finishing its binds in flight
        (then the lease is released). Otherwise (the lease lost) they are cancelled."""
        self.tune_gc = False
        """Freeze the synced cache out of the cyclic GC (see tune_garbage_collector)."""
        self.listening: list[socket.socket] = []
        """The endpoints' sockets, bound when ``run`` started (kubesched.operator.listen)."""
        self.port: int | None = None
        """The HTTP port once listening (the OS picks it when ``settings.port`` is 0)."""
        self.serving = asyncio.Event()
        """Set once the HTTP endpoints listen (``port`` is known): part of readiness."""
        self.kopf_reconcile: asyncio.Task[None] | None = None

    def _informer(
        self,
        kind: str,
        prefetched: Callable[[], Awaitable[list[Page] | None]] | None = None,
        watch_after: asyncio.Event | None = None,
    ) -> Informer:
        s = self.settings
        return Informer(
            self.cluster,
            kind,
            self.router.dispatch,
            server_timeout=s.watch_server_timeout,
            client_timeout=s.watch_client_timeout,
            prefetched=prefetched,
            watch_after=watch_after,
        )

    def _direct_informers(self, prefetch: Prefetch | None) -> list[Informer]:
        if self.settings.watch_engine != "direct":
            return []
        return [
            self._informer(
                w.kind,
                prefetched=functools.partial(prefetch.take, w.kind) if prefetch else None,
                watch_after=self.watches_open,
            )
            for w in WATCHED
            if w.kind in DIRECT_KINDS
        ]

    def http_started(self, port: int) -> None:
        self.port = port
        self.serving.set()

    @property
    def direct_kinds(self) -> frozenset[str]:
        """The watched kinds the direct informers watch (none with ``watch_engine: kopf``)."""
        return frozenset(i.kind for i in self.informers)

    @property
    def kopf_kinds(self) -> tuple[str, ...]:
        """The watched kinds Kopf watches: the rest (none with the direct informers)."""
        direct = self.direct_kinds
        return tuple(w.kind for w in WATCHED if w.kind not in direct)

    def reconcile_kopf_kinds(self, after: str) -> None:
        """Reconcile Kopf's kinds (if any) with a fresh listing, :data:`RECONCILE_DELAYS`
        after ``after`` (Kopf's start: its first listing, a moment after the initial
        sync's, reports no DELETED for what vanished in between)."""
        if not self.kopf_kinds:
            return
        if self.kopf_reconcile is None or self.kopf_reconcile.done():
            self.kopf_reconcile = asyncio.ensure_future(self._reconcile_kopf_kinds(after))

    async def _reconcile_kopf_kinds(self, after: str) -> None:
        kinds = self.kopf_kinds
        for delay in RECONCILE_DELAYS:
            await asyncio.sleep(delay)
            try:
                deleted = await self.router.reconcile(kinds)
            except Exception as e:  # the next pass, or the next relist, tries again
                log.warning("reconciling %s after %s failed: %s", ", ".join(kinds), after, e)
                continue
            log.info("reconciled the other watched kinds after %s: %d deleted", after, deleted)


GC_THRESHOLDS = (50_000, 20, 100)


def tune_garbage_collector() -> None:
    """The cyclic garbage collector took 1.45 of ``kubesched run``'s 7.8 CPU seconds
    under ``kubesched bench`` (gc.callbacks timing process time; 0.37 of 6.4 s with this
    tuning): every watch event
    decodes into hundreds of young dicts, so generation 0 fills every few events, and the
    older generations rescan the whole store (thousands of pods, hundreds of objects each)
    again and again. The watched objects are plain dicts from orjson, freed by reference
    counting; cycles are rare (tasks, exceptions). So: generation 0 collects every 50,000
    allocations instead of 700, the older ones rarely, and what exists at start-up (the
    imported modules: Kopf, kubernetes_asyncio's models, numpy) and once the cache is synced
    is frozen out of collection (``gc.freeze``; as CPython's docs advise for long-running
    servers). Process-wide, so only ``kubesched run`` does it. No collection first: after
    the imports one found 20 unreachable objects of 70,000 and took a tenth of a second on
    the way to the first bind; the command line turned the collector off during the
    imports (``kubesched.cli``), and it stays off until the initial listing is in the
    cache (``_initial_sync`` turns it on, having frozen what the listing built): putting
    5000 pending pods into the cache and queue allocates about 300,000 objects, a
    generation-0 collection every 50,000 of them on the way to the first bind, each
    finding nothing to free."""
    gc.set_threshold(*GC_THRESHOLDS)
    gc.freeze()


async def _serve(rt: Runtime) -> None:
    """/healthz, /readyz (synced; followers too, as kube-scheduler), /metrics, /explain,
    /debug/cache and /ui/ until cancelled, started once the first bind is out (or the
    cache synced a second ago: ``rt.watches_open``) or :data:`SERVE_WITHIN` seconds have
    passed, whichever comes first. So the server's imports (aiohttp.web, the web view,
    explain, delegated auth: ~30 ms on a busy 2-core machine, with mimetypes reading
    /etc/mime.types) are off the way to the first bind; they run in a worker thread, as
    Kopf's, while the event loop schedules (not before: the thread holds the GIL for
    most of them). Readiness waits for them (``rt.serving``). The port was taken when
    ``run`` started (:mod:`kubesched.operator.listen`): one in use is reported then, not
    here."""
    await until_set(rt.watches_open, SERVE_WITHIN)
    await asyncio.to_thread(importlib.import_module, "kubesched.operator.server")
    from kubesched.operator.server import serve

    settings = rt.settings
    await serve(
        sockets=rt.listening,
        scheduler=rt.scheduler,
        ready=rt.synced.is_set,
        leading=lambda: rt.leading,
        started=rt.http_started,
        auth=_delegated_auth(rt) if settings.delegate_auth else None,
        profile_book=lambda: rt.profiles.book,
    )


def _delegated_auth(rt: Runtime) -> DelegatedAuth:
    """Reviews through our own client, on a bucket of their own: a flood of requests with
    made-up tokens never delays a binding (and never exceeds 50 reviews a second)."""
    from kubesched.operator.delegated_auth import DelegatedAuth

    limiter = RateLimiter(50.0, 100)

    async def post(path: str, body: Mapping[str, Any]) -> Any:
        return await rt.cluster.request("POST", path, body, limiter=limiter)

    return DelegatedAuth(post)


async def run(
    *,
    settings: Settings,
    stop: asyncio.Event | None = None,
    ready: asyncio.Event | None = None,
    runtime: list[Runtime] | None = None,
    tune_gc: bool = False,
    prefetch: Prefetch | None = None,
) -> None:
    """Run until ``stop`` is set (or Kopf stops on a signal). ``ready`` is set once the
    cache is synced and Kopf is up; ``runtime`` (a test hook) receives what was built.
    ``tune_gc`` (the process's owner only: ``kubesched run``): see
    :func:`tune_garbage_collector`. ``prefetch``: the first LIST of the watched kinds,
    started before this module was imported (``kubesched run``)."""
    if tune_gc:
        tune_garbage_collector()
    logredact.install()  # credentials masked on the process's log handlers
    stop = stop or asyncio.Event()
    # Kopf logs "Handler ... succeeded." at INFO for every watch event of every object:
    # at thousands of pods that is most of the log and a measurable share of the CPU.
    logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    # the endpoints' port, taken now: one line (ListenError) if it is in use, before
    # anything is listed or bound; the server comes later (_serve)
    listening = listen(settings.listen_address, settings.port)
    try:
        await _run(settings, stop, ready, runtime, tune_gc, prefetch, listening)
    finally:
        for sock in listening:
            sock.close()


async def _run(
    settings: Settings,
    stop: asyncio.Event,
    ready: asyncio.Event | None,
    runtime: list[Runtime] | None,
    tune_gc: bool,
    prefetch: Prefetch | None,
    listening: list[socket.socket],
) -> None:
    # the login the early listing read for the same kubeconfig (early.take), if it did
    cfg = await load_client_configuration(
        settings.kubeconfig, prefetch.login if prefetch is not None else None
    )
    cfg.connection_pool_maxsize = WRITE_CONNECTIONS
    rt = Runtime(settings, cfg, prefetch)
    rt.tune_gc = tune_gc
    rt.listening = listening
    if runtime is not None:
        runtime.append(rt)

    kopf_stop, kopf_ready = asyncio.Event(), asyncio.Event()
    tasks: dict[str, asyncio.Task[Any]] = {}
    trapped: list[signal.Signals] = []

    def trap() -> None:
        trapped.extend(trap_signals(stop))

    trap()  # until Kopf installs its own handlers (replaced again once Kopf is spawned)
    try:
        _start(
            rt,
            tasks,
            stop=stop,
            ready=ready,
            kopf_stop=kopf_stop,
            kopf_ready=kopf_ready,
            on_kopf_spawned=trap,
        )
        await _until_one_ends(tasks)
        if tasks["kopf"].done() and not stop.is_set():
            log.info("the Kopf operator stopped: shutting down")
    finally:
        try:
            await shutdown(rt, tasks, kopf_stop)
        finally:
            loop = asyncio.get_running_loop()
            for sig in trapped:
                loop.remove_signal_handler(sig)


def _start(
    rt: Runtime,
    tasks: dict[str, asyncio.Task[Any]],
    *,
    stop: asyncio.Event,
    ready: asyncio.Event | None,
    kopf_stop: asyncio.Event,
    kopf_ready: asyncio.Event,
    on_kopf_spawned: Callable[[], None],
) -> None:
    """Start ``run``'s tasks into ``tasks``, by name (``term.shutdown`` stops them)."""
    settings = rt.settings

    def spawn(name: str, coro: Awaitable[Any]) -> None:
        tasks[name] = asyncio.ensure_future(coro)

    # the plain pending pods of the first listing wait for the first cycle
    # (kubesched.scheduler.held_pods; _initial_sync admits and releases them)
    rt.router.hold_pending()

    spawn(
        "kopf",
        start_kopf(rt, stop_flag=kopf_stop, on_spawned=on_kopf_spawned, ready_flag=kopf_ready),
    )
    spawn("stop", stop.wait())
    for informer in rt.informers:
        spawn(f"watch-{informer.kind}", informer.run())
    spawn("server", _serve(rt))
    spawn("sync", _initial_sync(rt, kopf_ready, ready))
    spawn("schedule", lead(rt) if settings.leader_elect else schedule(rt))
    if settings.resync_seconds > 0:
        spawn("resync", _resync(rt))
    spawn("watch-gang-sources", rt.gang_sources.run())
    spawn("watch-profile-crd", rt.profiles.watch_crd())
    spawn("watch-gang-status", rt.podgroups.run_ticks())


async def _until_one_ends(tasks: Mapping[str, asyncio.Task[Any]]) -> None:
    """Until a task other than the initial sync ends: stopped, Kopf ended (a signal), or
    scheduling ended. The first failure among those done is raised."""
    waiting = set(tasks.values())
    while True:
        done, waiting = await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        for t in done:
            if not t.cancelled() and t.exception() is not None:
                raise cast(BaseException, t.exception())
        if done - {tasks["sync"]}:
            return


async def _initial_sync(
    rt: Runtime, kopf_ready: asyncio.Event, ready: asyncio.Event | None
) -> None:
    # Every watched kind, not only pods and nodes: a first cycle that ran before the PDBs
    # (or PVCs, ...) arrived would preempt or place without them. kube-scheduler likewise
    # waits for all its informers' caches before scheduling. All at once (one request
    # each, a round trip apart otherwise), or taken from the prefetch that listed them
    # while the modules were imported; the informers' kinds are theirs to list. The
    # foreign gang APIs served now are listed (gang_sources), and the SchedulingProfiles
    # applied oldest first, before any cycle (and before their Kopf handlers).
    prefetched = rt.prefetch.take if rt.prefetch is not None else None
    # the first bind's connection, opened while the pods go into the cache
    warm = asyncio.ensure_future(rt.cluster.warm(WRITES))
    try:
        await all_or_none(
            *(rt.router.reconcile((kind,), prefetched=prefetched) for kind in rt.kopf_kinds),
            rt.gang_sources.start(rt.prefetch.take_document if rt.prefetch else None),
            rt.profiles.load(prefetched),
            *(informer.synced.wait() for informer in rt.informers),
        )
    except BaseException:
        warm.cancel()
        raise
    finally:
        if rt.prefetch is not None:  # taken: what is left of it goes (a child still listing)
            rt.prefetch.close()
        if rt.tune_gc:  # the collector, off since the imports (tune_garbage_collector)
            gc.freeze()  # the synced cache: nodes, pods, and what start-up built
            gc.enable()
    rt.scheduler.admit_held_heads()
    rt.scheduler.queues.release_moves()
    # Scheduling needs the caches, not Kopf: what Kopf watches was listed above, and its
    # handlers (SchedulingProfile changes) take over from that listing.
    rt.cache_synced.set()
    if rt.scheduler.queues.pending_counts().get(ACTIVE):  # a first bind to wait for
        await until_set(rt.scheduler.bound_once, WATCHES_WITHIN)
    rt.scheduler.release_held()  # if the first cycle has not (no lease yet, say)
    rt.watches_open.set()
    await kopf_ready.wait()
    # the sync's listing of Kopf's kinds (or the prefetch's) came before Kopf's own
    rt.reconcile_kopf_kinds("Kopf's start")
    await rt.serving.wait()  # /readyz can answer (the server starts after the sync)
    rt.synced.set()
    log.info(
        "cache synced: %d nodes, %d pods",
        len(list(rt.cluster.list("Node"))),
        len(list(rt.cluster.list("Pod"))),
    )
    if ready is not None:
        ready.set()


async def all_or_none(*aws: Awaitable[Any]) -> None:
    """Await ``aws`` together; the first failure cancels the rest and is raised once
    they have ended (asyncio.gather would leave them running, their LISTs in flight on
    connections the shutdown then closes under them)."""
    tasks = [asyncio.ensure_future(a) for a in aws]
    try:
        await asyncio.wait(tasks, return_when=asyncio.FIRST_EXCEPTION)
    finally:  # a failure, or we were cancelled (the stop): the rest end first
        for t in tasks:
            t.cancel()  # nothing for those done
        await asyncio.gather(*tasks, return_exceptions=True)
    for t in tasks:  # in the order given: the first failed of those that ended
        if t.done() and not t.cancelled() and t.exception() is not None:
            raise cast(BaseException, t.exception())


async def _resync(rt: Runtime) -> None:
    while True:
        await asyncio.sleep(rt.settings.resync_seconds)
        try:
            await rt.router.reconcile()
        except Exception as e:
            log.warning("periodic relist of pods and nodes failed: %s", e)
