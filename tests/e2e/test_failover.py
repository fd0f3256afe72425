"""Two ``kubesched run`` replicas on the real kube-apiserver: one leader, failover, no
pod bound twice.

Each test starts two replicas as real processes (``python -m kubesched run``, leader
election on, identities ``replica-a``/``replica-b``, a Lease in the test's namespace,
a schedulerName of its own so no other test's pods are touched), makes nodes with a
label of its own, and creates a steady stream of pods while it stops the leader:

- SIGTERM: the leader finishes its binds, releases the Lease and exits 0; the follower
  takes over within a retry period, well before the lease would have expired;
- SIGKILL: the lease is left as a crash leaves it; the follower takes over once it has
  seen the lease unrenewed for a lease duration;
- the lease taken by someone else: the leader exits 1 and binds nothing after it knew.

A watch on the namespace's pods, opened before the first pod, records every change of
``spec.nodeName``: every pod must go from unbound to one node exactly once. Short lease
timings (4 s / 3 s / 1 s, kube-scheduler's rules with smaller numbers) keep each test
around twenty seconds.
"""

from __future__ import annotations

import asyncio
import collections
import logging
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubesched.framework.types import Pod
from kubesched.operator.run import Runtime, run
from kubesched.operator.settings import Settings
from tests.controlplane import ApiError, ControlPlane
from tests.e2e.cachecheck import fetch_cache
from tests.e2e.failover_support import (
    ATTEMPT,
    LEASE,
    PODS,
    RETRY,
    LeaseWatch,
    PodStream,
    PodWatch,
    ProxyThread,
    Replica,
    check_cache_equals_api,
    parse_time,
    until,
)

pytestmark = pytest.mark.timeout(90)

BINDING = r"/pods/[^/]+/binding$"

# -- the scene ----------------------------------------------------------------------------------


class Scene:
    """Nodes, a watch, two replicas and a pod stream. With ``leader_kubeconfig``
    replica-a talks through it (a fault proxy) and starts alone: it leads, and replica-b
    starts once it does."""

    def __init__(
        self, cp: ControlPlane, namespace: str, logs: Path, leader_kubeconfig: Path | None = None
    ) -> None:
        self.cp = cp
        self.namespace = namespace
        tag = uuid.uuid4().hex[:8]
        self.scheduler = f"failover-{tag}"
        self.lease = f"kubesched-{tag}"
        self.pool = {"e2e.kubesched.dev/pool": f"failover-{tag}"}
        cp.create_nodes(
            4, cpu="8", memory="32Gi", pods="110", labels=self.pool, prefix=f"fo-{tag}-"
        )
        self.watch = PodWatch(cp, namespace)
        self.watch.start()
        self.logs = logs
        self.staggered = leader_kubeconfig is not None
        names = ["replica-a"] if self.staggered else ["replica-a", "replica-b"]
        self.replicas = [
            Replica(
                name, cp, namespace, self.lease, self.scheduler, logs, kubeconfig=leader_kubeconfig
            )
            for name in names
        ]
        self.lease_watch = LeaseWatch(cp, namespace, self.lease, self.replicas)
        self.stream = PodStream(cp, namespace, self.scheduler, self.pool)

    def start(self) -> tuple[Replica, Replica]:
        """Both replicas ready, one of them leading: (leader, follower)."""
        for r in self.replicas:
            r.wait_ready()
        self.lease_watch.start()
        holder = until(
            lambda: self.lease_watch.holder() or None, ATTEMPT, "a replica holds the lease"
        )
        if self.staggered:
            self.replicas.append(
                Replica("replica-b", self.cp, self.namespace, self.lease, self.scheduler, self.logs)
            )
            self.replicas[1].wait_ready()
        leader, follower = sorted(self.replicas, key=lambda r: r.identity != holder)
        assert leader.identity == holder
        until(lambda: leader.get("/readyz/leader") == 200, 5, "/readyz/leader on the leader")
        assert follower.get("/readyz/leader") == 503
        assert follower.get("/readyz") == 200, "a follower is ready too (its cache is synced)"
        return leader, follower

    def stream_until_scheduling(self, bound: int = 40) -> None:
        self.stream.start()
        until(lambda: self.watch.bound() >= bound, 30, f"{bound} pods bound")

    def wait_all_bound(self, within: float = 40.0) -> None:
        self.stream.join(30)
        assert not self.stream.errors, self.stream.errors[:5]
        until(
            lambda: len(self.stream.created) == PODS and self.watch.bound() == PODS,
            within,
            f"all {PODS} pods bound",
            0.1,
        )

    def check_bound_once(self, extra: int = 0) -> None:
        """Every pod (the stream's and ``extra`` more) bound, each exactly once."""
        assert not self.watch.errors, self.watch.errors
        twice = {
            self.watch.names[uid]: seen
            for uid, seen in self.watch.bindings.items()
            if len(seen) > 1
        }
        assert not twice, f"pods bound more than once: {twice}"
        pods = self.cp.api.list("v1", "Pod", self.namespace)
        assert len(pods) == PODS + extra
        assert all(p["spec"].get("nodeName") for p in pods), "a pod left unbound"
        nodes = {p["metadata"]["uid"]: p["spec"]["nodeName"] for p in pods}
        for uid, seen in self.watch.bindings.items():
            assert seen[0][1] == nodes[uid]
        # Nothing failed: every node fits every pod, so a FailedScheduling event could only
        # come from a bind conflict reported as a failure. At most one Scheduled event per
        # pod (a killed leader may die between its bind and its event).
        events = self.cp.api.list("events.k8s.io/v1", "Event", self.namespace)
        failed = [e["note"] for e in events if e["reason"] == "FailedScheduling"]
        assert not failed, failed[:5]
        scheduled = collections.Counter(
            e["regarding"]["name"] for e in events if e["reason"] == "Scheduled"
        )
        assert max(scheduled.values()) == 1, scheduled.most_common(3)
        for r in self.replicas:
            log = r.log()
            assert "Traceback" not in log, log[-3000:]
            assert "error scheduling pod" not in log, log[-3000:]

    def check_one_leader(self) -> None:
        assert not self.lease_watch.both_leading, "two replicas answered /readyz/leader"
        holders = [h for _, h in self.lease_watch.holders]
        assert set(holders) <= {"", "replica-a", "replica-b"}, holders

    def close(self) -> None:
        for r in self.replicas:
            r.stop()
        self.lease_watch.close()
        self.watch.close()


