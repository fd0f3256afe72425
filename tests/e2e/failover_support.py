"""Machinery for the e2e reliability tests: ``kubesched run`` replicas as real processes,
a pod stream, and watches that record every binding and every lease holder.

Used by test_failover (leader loss), test_apiserver_restart and the soak driver
(``python -m tests.soak``). The watches and the stream can ride out an API server restart
(``reconnect`` / ``retry``): interruptions are counted, never silently lost.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import http.client
import json
import os
import re
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Coroutine
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from tests.controlplane import ApiError, ControlPlane
from tests.controlplane.faultproxy import FaultProxy

JSON = dict[str, Any]
T = TypeVar("T")

LEASE, RENEW, RETRY = 4.0, 3.0, 1.0
ATTEMPT = RETRY * 2.2 + 1.5
"""The longest a follower sleeps between two attempts (client-go's jitter), plus slack
for API round trips on a loaded 2-core CI machine."""
PODS = 300
RATE = 40.0
"""Pods created per second: the stream lasts 7.5 s, longer than a failover."""


def until(probe: Callable[[], T | None], within: float, what: str, interval: float = 0.05) -> T:
    deadline = time.monotonic() + within
    while True:
        result = probe()
        if result is not None and result is not False:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not within {within:.1f} s: {what}")
        time.sleep(interval)


def parse_time(text: str) -> float:
    """RFC 3339 (MicroTime or Time) -> Unix seconds."""
    from datetime import datetime

    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


# -- the replicas ----------------------------------------------------------------------------


class Replica:
    """``python -m kubesched run`` as a child process, its log in a file."""

    SERVING = re.compile(r"serving /healthz .* on [\d.]+:(\d+)")

    def __init__(
        self,
        identity: str,
        cp: ControlPlane,
        namespace: str,
        lease: str,
        scheduler: str,
        logs: Path,
        *,
        timings: tuple[float, float, float] = (LEASE, RENEW, RETRY),
        env: dict[str, str] | None = None,
        kubeconfig: Path | None = None,
    ) -> None:
        self.identity = identity
        self.scheduler = scheduler
        self.log_path = logs / f"{identity}.log"
        lease_duration, renew_deadline, retry_period = timings
        extra_env = env
        env = dict(os.environ)
        env.update(
            KUBESCHED_IDENTITY=identity,
            KUBESCHED_RESYNC_SECONDS="0",
            PYTHONUNBUFFERED="1",
        )
        env.update(extra_env or {})
        argv = [
            sys.executable,
            "-m",
            "kubesched",
            "run",
            f"--kubeconfig={kubeconfig or cp.kubeconfig}",
            f"--scheduler-name={scheduler}",
            f"--namespace={namespace}",
            f"--lease-name={lease}",
            "--leader-elect",
            f"--leader-elect-lease-duration={lease_duration:g}s",
            f"--leader-elect-renew-deadline={renew_deadline:g}s",
            f"--leader-elect-retry-period={retry_period * 1000:g}ms",
            "--bind-address=127.0.0.1",
            "--port=0",
            "--kube-api-qps=0",
        ]
        with self.log_path.open("ab") as out:
            self.popen = subprocess.Popen(
                argv, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT, env=env
            )
        self.port: int | None = None

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def _find_port(self) -> int | None:
        if self.popen.poll() is not None:
            raise AssertionError(
                f"{self.identity} exited with {self.popen.returncode}:\n{self.log()[-3000:]}"
            )
        m = self.SERVING.search(self.log())
        return int(m.group(1)) if m else None

    def get(self, path: str) -> int:
        """The HTTP status of one of its endpoints (0: not answering)."""
        if self.port is None:
            return 0
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}{path}", timeout=1) as r:
                return int(r.status)
        except urllib.error.HTTPError as e:
            e.close()  # its connection, now: not in a later test's garbage collection
            return int(e.code)
        except OSError:
            return 0

    def wait_ready(self, within: float = 45.0) -> None:
        self.port = until(self._find_port, within, f"{self.identity} serving", 0.1)
        until(lambda: self.get("/readyz") == 200, within, f"{self.identity} /readyz", 0.1)

    def signal(self, sig: signal.Signals) -> float:
        self.popen.send_signal(sig)
        return time.time()

    def wait_exit(self, within: float) -> int:
        try:
            return self.popen.wait(within)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"{self.identity} still running {within:.0f} s later:\n{self.log()[-3000:]}"
            ) from None

    def stop(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
            self.popen.wait()


# -- what the test watches ----------------------------------------------------------------------


class PodWatch(threading.Thread):
    """Every change of ``spec.nodeName`` of the namespace's pods, with wall-clock times.

    Watches from the namespace's list resourceVersion (taken before any pod exists), in
    short server-side windows resumed from the last resourceVersion, so ``close`` is quick.

    With ``reconnect`` (the API server is restarted under it) a broken or refused
    connection or a 5xx is recorded in ``interruptions`` and the watch resumes from the
    last resourceVersion; ``410 Gone`` relists and compares every pod with what was seen,
    so no change of ``spec.nodeName`` is missed. Otherwise every failure ends the watch
    and goes to ``errors``.
    """

    def __init__(self, cp: ControlPlane, namespace: str, *, reconnect: bool = False) -> None:
        super().__init__(name=f"watch-{namespace}", daemon=True)
        self.cp = cp
        self.namespace = namespace
        self.lock = threading.Lock()
        self.bindings: dict[str, list[tuple[float, str]]] = collections.defaultdict(list)
        """uid -> [(when, node)]: one entry per change to a (new) nodeName."""
        self.names: dict[str, str] = {}
        self.errors: list[str] = []
        self.reconnect = reconnect
        self.interruptions: list[str] = []
        self.relists = 0
        self._node: dict[str, str] = {}
        self._halt = threading.Event()
        listing = cp.api.get(f"/api/v1/namespaces/{namespace}/pods")
        self._rv = str(listing["metadata"]["resourceVersion"])
        self._ssl = ssl.create_default_context(cafile=str(cp.ca_file))
        host, port = cp.server.removeprefix("https://").rsplit(":", 1)
        self._host, self._port = host, int(port)

    def run(self) -> None:
        while not self._halt.is_set():
            conn = http.client.HTTPSConnection(
                self._host, self._port, context=self._ssl, timeout=15
            )
            try:
                conn.request(
                    "GET",
                    f"/api/v1/namespaces/{self.namespace}/pods?watch=1&allowWatchBookmarks=true"
                    f"&timeoutSeconds=1&resourceVersion={self._rv}",
                    headers={"Authorization": f"Bearer {self.cp.admin_token}"},
                )
                resp = conn.getresponse()
                if resp.status == 410 and self.reconnect:
                    raise _Gone()
                if resp.status != 200:
                    raise _Interrupted(f"HTTP {resp.status}: {resp.read()[:200]!r}")
                for line in resp:
                    self._event(json.loads(line))
            except _Gone:
                try:
                    self._relist()
                except Exception as e:
                    if not transient(e):
                        self.errors.append(f"relist: {type(e).__name__}: {e}")
                        return
                    self.interruptions.append(f"relist: {type(e).__name__}: {e}")
                    self._halt.wait(0.2)
            except Exception as e:
                if not (self.reconnect and transient(e)):
                    self.errors.append(f"watch: {type(e).__name__}: {e}")  # the test asserts
                    return
                self.interruptions.append(f"{type(e).__name__}: {e}")
                self._halt.wait(0.2)
            finally:
                conn.close()

    def _relist(self) -> None:
        """410 Gone: list, and take every pod as a MODIFIED event (a pod deleted meanwhile
        keeps its record: the tests do not delete pods while the API server restarts)."""
        listing = self.cp.api.get(f"/api/v1/namespaces/{self.namespace}/pods")
        self.relists += 1
        for pod in listing["items"]:
            self._event({"type": "MODIFIED", "object": pod})
        self._rv = str(listing["metadata"]["resourceVersion"])

    def _event(self, ev: JSON) -> None:
        obj = ev["object"]
        if ev["type"] == "ERROR":
            if self.reconnect and obj.get("code") == 410:
                raise _Gone()
            if self.reconnect and int(obj.get("code") or 0) >= 500:
                raise _Interrupted(str(obj.get("message")))
            self.errors.append(f"watch: {obj.get('message')}")
            self._halt.set()
            return
        self._rv = str(obj["metadata"]["resourceVersion"])
        if ev["type"] == "BOOKMARK":
            return
        uid = obj["metadata"]["uid"]
        node = obj["spec"].get("nodeName") or ""
        with self.lock:
            self.names[uid] = obj["metadata"]["name"]
            if node and node != self._node.get(uid, ""):
                self.bindings[uid].append((time.time(), node))
            if node or uid not in self._node:
                self._node[uid] = node

    def bound(self) -> int:
        with self.lock:
            return len(self.bindings)

    def bound_between(self, start: float, end: float) -> list[str]:
        with self.lock:
            return [
                self.names[uid]
                for uid, seen in self.bindings.items()
                if any(start <= t < end for t, _ in seen)
            ]

    def unbound(self) -> set[str]:
        with self.lock:
            return {uid for uid in self.names if uid not in self.bindings}

    def first_bind_after(self, t0: float) -> float | None:
        with self.lock:
            after = [t for seen in self.bindings.values() for t, _ in seen if t >= t0]
        return min(after) if after else None

    def close(self) -> None:
        self._halt.set()
        self.join(5)


class _Gone(Exception):
    """410: the watch's resourceVersion is too old."""


class _Interrupted(Exception):
    """The API server answered with something other than a watch (down, starting)."""


def transient(e: Exception) -> bool:
    """A failure an API server restart causes (refused, reset, timed out, 5xx)."""
    if isinstance(e, ApiError):
        return e.status >= 500 or e.status == 429
    return isinstance(e, (_Interrupted, OSError, http.client.HTTPException, ValueError))


class LeaseWatch(threading.Thread):
    """Polls the Lease and both replicas' /readyz/leader every 100 ms."""

    def __init__(self, cp: ControlPlane, namespace: str, lease: str, replicas: list[Replica]):
        super().__init__(name=f"lease-{lease}", daemon=True)
        self.path = f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases/{lease}"
        self.cp = cp
        self.replicas = replicas
        self.holders: list[tuple[float, str]] = []
        """(when first seen, holderIdentity), one entry per change."""
        self.both_leading: list[float] = []
        self.errors: list[str] = []
        self._halt = threading.Event()

    def spec(self) -> JSON:
        try:
            spec: JSON = self.cp.api.get(self.path)["spec"]
            return spec
        except ApiError as e:
            if e.status == 404:
                return {}
            raise

    def run(self) -> None:
        while not self._halt.is_set():
            try:
                holder = self.spec().get("holderIdentity") or ""
            except Exception as e:
                self.errors.append(f"{type(e).__name__}: {e}")
                holder = self.holders[-1][1] if self.holders else ""
            if not self.holders or self.holders[-1][1] != holder:
                self.holders.append((time.time(), holder))
            live = [r for r in self.replicas if r.popen.poll() is None]
            if len([r for r in live if r.get("/readyz/leader") == 200]) > 1:
                self.both_leading.append(time.time())
            self._halt.wait(0.1)

    def holder(self) -> str:
        return self.holders[-1][1] if self.holders else ""

    def acquired_by(self, identity: str) -> float | None:
        for t, h in self.holders:
            if h == identity:
                return t
        return None

    def close(self) -> None:
        self._halt.set()
        self.join(5)


class PodStream(threading.Thread):
    """Creates ``count`` pods at ``rate`` a second, pinned to the test's nodes.

    With ``retry`` (the API server is restarted meanwhile) a create that fails with a
    connection error or a 5xx is retried until it succeeds; 409 AlreadyExists on a retry
    means the lost answer's create went through. Otherwise failures go to ``errors``.
    """

    def __init__(
        self,
        cp: ControlPlane,
        namespace: str,
        scheduler: str,
        pool: JSON,
        *,
        count: int = PODS,
        rate: float = RATE,
        retry: bool = False,
    ) -> None:
        super().__init__(name=f"pods-{namespace}", daemon=True)
        self.cp, self.namespace, self.scheduler, self.pool = cp, namespace, scheduler, pool
        self.count, self.rate, self.retry = count, rate, retry
        self.created: list[str] = []
        self.errors: list[str] = []
        self.retries = 0

    def body(self, i: int) -> JSON:
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p-{i:04d}", "namespace": self.namespace},
            "spec": {
                "schedulerName": self.scheduler,
                "nodeSelector": dict(self.pool),
                "containers": [
                    {
                        "name": "pause",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                    }
                ],
            },
        }

    def _create(self, i: int) -> None:
        deadline = time.monotonic() + 120
        retried = False
        while True:
            try:
                self.cp.api.create(self.body(i))
            except ApiError as e:
                if retried and e.status == 409:
                    break  # the attempt whose answer was lost had created it
                if not (self.retry and transient(e)) or time.monotonic() > deadline:
                    self.errors.append(f"p-{i:04d}: {e}")
                    return
            except Exception as e:
                if not (self.retry and transient(e)) or time.monotonic() > deadline:
                    self.errors.append(f"p-{i:04d}: {e}")
                    return
            else:
                break
            retried = True
            self.retries += 1
            time.sleep(0.25)
        self.created.append(f"p-{i:04d}")

    def run(self) -> None:
        start = time.monotonic()
        with ThreadPoolExecutor(max_workers=4) as pool:
            for i in range(self.count):
                delay = start + i / self.rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                pool.submit(self._create, i)


