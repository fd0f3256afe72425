"""The first LIST of every watched kind, started before the scheduler's modules are imported.

``kubesched run`` spends most of its way to the first bind importing (aiohttp, numpy,
pydantic models, the plugins, Kopf: about a CPU second on a loaded 2-core machine) and
then listing thousands of pods, which the API server takes a while to encode. The two
need not wait for each other: :class:`Prefetch` lists with the standard library's HTTP
client while the main thread imports, and the first listing of each kind takes the pages
(:meth:`Prefetch.take`) instead of making the same request again. It lists in a child
process where it can (Linux, forked while ``kubesched run`` has a single thread): the
child writes the bodies into a memory file the two processes share and says on a pipe
where each kind's are; the taker decodes them. In a thread of the same process, as it
did before, every socket read gave the GIL up and then waited up to a switch interval
(5 ms) to get it back from the importing main thread: in docs/benchmarks.md's start
(1000 nodes, 5000 pods) the pods were listed 0.47-0.60 s after the process started and
every kind 0.63-0.80 s, and the first bind waited for the listing; from the child, 0.31-0.41
and 0.35-0.46 s, before the imports end. Elsewhere, or
where the fork or the memory file is refused, the thread lists. The takers are
the informers of :mod:`kubesched.cluster.informer` (pods, nodes) and the initial sync's
:meth:`~kubesched.operator.handlers.WatchRouter.reconcile` (the rest). Pods and nodes
come first (the large ones, and the informers' start), then the other
:data:`~kubesched.cluster.kinds.WATCHED` kinds, a round trip each on the same connection,
so the main thread waits for none of those round trips before its first cycle. The pages
are one consistent LIST, as the taker's own would be (the same path, no selector,
``limit`` and ``continue``); the informers' WATCH resumes from their resourceVersion
(Kopf, which watches the other kinds once the cache is synced, lists them itself, as
before).

After the watched kinds it lists the SchedulingProfiles and reads the foreign gang APIs'
discovery documents (:data:`DOCUMENTS`), the initial sync's other requests.

Only a 200 is taken, and a 404 for an optional kind, the profiles or a document (a CRD
not installed, an API not served): :meth:`Prefetch.take` (or :meth:`take_document`)
raises :class:`~kubesched.framework.cluster_port.NotFound` for it, as the taker's own
request would, and the taker reads it as none without asking again. A kind the server
answers otherwise (403: RBAC; 429, 5xx; a 404 for a required kind) is left to its taker,
which lists as it always did and so meets the same answer and does what it did with it
(a forbidden one fails the start with the API server's words); the prefetch goes on with
the next kind. Anything this client does not do as the real one does (a proxy), and a
failure of the connection itself, ends the prefetch quietly: :meth:`Prefetch.take` then
returns None for what is left, and those kinds are listed as usual. Only the first LIST
is taken; relists are the takers'.

The login it read (:attr:`Prefetch.login`, :func:`~kubesched.cluster.plain_login.parse`:
from the child, a line on the pipe before the first page) is ``run``'s too: its client
configuration is built from it without kubernetes_asyncio's loader
(:func:`~kubesched.cluster.kubeconfig.load_client_configuration`).
"""

from __future__ import annotations

import contextlib
import http.client
import logging
import os
import signal
import ssl
import tempfile
import threading
import urllib.parse
from collections.abc import Awaitable, Callable, Iterable
from typing import Any, NoReturn, cast

import orjson

from kubesched.cluster import plain_login
from kubesched.cluster.kinds import KINDS, OPTIONAL_KINDS, PROFILE, WATCHED, Reader
from kubesched.cluster.managed_fields import (
    STRUCT_ORDER_KINDS,
    decode_list,
    without_managed_fields,
)

__all__ = ["Page", "Prefetch", "Prefetched"]

log = logging.getLogger("kubesched.cluster.prefetch")

Page = tuple[list[dict[str, Any]], str]
"""(items, resourceVersion), items trimmed of ``managedFields``."""