@pytest.fixture
def scene(controlplane: ControlPlane, namespace: str, tmp_path: Path) -> Iterator[Scene]:
    s = Scene(controlplane, namespace, tmp_path)
    try:
        yield s
    finally:
        s.close()


def test_sigterm_releases_the_lease_and_the_follower_takes_over_at_once(scene: Scene) -> None:
    leader, follower = scene.start()
    scene.stream_until_scheduling()

    t_term = leader.signal(signal.SIGTERM)
    assert leader.wait_exit(15) == 0, leader.log()[-3000:]
    t_exit = time.time()
    assert "released lease" in leader.log()
    until(lambda: scene.lease_watch.acquired_by(follower.identity), ATTEMPT + 5, "a new leader")
    spec = scene.lease_watch.spec()
    assert spec["holderIdentity"] == follower.identity
    assert spec["leaseTransitions"] >= 1
    # Released, not expired: the follower's next attempt took it (acquireTime is the
    # new leader's own clock at the attempt; one machine, one clock).
    acquired = parse_time(spec["acquireTime"])
    assert acquired - t_exit < ATTEMPT, (t_term, t_exit, acquired)
    assert acquired - t_term < LEASE, (t_term, t_exit, acquired)
    until(lambda: follower.get("/readyz/leader") == 200, 5, "/readyz/leader on the new leader")

    scene.wait_all_bound()
    # The warm cache: scheduling resumed within about a second of acquiring the lease.
    first = scene.watch.first_bind_after(acquired)
    assert first is not None and first - acquired < 1.5, (acquired, first)
    scene.check_bound_once()
    scene.check_one_leader()

    # The last replica stops as cleanly, and leaves the lease free.
    follower.signal(signal.SIGTERM)
    assert follower.wait_exit(10) == 0, follower.log()[-3000:]
    assert (scene.lease_watch.spec().get("holderIdentity") or "") == ""


