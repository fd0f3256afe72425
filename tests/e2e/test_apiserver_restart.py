"""kube-apiserver restarted under load: ``kubesched run`` rides it out without a restart.

One ``kubesched run`` process (leader election on, with a renew deadline longer than
the outage, so the lease is kept) schedules a stream of 2000
pods onto 200 nodes of a control plane of its own. A third of the way in, kube-apiserver
is killed (etcd and its data stay), left down for a few seconds and started again on
the same port with the same certificates and tokens. Every connection breaks: the
informers' watches, Kopf's watches, binds in flight, event writes, the lease renewal.

Afterwards:

- the same kubesched process is still running (never restarted, never lost the lease)
  and its logs show it noticed the outage and resumed its watches;
- every pod is bound, exactly once: a watch that itself reconnects across the restart
  records every change of ``spec.nodeName``; the final listing agrees with it;
- at most one ``Scheduled`` event per pod;
- the scheduler's cache equals the API server's state.
"""

from __future__ import annotations

import asyncio
import base64
import collections
import json
import logging
import time
import urllib.request
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kubesched.operator.run import Runtime, run
from kubesched.operator.settings import Settings
from tests.controlplane import ControlPlane
from tests.e2e.failover_support import (
    PodStream,
    PodWatch,
    Replica,
    check_cache_equals_api,
    until,
)

pytestmark = pytest.mark.timeout(420)

NODES = 200
PODS = 2000
RATE = 80.0
"""Pods created per second: the stream lasts 25 s, the restart falls in its middle."""
DOWN = 3.0
"""Seconds kube-apiserver stays stopped (its start then takes a few more)."""
TIMINGS = (40.0, 30.0, 2.0)
"""Lease duration, renew deadline, retry period: kube-scheduler's (15 s, 10 s, 2 s) with
a renew deadline longer than the outage can last here (a kube-apiserver start takes 3 s
on an idle machine, 10 s and more on a loaded 2-core one). An outage longer than the
renew deadline ends leadership by design (kube-scheduler exits then too)."""


def test_kubesched_survives_an_apiserver_restart_mid_load(
    controlplane_factory: Any, tmp_path: Path
) -> None:
    cp: ControlPlane = controlplane_factory()
    namespace = "restart"
    cp.ensure_namespace(namespace)
    tag = uuid.uuid4().hex[:8]
    scheduler = f"restart-{tag}"
    pool = {"e2e.kubesched.dev/pool": scheduler}
    cp.create_nodes(NODES, cpu="8", memory="32Gi", pods="110", labels=pool, prefix="rs-")

    watch = PodWatch(cp, namespace, reconnect=True)
    watch.start()
    replica = Replica(
        "replica-a", cp, namespace, f"kubesched-{tag}", scheduler, tmp_path, timings=TIMINGS
    )
    stream = PodStream(cp, namespace, scheduler, pool, count=PODS, rate=RATE, retry=True)
    try:
        replica.wait_ready(90)
        until(lambda: replica.get("/readyz/leader") == 200, 30, "the replica leads")
        pid = replica.popen.pid

        stream.start()
        until(lambda: watch.bound() >= PODS // 3, 120, f"{PODS // 3} pods bound")
        t_stop = time.time()
        outage = cp.restart_apiserver(DOWN, kill=True)
        print(f"kube-apiserver was down {outage:.1f} s")
        bound_before = sum(1 for seen in watch.bindings.values() if seen[0][0] < t_stop)

        stream.join(180)
        assert not stream.is_alive(), "the pod stream did not finish"
        assert not stream.errors, stream.errors[:5]
        assert len(stream.created) == PODS
        until(lambda: watch.bound() == PODS, 240, f"all {PODS} pods bound", 0.2)

        # Never restarted: the same process, still leading.
        assert replica.popen.poll() is None, replica.log()[-3000:]
        assert replica.popen.pid == pid
        assert replica.get("/readyz/leader") == 200
        log = replica.log()
        assert "lost lease" not in log, log[-3000:]
        assert "Traceback" not in log, log[-3000:]
        # It noticed: its pod and node watches broke and were resumed (from their
        # resourceVersion, or by relisting when the new server no longer had it).
        for kind in ("Pod", "Node"):
            assert f"{kind} watch failed" in log or f"{kind} watch: resourceVersion" in log, (
                kind,
                log[-3000:],
            )
        # And it kept scheduling after the outage: pods were bound before and after.
        assert 0 < bound_before < PODS
        assert watch.first_bind_after(t_stop + outage) is not None

        # Every pod bound exactly once, on the node the final listing shows.
        assert not watch.errors, watch.errors
        assert watch.interruptions, "the test's own watch saw no outage"
        with watch.lock:
            twice = {watch.names[u]: s for u, s in watch.bindings.items() if len(s) > 1}
            recorded = {u: s[0][1] for u, s in watch.bindings.items()}
        assert not twice, f"pods bound more than once: {twice}"
        pods = cp.api.list("v1", "Pod", namespace)
        assert len(pods) == PODS
        assert all(p["spec"].get("nodeName") for p in pods), "a pod left unbound"
        assert {p["metadata"]["uid"]: p["spec"]["nodeName"] for p in pods} == recorded
        events = cp.api.list("events.k8s.io/v1", "Event", namespace)
        scheduled = collections.Counter(
            e["regarding"]["name"] for e in events if e["reason"] == "Scheduled"
        )
        assert not scheduled or max(scheduled.values()) == 1, scheduled.most_common(3)

        check_cache_equals_api(replica, cp)
    finally:
        replica.stop()
        watch.close()


CRDS = Path(__file__).parents[2] / "crds"


async def eventually(probe: Callable[[], bool], within: float, what: str) -> None:
    deadline = asyncio.get_running_loop().time() + within
    while True:
        if probe():
            return
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"not within {within:.0f} s: {what}")
        await asyncio.sleep(0.1)


