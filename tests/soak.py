"""The soak: two ``kubesched run`` replicas under mixed churn and injected faults.

``python -m tests.soak --minutes 10 --nodes 1000`` starts a fresh control plane (etcd +
kube-apiserver, tests/controlplane) with ``--nodes`` bare nodes, the PodGroup CRD, and
two replicas with leader election on, then for ``--minutes``:

- creates pods at ``--pod-rate`` a second (small random requests) and a gang (a PodGroup
  and its members, all-or-nothing) every ``--gang-every`` seconds;
- deletes bound pods once they are ``--pod-lifetime`` seconds old (a gang's PodGroup goes
  with its last member), so the cluster holds a steady population;
- every ``--node-churn-every`` seconds adds a node, drains and deletes one (its pods
  deleted too, as the pod GC would), cordons or uncordons one;
- injects faults, one at a time: a kube-apiserver restart (SIGKILL or SIGTERM, alternating;
  etcd keeps the data) every ``--apiserver-restart-every`` seconds, and a SIGKILL of the
  leader every ``--leader-kill-every`` seconds, the killed replica replaced by a new
  process (a fault injected, not a scheduler restart).

Then churn stops and the run settles: every pod must be bound, or pending in the
leader's queue with a reason. It checks:

- no double binds: a watch (reconnecting across the restarts) records every change of
  each pod's ``spec.nodeName``; none may change twice;
- no pod lost: every pod created and not deleted by the soak still exists, and is bound
  or pending with a reason;
- the leader's cache (``/debug/cache``) equals the API server's state;
- restarts: replicas that exited without being killed by the soak (a crash, a lost lease).

It prints a JSON summary (pods scheduled, faults injected by kind, pods lost, double
binds, restarts, peak RSS per replica process, and more) and exits 1 if an invariant
failed. It lives with the tests, not in the package: it drives the test control plane
(restarting its API server) and kills processes, which is nothing a user's cluster should
ever get from ``kubesched``. ``tests/e2e/test_soak.py`` runs a one-minute version.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import json
import os
import random
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from tests.controlplane import ApiError, Binaries, ControlPlane
from tests.e2e.cachecheck import cache_mismatches, fetch_cache
from tests.e2e.failover_support import PodWatch, Replica
from tests.soak_parts import (
    CRDS,
    GROUP_LABEL,
    JSON,
    LEASE,
    NAMESPACE,
    SCHEDULER,
    Counts,
    Options,
    ReplicaSlot,
    retrying,
)


class Soak:
    def __init__(self, options: Options) -> None:
        self.o = options
        self.rng = random.Random(options.seed)
        directory = options.controlplane_dir or os.environ.get("KUBESCHED_CONTROLPLANE_DIR", "")
        if not directory:
            raise SystemExit("--controlplane-dir or KUBESCHED_CONTROLPLANE_DIR is needed")
        self.cp = ControlPlane(Binaries.from_dir(directory))
        self.counts = Counts()
        self.logs = Path(options.logs) if options.logs else self.cp.dir / "logs"
        self.logs.mkdir(parents=True, exist_ok=True)
        self.lock = threading.Lock()
        self.created: dict[str, str] = {}
        """pod name -> its gang ("" for none), every pod whose create succeeded."""
        self.deleted: set[str] = set()
        self.gangs: dict[str, set[str]] = {}
        """PodGroup -> its members not deleted yet."""
        self.nodes: list[str] = []
        self.cordoned: set[str] = set()
        self.halt = threading.Event()
        self.fault_log: list[JSON] = []
        self.slots: list[ReplicaSlot] = []
        self.watch: PodWatch | None = None
        self.restarts = 0
        self.t0 = 0.0

    # -- the run ------------------------------------------------------------------------------
    def run(self) -> JSON:
        self.cp.start()
        try:
            return self._run()
        finally:
            for slot in self.slots:
                if slot.replica is not None:
                    slot.replica.stop()
            if self.watch is not None:
                self.watch.close()
            self.cp.stop()

    def _run(self) -> JSON:
        cp = self.cp
        cp.kubectl("apply", "-f", CRDS, check=True)
        cp.kubectl("wait", "--for=condition=Established", "crd/podgroups.kubesched.dev", check=True)
        cp.ensure_namespace(NAMESPACE)
        self.nodes = cp.create_nodes(self.o.nodes, cpu="8", memory="32Gi", prefix="soak-")
        self.watch = PodWatch(cp, NAMESPACE, reconnect=True)
        self.watch.start()
        self.slots = [ReplicaSlot(self.cp, self.logs, slot) for slot in ("a", "b")]
        for slot in self.slots:
            assert slot.replica is not None
            slot.replica.wait_ready(120)
        self.t0 = time.monotonic()
        end = self.t0 + self.o.minutes * 60
        faults = threading.Thread(target=self._faults, name="soak-faults", daemon=True)
        faults.start()
        with ThreadPoolExecutor(max_workers=6) as pool:
            next_pod = next_gang = next_churn = next_delete = self.t0
            next_gang += self.o.gang_every / 2
            next_sample = self.t0
            i = 0
            while (now := time.monotonic()) < end:
                while next_pod <= now:
                    pool.submit(self._create_pod, f"p-{i:06d}")
                    i += 1
                    next_pod += 1 / self.o.pod_rate
                if next_gang <= now:
                    pool.submit(self._create_gang, f"g-{int(now - self.t0):05d}")
                    next_gang += self.o.gang_every
                if next_churn <= now:
                    pool.submit(self._churn_nodes)
                    next_churn += self.o.node_churn_every
                if next_delete <= now:
                    for name in self._expired():
                        pool.submit(self._delete_pod, name)
                    next_delete += 1.0
                if next_sample <= now:
                    self._supervise()
                    next_sample += 1.0
                time.sleep(0.02)
            self.halt.set()
            faults.join(180)
        return self._settle_and_check()

    # -- churn --------------------------------------------------------------------------------
    def _pod(self, name: str, gang: str = "") -> JSON:
        cpu = self.rng.choice(("50m", "100m", "250m", "500m"))
        labels = {GROUP_LABEL: gang} if gang else {}
        return {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": labels},
            "spec": {
                "schedulerName": SCHEDULER,
                "containers": [
                    {
                        "name": "pause",
                        "image": "registry.k8s.io/pause:3.10",
                        "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}},
                    }
                ],
            },
        }

    def _create(self, obj: JSON) -> None:
        attempts = [0]

        def create() -> None:
            attempts[0] += 1
            try:
                self.cp.api.create(obj)
            except ApiError as e:
                if not (e.status == 409 and attempts[0] > 1):  # the lost answer's create
                    raise

        retrying(create, counts=self.counts)

    def _create_pod(self, name: str, gang: str = "") -> None:
        try:
            self._create(self._pod(name, gang))
        except Exception as e:
            self._note("create-failed", f"{name}: {e}")
            return
        with self.lock:
            self.created[name] = gang
            self.counts.pods_created += 1

    def _create_gang(self, group: str) -> None:
        size = self.rng.randint(*self.o.gang_size)
        body = {
            "apiVersion": "kubesched.dev/v1alpha1",
            "kind": "PodGroup",
            "metadata": {"name": group, "namespace": NAMESPACE},
            "spec": {"minMember": size, "scheduleTimeoutSeconds": 60},
        }
        try:
            self._create(body)
        except Exception as e:
            self._note("create-failed", f"podgroup {group}: {e}")
            return
        names = [f"{group}-{k}" for k in range(size)]
        with self.lock:
            self.gangs[group] = set(names)
            self.counts.gangs_created += 1
        for name in names:
            self._create_pod(name, group)

    def _expired(self) -> list[str]:
        """Bound pods older than their lifetime, not deleted yet (whole gangs at once)."""
        assert self.watch is not None
        horizon = time.time() - self.o.pod_lifetime
        with self.watch.lock:
            bound = {self.watch.names[uid]: seen[0][0] for uid, seen in self.watch.bindings.items()}
        out = []
        with self.lock:
            for name, gang in self.created.items():
                if name in self.deleted or bound.get(name, horizon + 1) > horizon:
                    continue
                if gang and any(bound.get(m, horizon + 1) > horizon for m in self.gangs[gang]):
                    continue  # a gang goes once all its members are old enough
                out.append(name)
                self.deleted.add(name)
        return out

    def _delete_pod(self, name: str) -> None:
        def delete() -> None:
            try:
                self.cp.api.remove("v1", "Pod", name, NAMESPACE, grace_period_seconds=0)
            except ApiError as e:
                if e.status != 404:
                    raise

        try:
            retrying(delete, counts=self.counts)
        except Exception as e:
            self._note("delete-failed", f"{name}: {e}")
            return
        with self.lock:
            self.counts.pods_deleted += 1
            gang = self.created.get(name, "")
            members = self.gangs.get(gang)
            if members is not None:
                members.discard(name)
                last = not members
            else:
                last = False
        if gang and last:
            with contextlib.suppress(Exception):
                retrying(
                    lambda: self.cp.api.remove(
                        "kubesched.dev/v1alpha1", "PodGroup", gang, NAMESPACE
                    )
                )

    def _churn_nodes(self) -> None:
        action = self.rng.choice(("add", "delete", "cordon", "uncordon"))
        try:
            if action == "add":
                name = retrying(lambda: self.cp.create_nodes(1, cpu="8", prefix="soak-"))[0]
                with self.lock:
                    self.nodes.append(name)
                    self.counts.nodes_added += 1
            elif action == "delete":
                self._delete_node()
            elif action == "cordon":
                with self.lock:
                    name = self.rng.choice([n for n in self.nodes if n not in self.cordoned])
                    self.cordoned.add(name)
                self._set_unschedulable(name, True)
                self.counts.cordons += 1
            elif self.cordoned:
                with self.lock:
                    name = self.rng.choice(sorted(self.cordoned))
                    self.cordoned.discard(name)
                self._set_unschedulable(name, False)
                self.counts.uncordons += 1
        except Exception as e:
            self._note("node-churn-failed", f"{action}: {e}")

    def _set_unschedulable(self, name: str, value: bool) -> None:
        retrying(
            lambda: self.cp.api.patch(f"/api/v1/nodes/{name}", {"spec": {"unschedulable": value}})
        )

    def _delete_node(self) -> None:
        """Cordon, delete the node, delete the pods bound to it (the pod GC's part)."""
        with self.lock:
            name = self.rng.choice(self.nodes)
            self.nodes.remove(name)
            self.cordoned.discard(name)
        self._set_unschedulable(name, True)
        retrying(lambda: self.cp.api.remove("v1", "Node", name))
        pods = retrying(
            lambda: self.cp.api.get(
                f"/api/v1/namespaces/{NAMESPACE}/pods", fieldSelector=f"spec.nodeName={name}"
            )
        )
        victims = []
        with self.lock:
            for pod in pods["items"]:
                pod_name = pod["metadata"]["name"]
                if pod_name not in self.deleted:
                    self.deleted.add(pod_name)
                    victims.append(pod_name)
        for pod_name in victims:
            self._delete_pod(pod_name)
        self.counts.nodes_deleted += 1

    # -- faults -------------------------------------------------------------------------------
    def _faults(self) -> None:
        """Apiserver restarts and leader kills, one at a time, each on its own period
        (the kills offset by half a period)."""
        o = self.o
        next_restart = self.t0 + o.apiserver_restart_every
        next_kill = self.t0 + o.leader_kill_every / 2
        kill_restart = True
        while not self.halt.wait(0.2):
            now = time.monotonic()
            if now >= next_restart:
                kind = "apiserver-restart-" + ("kill" if kill_restart else "term")
                outage = self.cp.restart_apiserver(o.apiserver_down, kill=kill_restart)
                kill_restart = not kill_restart
                self._fault(kind, f"down {outage:.1f} s")
                next_restart = time.monotonic() + o.apiserver_restart_every
            elif now >= next_kill:
                self._kill_leader()
                next_kill = time.monotonic() + o.leader_kill_every

    def _kill_leader(self) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{NAMESPACE}/leases/{LEASE}"
        try:
            holder = retrying(lambda: self.cp.api.get(path))["spec"].get("holderIdentity")
        except Exception as e:
            self._note("fault-failed", f"leader kill: {e}")
            return
        for slot in self.slots:
            r = slot.replica
            if r is not None and r.identity == holder and r.popen.poll() is None:
                slot.kill()
                self._fault("leader-sigkill", holder)
                return
        self._note("fault-skipped", f"leader kill: holder {holder!r} is not a live replica")

    def _fault(self, kind: str, detail: str) -> None:
        with self.lock:
            self.counts.faults[kind] += 1
        self.fault_log.append({"at": round(time.monotonic() - self.t0, 1), kind: detail})
        print(f"[soak {time.monotonic() - self.t0:6.1f}s] fault {kind}: {detail}", flush=True)

    def _note(self, kind: str, detail: str) -> None:
        self.fault_log.append({"at": round(time.monotonic() - self.t0, 1), kind: detail})

    def _supervise(self) -> None:
        for slot in self.slots:
            slot.sample()
            if slot.check():
                self.restarts += 1
                print(f"[soak] replica exited by itself: {slot.exits[-1]}", flush=True)

    # -- the end ------------------------------------------------------------------------------
    def _leader(self) -> Replica | None:
        for slot in self.slots:
            r = slot.replica
            if r is not None and r.popen.poll() is None and r.get("/readyz/leader") == 200:
                return r
        return None

    def _settle_and_check(self) -> JSON:
        assert self.watch is not None
        deadline = time.monotonic() + self.o.settle_timeout
        leader: Replica | None = None
        mismatches: list[str] = ["not checked"]
        pods: list[JSON] = []
        while time.monotonic() < deadline:
            self._supervise()
            if leader is None or leader.popen.poll() is not None:
                for slot in self.slots:
                    if slot.replica is not None and slot.replica.port is None:
                        with contextlib.suppress(AssertionError):
                            slot.replica.wait_ready(5)
                leader = self._leader()
            if leader is not None and leader.port is not None:
                try:
                    dump = fetch_cache(f"http://127.0.0.1:{leader.port}")
                    pods = self.cp.api.list("v1", "Pod", NAMESPACE)
                    nodes = self.cp.api.list("v1", "Node")
                except Exception as e:
                    mismatches = [f"could not compare: {e}"]
                else:
                    mismatches = cache_mismatches(
                        dump, pods, nodes, SCHEDULER, namespace=NAMESPACE, settled=True
                    )
                    unbound = [p for p in pods if not p["spec"].get("nodeName")]
                    if not mismatches and not unbound:
                        break
            time.sleep(1.0)
        elapsed = time.monotonic() - self.t0
        # The follower's cache too (it does not schedule, but takes over with it).
        for slot in self.slots:
            if slot.replica is not None and slot.replica.port is None:
                with contextlib.suppress(AssertionError):
                    slot.replica.wait_ready(60)
        follower = [
            s.replica
            for s in self.slots
            if s.replica is not None and s.replica is not leader and s.replica.port is not None
        ]
        for r in follower:
            try:
                dump = fetch_cache(f"http://127.0.0.1:{r.port}")
                nodes = self.cp.api.list("v1", "Node")
            except Exception as e:
                mismatches.append(f"{r.identity}: could not compare: {e}")
                continue
            follower_pods = self.cp.api.list("v1", "Pod", NAMESPACE)
            mismatches += [
                f"{r.identity} (follower): {m}"
                for m in cache_mismatches(
                    dump, follower_pods, nodes, SCHEDULER, namespace=NAMESPACE, settled=True
                )
            ]
        return self._summary(pods, mismatches, elapsed)

    def _summary(self, pods: list[JSON], mismatches: list[str], elapsed: float) -> JSON:
        assert self.watch is not None
        w = self.watch
        with w.lock:
            double = {
                w.names[uid]: [node for _, node in seen]
                for uid, seen in w.bindings.items()
                if len(seen) > 1
            }
            scheduled = len(w.bindings)
        existing = {p["metadata"]["name"]: p for p in pods}
        with self.lock:
            missing = sorted(n for n in self.created if n not in self.deleted and n not in existing)
        unbound = sorted(n for n, p in existing.items() if not p["spec"].get("nodeName"))
        lost_in_cache = [m for m in mismatches if "(lost)" in m]
        events = retrying(lambda: self.cp.api.list("events.k8s.io/v1", "Event", NAMESPACE))
        per_pod = collections.Counter(
            (e["regarding"]["name"], e["regarding"].get("uid"))
            for e in events
            if e["reason"] == "Scheduled"
        )
        rss: dict[str, JSON] = {}
        for slot in self.slots:
            for identity, samples in slot.rss.items():
                rss[identity] = {
                    "peak_rss_mib": round(slot.peak.get(identity, 0) / 1024, 1),
                    "first_rss_mib": round(samples[0][1] / 1024, 1),
                    "last_rss_mib": round(samples[-1][1] / 1024, 1),
                    "lived_s": round(samples[-1][0] - samples[0][0], 1),
                }
        # Writes to objects the API server no longer has (a PodGroup deleted behind the
        # store's back, e.g. during an API server restart, keeps getting status patches).
        stale_writes = 0
        for path in self.logs.glob("*.log"):
            for line in path.read_text(errors="replace").splitlines():
                if "status not written" in line and " 404 " in line:
                    stale_writes += 1
        summary: JSON = {
            "options": {k: v for k, v in asdict(self.o).items() if k not in ("logs",)},
            "elapsed_s": round(elapsed, 1),
            "pods_created": self.counts.pods_created,
            "gangs_created": self.counts.gangs_created,
            "pods_scheduled": scheduled,
            "pods_deleted": self.counts.pods_deleted,
            "pods_unbound_at_end": len(unbound),
            "nodes": {
                "initial": self.o.nodes,
                "added": self.counts.nodes_added,
                "deleted": self.counts.nodes_deleted,
                "cordons": self.counts.cordons,
                "uncordons": self.counts.uncordons,
            },
            "faults_injected": dict(self.counts.faults),
            "pods_lost": len(missing) + len(lost_in_cache),
            "double_binds": len(double),
            "duplicate_scheduled_events": sum(1 for n in per_pod.values() if n > 1),
            "restarts": self.restarts,
            "cache_mismatches": mismatches[:20],
            "writes_to_deleted_objects": stale_writes,
            "peak_rss_per_replica": rss,
            "watch_interruptions": len(w.interruptions),
            "watch_relists": w.relists,
            "watch_errors": w.errors[:5],
            "client_retries": self.counts.client_retries,
            "notes": [
                n
                for n in self.fault_log
                if not any(k.startswith(("apiserver", "leader")) for k in n)
            ][:20],
            "faults": [
                n for n in self.fault_log if any(k.startswith(("apiserver", "leader")) for k in n)
            ],
            "exits": [slot_exit for slot in self.slots for slot_exit in slot.exits],
            "double_bound_pods": dict(list(double.items())[:10]),
            "missing_pods": missing[:10],
            "unbound_pods": unbound[:10],
            "logs": str(self.logs),
        }
        summary["ok"] = (
            summary["pods_lost"] == 0
            and summary["double_binds"] == 0
            and summary["restarts"] == 0
            and not mismatches
            and not unbound
            and not w.errors
        )
        return summary


def parse_args(argv: list[str] | None) -> tuple[Options, str]:
    """The options, and where to write the summary ("" for nowhere)."""
    p = argparse.ArgumentParser(prog="python -m tests.soak", description=__doc__.split("\n")[0])
    d = Options()
    p.add_argument("--minutes", type=float, default=d.minutes)
    p.add_argument("--nodes", type=int, default=d.nodes)
    p.add_argument("--pod-rate", type=float, default=d.pod_rate)
    p.add_argument("--pod-lifetime", type=float, default=d.pod_lifetime)
    p.add_argument("--gang-every", type=float, default=d.gang_every)
    p.add_argument("--node-churn-every", type=float, default=d.node_churn_every)
    p.add_argument("--apiserver-restart-every", type=float, default=d.apiserver_restart_every)
    p.add_argument("--leader-kill-every", type=float, default=d.leader_kill_every)
    p.add_argument("--settle-timeout", type=float, default=d.settle_timeout)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--controlplane-dir", default=d.controlplane_dir)
    p.add_argument("--logs", default=d.logs, help="keep the replicas' logs here")
    p.add_argument("--out", default="", help="also write the JSON summary to this file")
    args = p.parse_args(argv)
    out = str(args.__dict__.pop("out"))
    return Options(**vars(args)), out


def main(argv: list[str] | None = None) -> int:
    options, out = parse_args(argv)
    summary = Soak(options).run()
    text = json.dumps(summary, indent=2)
    print(text)
    if out:
        Path(out).write_text(text + "\n")
    return 0 if summary["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