def test_sigkill_the_follower_takes_over_when_the_lease_expires(scene: Scene) -> None:
    leader, follower = scene.start()
    scene.stream_until_scheduling()

    t_kill = leader.signal(signal.SIGKILL)
    leader.wait_exit(5)
    pending_at_kill = scene.watch.unbound()
    until(
        lambda: scene.lease_watch.acquired_by(follower.identity),
        LEASE + 2 * ATTEMPT + 2,
        "a new leader",
    )
    spec = scene.lease_watch.spec()
    assert spec["holderIdentity"] == follower.identity
    acquired = parse_time(spec["acquireTime"])
    # Not before the lease (renewed at most a retry period before the kill) expired, and
    # not much later: the follower saw the last renewal within one attempt, waited a
    # lease duration from then, and took it at its next attempt.
    assert LEASE - RETRY - 0.5 <= acquired - t_kill <= LEASE + 2 * ATTEMPT, acquired - t_kill
    # Nothing was bound while nobody led.
    assert scene.watch.bound_between(t_kill + 0.5, acquired) == []

    scene.wait_all_bound()
    first = scene.watch.first_bind_after(acquired)
    assert first is not None and first - acquired < 1.5, (acquired, first)
    # The pods the killed leader had not bound (queued, or assumed with a bind in flight)
    # were bound by the new leader.
    with scene.watch.lock:
        if not pending_at_kill:
            # Under load the creators can fall behind the leader, so every pod created
            # before the kill was already bound: the new leader's work is then the pods
            # created after it.
            pending_at_kill = {
                uid for uid, seen in scene.watch.bindings.items() if seen[0][0] >= t_kill
            }
        assert pending_at_kill, "no pod was left for the new leader"
        late = [scene.watch.bindings[uid][0][0] for uid in pending_at_kill]
    assert min(late) >= t_kill
    scene.check_bound_once()
    scene.check_one_leader()


HELD = 5
"""Binds of the leader held at the fault proxy when it is killed."""


def test_sigkill_with_binds_in_flight_the_new_leader_binds_those_pods(
    controlplane: ControlPlane, namespace: str, tmp_path: Path
) -> None:
    """The killed leader holds assumed-but-unbound pods: its next binds hang at a fault
    proxy in front of it (the API server never sees them), so at the kill those pods are
    assumed in its cache with their binds in flight. The new leader never saw them
    assumed: it schedules them from its own queue, each bound exactly once."""
    proxy = ProxyThread(controlplane)
    scene = Scene(controlplane, namespace, tmp_path, leader_kubeconfig=proxy.kubeconfig)
    try:
        leader, follower = scene.start()
        assert leader.identity == "replica-a"
        scene.stream_until_scheduling()
        rule = proxy.do(proxy.proxy.hang_next, "POST", BINDING, HELD, 120.0)
        until(lambda: rule.hits >= HELD, 30, f"{HELD} binds held at the proxy", 0.1)
        held = {path.split("/")[-2] for method, path, what in proxy.proxy.log if what == "hang"}
        assert len(held) == HELD, proxy.proxy.log
        dump = fetch_cache(f"http://127.0.0.1:{leader.port}")
        assumed = {a["pod"].split("/", 1)[1] for a in dump["assumed"]}
        assert held <= assumed, (held, dump["assumed"])

        t_kill = leader.signal(signal.SIGKILL)
        leader.wait_exit(5)
        unbound = {p["metadata"]["name"] for p in scene.cp.api.list("v1", "Pod", namespace)
                   if not p["spec"].get("nodeName")}  # fmt: skip
        assert held <= unbound, "a held bind reached the API server"
        until(
            lambda: scene.lease_watch.acquired_by(follower.identity),
            LEASE + 2 * ATTEMPT + 2,
            "a new leader",
        )
        acquired = parse_time(scene.lease_watch.spec()["acquireTime"])
        assert acquired - t_kill <= LEASE + 2 * ATTEMPT, acquired - t_kill
        scene.wait_all_bound()
        with scene.watch.lock:
            late = {
                scene.watch.names[uid]: seen[0][0]
                for uid, seen in scene.watch.bindings.items()
                if scene.watch.names[uid] in held
            }
        assert set(late) == held
        assert min(late.values()) >= acquired - 0.5, (acquired, late)
        scene.check_bound_once()
        scene.check_one_leader()
        check_cache_equals_api(follower, scene.cp, namespace=namespace)
    finally:
        scene.close()
        proxy.close()


