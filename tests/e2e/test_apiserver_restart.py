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

import collections
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

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