Prefetched = Callable[[str], Awaitable[list[Page] | None]]
""":meth:`Prefetch.take`: kind -> its first listing, made ahead, or None (taken by
``WatchRouter.reconcile`` and ``ProfileController.load``)."""

PATHS: dict[str, str] = {k.kind: f"{k.prefix}/{k.plural}" for k in (*WATCHED, PROFILE)}
"""Kind -> the path a LIST of it GETs (as :data:`~kubesched.cluster.kinds.LIST_PATHS`):
the watched kinds, and the SchedulingProfiles the initial sync applies."""

ABSENT_OK = OPTIONAL_KINDS | {PROFILE.kind}
"""The kinds a 404 means none of (a CRD not installed, an API group off)."""

DOCUMENTS: tuple[str, ...] = tuple(
    dict.fromkeys(k.prefix for k in KINDS if k.reader is Reader.GANG_SOURCE)
)
"""The discovery documents the initial sync reads (the foreign gang APIs' group
versions: ``kubesched.operator.gang_sources``), fetched after the listings."""

FIRST = ("Pod", "Node")
"""Listed before the rest: the large listings, wanted first (the informers')."""


class _Refused(Exception):
    """The server answered a LIST with an error status (the connection stays usable)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def _meta(body: bytes) -> dict[str, Any]:
    """A LIST body's ``metadata`` (the continue token, the resourceVersion), read from the
    part before ``items`` where the API server wrote it first (Go writes a list's fields in
    struct order: kind, apiVersion, metadata, items), else from the whole body."""
    at = body.find(b'"items":')
    if at > 0:
        try:
            head = orjson.loads(body[:at].rstrip().rstrip(b",") + b"}")
        except orjson.JSONDecodeError:
            head = None
        if isinstance(head, dict) and isinstance(head.get("metadata"), dict):
            return cast(dict[str, Any], head["metadata"])
    whole = orjson.loads(body)
    meta = whole.get("metadata") if isinstance(whole, dict) else None
    return meta if isinstance(meta, dict) else {}


def can_fork() -> bool:
    """Whether the listing can run in a child process here: Linux's ``memfd_create`` and
    ``fork``, and no other thread yet (a thread holding a lock at the fork would leave it
    held in the child)."""
    return hasattr(os, "memfd_create") and hasattr(os, "fork") and threading.active_count() == 1


class Prefetch:
    """LISTs ``kinds`` (default: every watched kind; :data:`FIRST` first, the rest in
    :data:`~kubesched.cluster.kinds.WATCHED`'s order) from :meth:`start` on (see the
    module doc): in a child process when ``process`` is True (None: where
    :func:`can_fork`), else in a daemon thread."""

    def __init__(
        self,
        kubeconfig: str | None,
        kinds: Iterable[str] = tuple(PATHS),
        *,
        documents: Iterable[str] = DOCUMENTS,
        page_size: int = 500,
        timeout: float = 30.0,
        process: bool | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        wanted = [k for k in kinds if k in PATHS]
        self.kinds = [k for k in FIRST if k in wanted] + [k for k in wanted if k not in FIRST]
        """The kinds listed, in this order."""
        self.documents = [path for path in documents if path.startswith("/")]
        """The documents (by path) read after the kinds, in this order."""
        self.page_size = page_size
        self.timeout = timeout
        self.process = process
        self._bodies: dict[str, list[bytes] | list[tuple[int, int]]] = {}
        """Kind -> its pages' bodies as listed, decoded when taken: the bytes (thread), or
        where they are in :attr:`_data` (child process: offset, length)."""
        self._data = -1
        """Child process: the memory file it writes the bodies into (-1: none, closed)."""
        self._pid = 0
        self._prefix = ""
        self._done = {key: threading.Event() for key in (*self.kinds, *self.documents)}
        self._thread: threading.Thread | None = None
        self._absent: set[str] = set()
        """The kinds (optional ones, the profiles) and documents the server answered 404
        (not served): :meth:`take` and :meth:`take_document` say so, once."""
        self.login: plain_login.Plain | None = None
        """The login the listing uses, once it has connected, where
        :func:`~kubesched.cluster.plain_login.parse` read it (None: the real loader's)."""

    def start(self) -> Prefetch:
        forked = False
        if self.process if self.process is not None else can_fork():
            try:
                self._fork()
                forked = True
            except OSError as e:  # no memory file or no process to be had (seccomp, limits)
                log.debug("listing in a thread: %s", e)
        if not forked:
            self._thread = threading.Thread(
                target=self._run,
                args=(self._keep, self._ended, self._logged_in),
                name="kubesched-prefetch",
                daemon=True,
            )
            self._thread.start()
        return self

    async def take(self, kind: str) -> list[Page] | None:
        """The pages of ``kind`` once listed, or None (not prefetched, failed, taken).
        Raises :class:`~kubesched.framework.cluster_port.NotFound` (once) for an optional
        kind the server does not serve, as a LIST of it would."""
        if kind not in self._done or kind not in self.kinds:
            return None
        await self._wait(kind, PATHS[kind])
        bodies = self._bodies.pop(kind, None)
        if bodies is None:
            return None
        # decoded here, in the taker's thread: the listing only read them
        pages = (
            decode_list(body if isinstance(body, bytes) else os.pread(self._data, body[1], body[0]))
            for body in bodies
        )
        return [(items, version) for items, version, _ in pages]

    async def take_document(self, path: str) -> dict[str, Any] | None:
        """The document at ``path`` (:data:`DOCUMENTS`) once read, or None (not read,
        failed, taken). Raises :class:`~kubesched.framework.cluster_port.NotFound`
        (once) where the server answered 404, as a GET of it would."""
        if path not in self._done or path not in self.documents:
            return None
        await self._wait(path, path)
        bodies = self._bodies.pop(path, None)
        if not bodies:
            return None
        body = bodies[0]
        doc = orjson.loads(
            body if isinstance(body, bytes) else os.pread(self._data, body[1], body[0])
        )
        return doc if isinstance(doc, dict) else None

    async def _wait(self, key: str, path: str) -> None:
        """Until ``key`` is listed or read; NotFound where the server answered ``path``
        404 (said once: the next ask is the taker's own request)."""
        done = self._done[key]
        if not done.is_set():
            import asyncio  # loaded by then; not before the listing starts (~20 ms)

            await asyncio.to_thread(done.wait, self.timeout)
        if key in self._absent:
            from kubesched.framework.cluster_port import NotFound  # imported by then

            self._absent.discard(key)
            self._done.pop(key, None)
            raise NotFound(f"GET {path}: 404 (the start's listing)")

    def close(self) -> None:
        """Drop what was not taken; a child still listing is stopped (and reaped by the
        thread reading its frames)."""
        self._bodies.clear()
        if self._data >= 0:
            os.close(self._data)
            self._data = -1
        if self._pid and not all(d.is_set() for d in self._done.values()):
            with contextlib.suppress(ProcessLookupError):
                os.kill(self._pid, signal.SIGKILL)

    # -- the listing (in the thread, or in the child) -------------------------------------
    def _run(
        self,
        deliver: Callable[[str, list[bytes] | _Refused], None],
        ended: Callable[[str], None],
        logged_in: Callable[[plain_login.Plain], None],
    ) -> None:
        """List every kind, handing each its bodies (or why the server refused it)."""
        conn: http.client.HTTPConnection | None = None
        why = ""
        try:
            conn, headers = self._connect(logged_in)
            for kind in self.kinds:
                bodies: list[bytes] | _Refused
                try:
                    bodies = self._list(conn, headers, kind)
                except _Refused as e:  # see the module doc: taken as absent, or listed again
                    bodies = e
                deliver(kind, bodies)
            for path in self.documents:
                try:
                    bodies = self._read(conn, headers, path)
                except _Refused as e:  # 404: not served; else the taker reads it again
                    bodies = e
                deliver(path, bodies)
        except Exception as e:  # the connection failed: the takers list for themselves
            why = str(e) or type(e).__name__
        finally:
            if conn is not None:
                conn.close()
            ended(why)

    def _keep(self, kind: str, bodies: list[bytes] | _Refused) -> None:
        if isinstance(bodies, _Refused):
            self._refused(kind, str(bodies), bodies.status)
        else:
            self._bodies[kind] = bodies
            log.debug("prefetched %s: %d pages", kind, len(bodies))
        self._done[kind].set()

    def _refused(self, kind: str, why: str, status: object) -> None:
        log.debug("not prefetching %s: %s", kind, why)
        if status == 404 and (kind in ABSENT_OK or kind in self.documents):
            self._absent.add(kind)

    def _logged_in(self, plain: plain_login.Plain) -> None:
        self.login = plain

    def _ended(self, why: str) -> None:
        if why:
            log.debug("prefetch ended: %s", why)
        for done in self._done.values():
            done.set()

    # -- the child process -------------------------------------------------------------------
    def _fork(self) -> None:
        """Start the child: it lists as the thread would, writes each page's body into a
        memory file shared with this process and, per kind, one line on a pipe saying
        where its bodies are; a thread of this process reads those lines. The child holds
        no GIL of ours: its socket reads and TLS do not wait on the imports, nor they on
        it, and the API server's answers are read as fast as they come."""
        data = os.memfd_create("kubesched-prefetch", os.MFD_CLOEXEC)
        try:
            read_end, write_end = os.pipe()
        except OSError:
            os.close(data)
            raise
        try:
            pid = os.fork()
        except OSError:
            for fd in (data, read_end, write_end):
                os.close(fd)
            raise
        if pid == 0:  # the child: never returns
            os.close(read_end)
            self._child(data, write_end)
        os.close(write_end)
        self._data, self._pid = data, pid
        self._thread = threading.Thread(
            target=self._read_frames, args=(read_end,), name="kubesched-prefetch", daemon=True
        )
        self._thread.start()

    def _child(self, data: int, frames: int) -> NoReturn:
        code = 1
        try:
            # a Ctrl-C stops the child where it is, quietly (the parent reports it)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            written = 0

            def send(frame: dict[str, Any]) -> None:
                os.write(frames, orjson.dumps(frame) + b"\n")

            def deliver(kind: str, bodies: list[bytes] | _Refused) -> None:
                nonlocal written
                if isinstance(bodies, _Refused):
                    send({"kind": kind, "refused": str(bodies), "status": bodies.status})
                    return
                spans = []
                for body in bodies:
                    view = memoryview(body)
                    while view:  # a write to a memory file takes it all, but may not
                        view = view[os.write(data, view) :]
                    spans.append((written, len(body)))
                    written += len(body)
                send({"kind": kind, "spans": spans})

            self._run(
                deliver,
                lambda why: send({"end": why}),
                lambda plain: send({"login": plain.to_json()}),
            )
            code = 0
        finally:
            os._exit(code)  # nothing of the parent's (atexit, buffers) runs here

    def _read_frames(self, fd: int) -> None:
        try:
            with os.fdopen(fd, "rb") as lines:
                for line in lines:
                    frame = orjson.loads(line)
                    kind = frame.get("kind")
                    if kind in self._done:
                        if "spans" in frame:
                            self._bodies[kind] = [(int(a), int(n)) for a, n in frame["spans"]]
                            log.debug("prefetched %s: %d pages", kind, len(frame["spans"]))
                        else:
                            self._refused(kind, str(frame.get("refused")), frame.get("status"))
                        self._done[kind].set()
                    elif "login" in frame:
                        self.login = plain_login.Plain.from_json(frame["login"])
                    elif frame.get("end"):
                        log.debug("prefetch ended: %s", frame["end"])
        except (OSError, ValueError) as e:
            log.debug("prefetch ended: %s", e)
        finally:
            self._ended("")
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self._pid, 0)

    def _connect(
        self, logged_in: Callable[[plain_login.Plain], None]
    ) -> tuple[http.client.HTTPConnection, dict[str, str]]:
        with tempfile.TemporaryDirectory(prefix="kubesched-prefetch-") as temp:
            plain = plain_login.parse(self.kubeconfig)
            if plain is not None:
                logged_in(plain)
            login = plain_login.login(plain, temp) if plain is not None else self._login()
            url = urllib.parse.urlsplit(login.host)
            headers = {"Accept": "application/json"}
            if login.token:
                headers["Authorization"] = login.token
            conn: http.client.HTTPConnection
            if url.scheme == "https":
                ctx = ssl.create_default_context(cafile=login.ca_file or None)
                if not login.verify:
                    ctx.check_hostname = False
                    ctx.verify_mode = ssl.CERT_NONE
                if login.cert_file:
                    ctx.load_cert_chain(login.cert_file, login.key_file or None)
                conn = http.client.HTTPSConnection(
                    url.hostname or "", url.port, context=ctx, timeout=self.timeout
                )
            else:
                conn = http.client.HTTPConnection(
                    url.hostname or "", url.port, timeout=self.timeout
                )
        self._prefix = url.path.rstrip("/")
        return conn, headers

    def _login(self) -> plain_login.Login:
        """The real loader's answer (kubernetes_asyncio's), for what plain_login leaves."""
        import asyncio

        from kubesched.cluster.kubeconfig import load_client_configuration

        async def configure() -> tuple[Any, str]:
            cfg = await load_client_configuration(self.kubeconfig)
            return cfg, str(await cfg.get_api_key_with_prefix("BearerToken") or "")

        cfg, auth = asyncio.run(configure())
        if cfg.proxy:
            raise ValueError("a proxy is configured")
        if cfg.tls_server_name:
            raise ValueError("a TLS server name is configured")
        return plain_login.Login(
            host=str(cfg.host),
            ca_file=cfg.ssl_ca_cert or None,
            cert_file=cfg.cert_file or None,
            key_file=cfg.key_file or None,
            token=auth,
            verify=bool(cfg.verify_ssl),
        )

    def _get(
        self, conn: http.client.HTTPConnection, headers: dict[str, str], path: str, query: str = ""
    ) -> bytes:
        """The body of a GET of ``path``; :class:`_Refused` for a status but 200."""
        conn.request("GET", f"{self._prefix}{path}{query}", headers=headers)
        resp = conn.getresponse()
        body = resp.read()  # all of it, even refused: the connection serves the next
        if resp.status != 200:
            raise _Refused(f"GET {path}: {resp.status}", resp.status)
        return body

    def _read(
        self, conn: http.client.HTTPConnection, headers: dict[str, str], path: str
    ) -> list[bytes]:
        """A document's body (one)."""
        return [self._get(conn, headers, path)]

    def _list(
        self, conn: http.client.HTTPConnection, headers: dict[str, str], kind: str
    ) -> list[bytes]:
        """The bodies of all pages of ``kind`` (as
        :meth:`~kubesched.cluster.kube.KubeCluster.list_pages` would list them), pods' and
        nodes' without ``managedFields``; :class:`_Refused` at the first status but 200."""
        path, cut = PATHS[kind], kind in STRUCT_ORDER_KINDS
        bodies: list[bytes] = []
        token = ""
        while True:
            query = {"limit": str(self.page_size)}
            if token:
                query["continue"] = token
            body = self._get(conn, headers, path, f"?{urllib.parse.urlencode(query)}")
            bodies.append(without_managed_fields(body) if cut else body)
            token = str(_meta(body).get("continue") or "")
            if not token:
                return bodies