def test_a_leader_that_loses_the_lease_exits_and_binds_nothing_more(scene: Scene) -> None:
    leader, follower = scene.start()
    scene.stream_until_scheduling()

    # Someone else takes the lease (as an expiry seen by another replica would).
    def steal() -> float | None:
        lease = scene.cp.api.get(scene.lease_watch.path)
        lease["spec"].update(
            holderIdentity="intruder", leaseDurationSeconds=3600, leaseTransitions=99
        )
        try:
            scene.cp.api.put(scene.lease_watch.path, lease)
        except ApiError as e:
            if e.status == 409:  # renewed meanwhile: read again
                return None
            raise
        return time.time()

    t_steal = until(steal, 5, "the lease taken")
    code = leader.wait_exit(RETRY + 10)
    t_exit = time.time()
    assert code == 1, leader.log()[-3000:]
    assert t_exit - t_steal < RETRY + 4, "the leader stopped promptly"
    assert "lost the lease" in leader.log()
    assert "now held by intruder" in leader.log()
    # The leader sees the lease gone at its next renewal (one retry period) and stops at
    # once; after that nothing binds: the follower does not lead while "intruder" holds it.
    time.sleep(1.0)
    t_release = time.time()
    assert scene.watch.bound_between(t_steal + RETRY + 1.5, t_release) == []
    assert follower.get("/readyz/leader") == 503
    assert scene.watch.unbound(), "pods were waiting while nobody led"

    lease = scene.cp.api.get(scene.lease_watch.path)
    lease["spec"].update(holderIdentity="", leaseDurationSeconds=1)
    scene.cp.api.put(scene.lease_watch.path, lease)
    until(
        lambda: scene.lease_watch.acquired_by(follower.identity), ATTEMPT + 2, "the follower leads"
    )
    scene.wait_all_bound()
    scene.check_bound_once()
    assert not scene.lease_watch.both_leading


async def test_a_pod_bound_by_someone_else_before_our_bind_is_left_alone(
    controlplane: ControlPlane, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The real API server's 409 ("already assigned") at Bind, as a failover can cause it
    (the old leader's last bind not yet in the new leader's cache): the pod is forgotten,
    not retried, and nothing is reported against it."""
    caplog.set_level(logging.INFO, logger="kubesched.scheduler")
    cp = controlplane
    tag = uuid.uuid4().hex[:8]
    pool = {"e2e.kubesched.dev/pool": f"conflict-{tag}"}
    nodes = await asyncio.to_thread(cp.create_nodes, 2, labels=pool, prefix=f"cf-{tag}-")
    settings = Settings(
        kubeconfig=str(cp.kubeconfig),
        scheduler_names=[f"conflict-{tag}"],
        leader_elect=False,
        port=0,
        client_qps=0,
        resync_seconds=0,
    )
    stop, ready = asyncio.Event(), asyncio.Event()
    built: list[Runtime] = []
    task = asyncio.create_task(run(settings=settings, stop=stop, ready=ready, runtime=built))
    try:
        waiter = asyncio.create_task(ready.wait())
        await asyncio.wait({task, waiter}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        waiter.cancel()
        if task.done():
            task.result()  # raises what went wrong
        assert ready.is_set(), "kubesched run did not become ready within 60 s"
        rt = built[0]
        original = rt.cluster.bind
        attempts: list[str] = []

        async def bound_meanwhile(pod: Pod, node: str) -> None:
            attempts.append(node)
            other = next(n for n in nodes if n != node)
            await asyncio.to_thread(
                cp.api.post,
                f"/api/v1/namespaces/{pod.namespace}/pods/{pod.name}/binding",
                {
                    "apiVersion": "v1",
                    "kind": "Binding",
                    "metadata": {"name": pod.name, "namespace": pod.namespace},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": other},
                },
            )
            await original(pod, node)

        rt.cluster.bind = bound_meanwhile  # type: ignore[method-assign,assignment]
        body = PodStream(cp, namespace, f"conflict-{tag}", pool).body(0)
        created = await asyncio.to_thread(cp.api.create, body)
        uid = created["metadata"]["uid"]
        node = await asyncio.to_thread(cp.wait_bound, "p-0000", namespace, 30.0)
        sched = rt.scheduler
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 10
        while (sched.cache.get_pod(uid) or Pod(created)).node_name != node:
            assert loop.time() < deadline, "the cache never saw the pod on its node"
            await asyncio.sleep(0.05)
        await asyncio.sleep(2.5)  # past the first backoff: a requeued pod would be retried
        assert len(attempts) == 1 and attempts[0] != node
        assert any("was bound by someone else" in r.getMessage() for r in caplog.records)
        assert not sched.cache.is_assumed(uid)
        assert uid not in sched.unscheduled
        assert all(
            qpi.pod.uid != uid
            for q in sched.queues.queues().values()
            for qpi, _ in q.pending_pods()
        )
        events = await asyncio.to_thread(cp.api.list, "events.k8s.io/v1", "Event", namespace)
        assert [e["reason"] for e in events] == []
        pod = await asyncio.to_thread(cp.api.read, "v1", "Pod", "p-0000", namespace)
        assert pod["spec"]["nodeName"] == node
        assert not [
            c
            for c in pod["status"].get("conditions") or ()
            if c["type"] == "PodScheduled" and c["status"] == "False"
        ]
    finally:
        stop.set()
        await asyncio.wait_for(task, 30)