def check_cache_equals_api(
    replica: Replica, cp: ControlPlane, *, namespace: str | None = None, within: float = 60.0
) -> None:
    """The replica's cache (``/debug/cache``) equals the API server's state: every bound
    pod cached on its node, nothing assumed any more, every unbound pod of its scheduler
    name queued with a reason, the same nodes (tests/e2e/cachecheck.py)."""
    from tests.e2e.cachecheck import assert_cache_matches_api

    assert replica.port is not None, f"{replica.identity} is not serving"
    assert_cache_matches_api(
        f"http://127.0.0.1:{replica.port}",
        cp.api,
        replica.scheduler,
        namespace=namespace,
        within=within,
    )


class ProxyThread:
    """The fault proxy (tests/controlplane/faultproxy.py) in an event loop of its own
    thread, for tests whose replicas are processes: ``do(fn, ...)`` calls a FaultProxy
    method (``hang_next``, ...) on that loop."""

    def __init__(self, cp: ControlPlane) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.proxy = FaultProxy(cp.server, ssl.create_default_context(cafile=str(cp.ca_file)))
        self.call(self.proxy.start())
        self.kubeconfig = self.proxy.kubeconfig(cp.dir, cp.admin_token)

    def call(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    def do(self, fn: Callable[..., T], *args: Any) -> T:
        async def call() -> T:
            return fn(*args)

        return self.call(call())

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.call(self.proxy.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()