def _etcd_delete(cp: ControlPlane, key: str) -> int:
    """Delete a key in etcd directly (its v3 JSON gateway): what another client did
    while this kube-apiserver was down. Returns how many keys were deleted."""
    body = json.dumps({"key": base64.b64encode(key.encode()).decode()}).encode()
    request = urllib.request.Request(f"{cp.etcd_url}/v3/kv/deleterange", data=body, method="POST")
    with urllib.request.urlopen(request, timeout=10) as resp:
        return int(json.loads(resp.read()).get("deleted") or 0)


async def test_objects_deleted_while_the_apiserver_was_down_are_forgotten(
    controlplane_factory: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """A PodGroup and a PodDisruptionBudget vanish while kube-apiserver is down. The
    restarted server answers every watch's old resourceVersion with 410; their informers
    relist and synthesize DELETED for what is gone (Kopf, which watched them before,
    relisted without: kubesched kept them for good, a deleted gang's spec still applied, a
    deleted budget still protecting pods from preemption): both are forgotten."""
    caplog.set_level(logging.INFO, logger="kubesched")
    cp: ControlPlane = await asyncio.to_thread(controlplane_factory)
    await asyncio.to_thread(cp.kubectl, "apply", "-f", CRDS, check=True)
    await asyncio.to_thread(
        cp.kubectl,
        "wait",
        "--for=condition=Established",
        "crd/podgroups.kubesched.dev",
        check=True,
    )
    ns = "gone"
    await asyncio.to_thread(cp.ensure_namespace, ns)
    settings = Settings(
        kubeconfig=str(cp.kubeconfig),
        scheduler_names=["gone"],
        leader_elect=False,
        port=0,
        client_qps=0,
        resync_seconds=0,
    )
    stop, ready = asyncio.Event(), asyncio.Event()
    built: list[Runtime] = []
    task = asyncio.create_task(run(settings=settings, stop=stop, ready=ready, runtime=built))
    try:
        await eventually(lambda: ready.is_set() or task.done(), 60, "kubesched ready")
        if task.done():
            task.result()
        store = built[0].cluster.objects
        group = {
            "apiVersion": "kubesched.dev/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": "g", "namespace": ns},
            "spec": {"minMember": 2},
        }
        budget = {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "b", "namespace": ns},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}},
        }
        for obj in (group, budget):
            await asyncio.to_thread(cp.api.create, obj)

        def held() -> set[str]:
            return {
                kind
                for kind in ("PodGroup", "PodDisruptionBudget")
                if f"{ns}/{'g' if kind == 'PodGroup' else 'b'}" in store.get(kind, {})
            }

        await eventually(lambda: held() == {"PodGroup", "PodDisruptionBudget"}, 30, "both seen")

        await asyncio.to_thread(cp.stop_apiserver, kill=True)
        assert _etcd_delete(cp, f"/registry/kubesched.dev/podgroups/{ns}/g") == 1
        assert _etcd_delete(cp, f"/registry/poddisruptionbudgets/{ns}/b") == 1
        await asyncio.to_thread(cp.start_apiserver)

        await eventually(lambda: not held() or task.done(), 90, "both forgotten")
        assert not task.done()
        forgotten = [r.getMessage() for r in caplog.records if "watch was behind" in r.getMessage()]
        assert "PodGroup gone/g vanished while the watch was behind: DELETED" in forgotten
        assert (
            "PodDisruptionBudget gone/b vanished while the watch was behind: DELETED" in forgotten
        )
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
