"""The first LIST of every watched kind, started before the scheduler's modules are imported.

``kubesched run`` spends most of its way to the first bind importing (aiohttp, numpy,
pydantic models, the plugins, Kopf: about a CPU second on a loaded 2-core machine) and
then listing thousands of pods, which the API server takes a while to encode. The two
need not wait for each other: :class:`Prefetch` lists in a thread of its own with the
standard library's HTTP client (socket reads and TLS release the GIL, and the API server
works on another core) while the main thread imports, and the first listing of each
kind takes the pages (:meth:`Prefetch.take`) instead of making the same request again:
the informers of :mod:`kubesched.cluster.informer` (pods, nodes) and the initial sync's
:meth:`~kubesched.operator.handlers.WatchRouter.reconcile` (the rest). Pods and nodes
come first (the large ones, and the informers' start), then the other
:data:`~kubesched.cluster.kinds.WATCHED` kinds, a round trip each on the same connection,
so the main thread waits for none of those round trips before its first cycle. The pages
are one consistent LIST, as the taker's own would be (the same path, no selector,
``limit`` and ``continue``); the informers' WATCH resumes from their resourceVersion
(Kopf, which watches the other kinds once the cache is synced, lists them itself, as
before).

Only a 200 is taken. A kind the server answers otherwise (404: a CRD not installed, an
API not served; 403: RBAC; 429, 5xx) is left to its taker, which lists as it always did
and so meets the same answer and does what it did with it (an optional kind is listed as
none, a forbidden one fails the start with the API server's words); the prefetch goes on
with the next kind. Anything this client does not do as the real one does (a proxy), and
a failure of the connection itself, ends the prefetch quietly: :meth:`Prefetch.take`
then returns None for what is left, and those kinds are listed as usual. Only the first
LIST is taken; relists are the takers'.
"""

from __future__ import annotations

import http.client
import logging
import ssl
import tempfile
import threading
import urllib.parse
from collections.abc import Iterable
from typing import Any

import orjson

from kubesched.cluster import plain_login
from kubesched.cluster.kinds import WATCHED
from kubesched.cluster.managed_fields import STRUCT_ORDER_KINDS, without_managed_fields

__all__ = ["Page", "Prefetch"]

log = logging.getLogger("kubesched.cluster.prefetch")

Page = tuple[list[dict[str, Any]], str]
"""(items, resourceVersion), items trimmed of ``managedFields``."""

PATHS: dict[str, str] = {k.kind: f"{k.prefix}/{k.plural}" for k in WATCHED}
"""Kind -> the path a LIST of it GETs (as :data:`~kubesched.cluster.kinds.LIST_PATHS`)."""

FIRST = ("Pod", "Node")
"""Listed before the rest: the large listings, wanted first (the informers')."""


class _Refused(Exception):
    """The server answered a LIST with an error status (the connection stays usable)."""


class Prefetch:
    """LISTs ``kinds`` (default: every watched kind; :data:`FIRST` first, the rest in
    :data:`~kubesched.cluster.kinds.WATCHED`'s order) in a daemon thread from
    :meth:`start` on (see the module doc)."""

    def __init__(
        self,
        kubeconfig: str | None,
        kinds: Iterable[str] = tuple(PATHS),
        *,
        page_size: int = 500,
        timeout: float = 30.0,
    ) -> None:
        self.kubeconfig = kubeconfig
        wanted = [k for k in kinds if k in PATHS]
        self.kinds = [k for k in FIRST if k in wanted] + [k for k in wanted if k not in FIRST]
        self.page_size = page_size
        self.timeout = timeout
        self._pages: dict[str, list[Page] | None] = {}
        self._prefix = ""
        self._done = {kind: threading.Event() for kind in self.kinds}
        self._thread = threading.Thread(target=self._run, name="kubesched-prefetch", daemon=True)

    def start(self) -> Prefetch:
        self._thread.start()
        return self

    async def take(self, kind: str) -> list[Page] | None:
        """The pages of ``kind`` once listed, or None (not prefetched, failed, taken)."""
        done = self._done.get(kind)
        if done is None:
            return None
        if not done.is_set():
            import asyncio  # loaded by then; not before the thread starts (~20 ms)

            await asyncio.to_thread(done.wait, self.timeout)
        return self._pages.pop(kind, None)

    # -- the thread ----------------------------------------------------------------------------
    def _run(self) -> None:
        conn: http.client.HTTPConnection | None = None
        try:
            conn, headers = self._connect()
            for kind in self.kinds:
                try:
                    self._pages[kind] = pages = self._list(conn, headers, kind)
                    log.debug("prefetched %d %s objects", sum(len(p[0]) for p in pages), kind)
                except _Refused as e:  # its taker lists it, and meets the same answer
                    log.debug("not prefetching %s: %s", kind, e)
                self._done[kind].set()
        except Exception as e:  # the connection failed: the takers list for themselves
            log.debug("prefetch ended: %s", e)
        finally:
            for done in self._done.values():
                done.set()
            if conn is not None:
                conn.close()

    def _connect(self) -> tuple[http.client.HTTPConnection, dict[str, str]]:
        with tempfile.TemporaryDirectory(prefix="kubesched-prefetch-") as temp:
            login = plain_login.read(self.kubeconfig, temp) or self._login()
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

    def _list(
        self, conn: http.client.HTTPConnection, headers: dict[str, str], kind: str
    ) -> list[Page]:
        """All pages of ``kind`` (as :meth:`~kubesched.cluster.kube.KubeCluster.list_pages`
        would list them); :class:`_Refused` at the first status but 200."""
        path, cut = PATHS[kind], kind in STRUCT_ORDER_KINDS
        pages: list[Page] = []
        token = ""
        while True:
            query = {"limit": str(self.page_size)}
            if token:
                query["continue"] = token
            conn.request(
                "GET",
                f"{self._prefix}{path}?{urllib.parse.urlencode(query)}",
                headers=headers,
            )
            resp = conn.getresponse()
            body = resp.read()  # all of it, even refused: the connection serves the next
            if resp.status != 200:
                raise _Refused(f"GET {path}: {resp.status}")
            page = orjson.loads(without_managed_fields(body) if cut else body)
            del body
            meta = page.get("metadata") or {}
            items: list[dict[str, Any]] = page.get("items") or []
            for item in items:
                item_meta = item.get("metadata")
                if isinstance(item_meta, dict):
                    item_meta.pop("managedFields", None)  # kubesched.cluster.kube.trim
            pages.append((items, str(meta.get("resourceVersion") or "")))
            token = str(meta.get("continue") or "")
            if not token:
                return pages
