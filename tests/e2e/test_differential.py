"""Differential test: the scenario corpus on the real kube-apiserver, scheduled once by the
real kube-scheduler and once by ``kubesched run``.

Each file under tests/scenarios/ starts with ``# expect: ns/name=NODE|NODE2 ...`` saying
what kube-scheduler does with it. For every scenario, on one control plane of this
module's own (so no other test's nodes count):

1. wipe nodes, pods and the other scenario objects;
2. apply the scenario (``load_scenarios`` defaults it; pods get the scheduler's name);
3. start the scheduler only then, so every pod is queued before the first cycle, as in
   the simulator; wait until each pod reached its expected outcome (or a timeout);
4. read the outcome: the node, ``Unschedulable`` (``PodScheduled=False``, reason
   Unschedulable) or ``Waiting`` (pending without that condition, e.g. gated).

kube-scheduler's outcome must satisfy the ``# expect:`` line (this validates the corpus);
kubesched's too; where the expectation names one node both put the pod there, and the
same pods stay unscheduled in both, with the same message.

Of the controllers only kube-controller-manager's resourceclaim controller runs (it makes
the claims of pods using ResourceClaimTemplates, as in a real cluster; the DRA scenarios
publish their ResourceSlices as a driver would); this module plays the other controllers'
part (:class:`Controllers`): pods being
deleted (preemption victims; no kubelet finishes them) are force-deleted, a PV's
``claimRef`` written by VolumeBinding is completed into a bound claim (the PV
controller's ``pv.kubernetes.io/bind-completed``, volumeName and phases), and statuses a
scenario states (PDB ``disruptionsAllowed``, PV/PVC phases, node images, a pod's
``startTime``, a finished pod's phase, a nominated node) are written through the status
subresource. A pod the scenario states as terminating (``metadata.deletionTimestamp``,
which the API server drops on create) is created with a finalizer of this module's and
deleted. The API server's Priority admission refuses a ``spec.priority`` without a
class, so such pods get a PriorityClass of that value.

Gang scenarios (PodGroup) run with kubesched only (kube-scheduler has no Coscheduling):
its outcome must satisfy the expectations. kubesched's CRDs are installed.

The simulator predicts the cluster (:func:`test_simulate_predicts_kubesched_run`): every
scenario, gangs included, also goes through ``kubesched simulate`` in-process, fed the
objects exactly as they were created on the cluster; each pod's outcome (node,
Unschedulable or Waiting) and message must equal ``kubesched run``'s on the real API
server. Both draw their tie-breaks from the same seed (:data:`SEED`), so even a choice
among equal scores must agree.
"""

from __future__ import annotations

import asyncio
import copy
import gc
import multiprocessing
import pathlib
import threading
import time
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from typing import Any

import pytest
import yaml

from kubesched.operator.run import run
from kubesched.operator.settings import Settings
from kubesched.simulator.engine import simulate
from kubesched.simulator.scenario import Document, load_scenarios
from kubesched.simulator.scenario import prepare as default_documents
from tests.controlplane import ApiError, Binaries, ControlPlane, RestClient, wait_for

pytestmark = pytest.mark.timeout(120)

JSON = dict[str, Any]

CORPUS = pathlib.Path(__file__).resolve().parent.parent / "scenarios"
FILES = sorted(CORPUS.rglob("*.yaml"))

#: Families neither scheduler runs on the real control plane (see the module docstring).
KUBESCHED_ONLY = {
    "gang": "PodGroups: kube-scheduler has no Coscheduling; kubesched alone is checked "
    "against the expectations"
}

KUBESCHED = "kubesched"
KUBE_SCHEDULER = "default-scheduler"

#: How long a scenario may take to reach its expected outcome (preemption needs a
#: backoff round: about 1-2 s).
SETTLE_TIMEOUT = 20.0
#: After the expectations are met, how long pods expected to stay pending are watched.
QUIET = 1.0

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"

#: Namespaced kinds wiped between scenarios, with their API versions.
NAMESPACED = (
    ("v1", "Pod"),
    ("v1", "PersistentVolumeClaim"),
    ("v1", "Service"),
    ("v1", "ReplicationController"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "StatefulSet"),
    ("policy/v1", "PodDisruptionBudget"),
    ("kubesched.dev/v1alpha1", "PodGroup"),
    ("scheduling.x-k8s.io/v1alpha1", "PodGroup"),
    ("resource.k8s.io/v1", "ResourceClaim"),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"),
)
CLUSTER_SCOPED = (
    ("v1", "Node"),
    ("v1", "PersistentVolume"),
    ("storage.k8s.io/v1", "StorageClass"),
    ("storage.k8s.io/v1", "CSINode"),
    ("storage.k8s.io/v1", "CSIDriver"),
    ("scheduling.k8s.io/v1", "PriorityClass"),
    ("resource.k8s.io/v1", "ResourceSlice"),
    ("resource.k8s.io/v1", "DeviceClass"),
    ("resource.k8s.io/v1", "DeviceTaintRule"),
)
#: Creation order: what others refer to first.
ORDER = (
    "Namespace",
    "PriorityClass",
    "StorageClass",
    "CSIDriver",
    "DeviceClass",
    "Node",
    "CSINode",
    "ResourceSlice",
    "DeviceTaintRule",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "PodDisruptionBudget",
    "Service",
    "ReplicationController",
    "ReplicaSet",
    "StatefulSet",
    "Workload",
    "PodGroup",
    "ResourceClaimTemplate",
    "ResourceClaim",
    "Pod",
)


def expectations(path: pathlib.Path) -> dict[str, set[str]]:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect:"), f"{path} must start with an '# expect:' line"
    out: dict[str, set[str]] = {}
    for item in first.removeprefix("# expect:").split():
        key, _, value = item.partition("=")
        out[key] = set(value.split("|"))
    return out


def expected_victims(path: pathlib.Path) -> set[str] | None:
    """The ``# victims: ns/a ns/b`` (or ``# victims: none``) line among the file's leading
    comments: exactly the pods kube-scheduler evicts; None where the file has no such line."""
    for line in path.read_text().splitlines():
        if not line.startswith("#"):
            break
        if line.startswith("# victims:"):
            names = line.removeprefix("# victims:").split()
            return set() if names == ["none"] else set(names)
    return None


#: Pod phases written through the status subresource (a kubelet would): see prepare.
FINISHED = ("Succeeded", "Failed")
#: Holds a scenario's terminating pod (``metadata.deletionTimestamp``) in that state: the
#: API server drops the field on create, so the pod is created with this finalizer and
#: deleted (see :func:`terminate`); :func:`wipe` releases it.
TERMINATING = "kubesched.dev/e2e-terminating"


def key_of(obj: Mapping[str, Any]) -> str:
    meta = obj["metadata"]
    return f"{meta.get('namespace') or 'default'}/{meta['name']}"


# -- the controllers nobody runs ----------------------------------------------------------------


class Controllers:
    """A thread playing kubelet (finish deletions), PV controller (complete bindings)."""

    def __init__(self, api: RestClient, interval: float = 0.1) -> None:
        self.api = api
        self.interval = interval
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="controllers", daemon=True)
        self.errors: list[str] = []

    def __enter__(self) -> Controllers:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.step()
            except ApiError as err:
                if err.status not in (404, 409):
                    self.errors.append(str(err))

    def step(self) -> None:
        for pod in self.api.list("v1", "Pod"):
            meta = pod["metadata"]
            if meta.get("deletionTimestamp") and TERMINATING not in (meta.get("finalizers") or ()):
                # the kubelet would stop the containers and remove the pod
                self.api.remove(
                    "v1", "Pod", meta["name"], meta["namespace"], grace_period_seconds=0
                )
        for pv in self.api.list("v1", "PersistentVolume"):
            ref = pv["spec"].get("claimRef")
            if ref:
                self._complete_binding(pv, ref)

    def _complete_binding(self, pv: JSON, ref: Mapping[str, Any]) -> None:
        """The PV controller's syncVolume/syncClaim for a claimRef VolumeBinding wrote."""
        ns, name = ref.get("namespace") or "default", ref["name"]
        pv_name = pv["metadata"]["name"]
        try:
            pvc = self.api.read("v1", "PersistentVolumeClaim", name, ns)
        except ApiError as err:
            if err.status == 404:
                return
            raise
        annotations = pvc["metadata"].get("annotations") or {}
        if pvc["spec"].get("volumeName") != pv_name or ANN_BIND_COMPLETED not in annotations:
            if pvc["spec"].get("volumeName") not in (None, "", pv_name):
                return  # bound elsewhere: not ours to fix
            pvc["metadata"].setdefault("annotations", {}).update(
                {ANN_BIND_COMPLETED: "yes", ANN_BOUND_BY_CONTROLLER: "yes"}
            )
            pvc["spec"]["volumeName"] = pv_name
            pvc = self.api.put(self.api.path("v1", "PersistentVolumeClaim", name, ns), pvc)
        if (pvc.get("status") or {}).get("phase") != "Bound":
            self.api.patch(
                self.api.path("v1", "PersistentVolumeClaim", name, ns, "status"),
                {
                    "status": {
                        "phase": "Bound",
                        "accessModes": pvc["spec"].get("accessModes"),
                        "capacity": pv["spec"].get("capacity"),
                    }
                },
            )
        if (pv.get("status") or {}).get("phase") != "Bound":
            self.api.patch(
                self.api.path("v1", "PersistentVolume", pv_name, subresource="status"),
                {"status": {"phase": "Bound"}},
            )


# -- scenarios on the cluster -------------------------------------------------------------------


def hold_terminating(pod: JSON) -> None:
    """A pod the scenario states as terminating is created with :data:`TERMINATING`."""
    meta = pod["metadata"]
    if meta.pop("deletionTimestamp", None):
        meta.pop("deletionGracePeriodSeconds", None)
        meta["finalizers"] = [*(meta.get("finalizers") or ()), TERMINATING]


def terminate(api: RestClient, created: JSON) -> None:
    """Delete a pod created with :data:`TERMINATING`: it stays, terminating."""
    meta = created["metadata"]
    if created["kind"] == "Pod" and TERMINATING in (meta.get("finalizers") or ()):
        api.remove("v1", "Pod", meta["name"], meta["namespace"])


def release_terminating(api: RestClient) -> None:
    for pod in api.list("v1", "Pod"):
        meta = pod["metadata"]
        if TERMINATING in (meta.get("finalizers") or ()):
            rest = [f for f in meta["finalizers"] if f != TERMINATING]
            api.patch(
                api.path("v1", "Pod", meta["name"], meta["namespace"]),
                {"metadata": {"finalizers": rest or None}},
            )


def wipe(api: RestClient) -> None:
    """Remove every object a scenario may have created (namespaces stay: without the
    namespace controller a deleted namespace would stay Terminating)."""
    release_terminating(api)
    for version, kind in NAMESPACED:
        for obj in api.list(version, kind):
            meta = obj["metadata"]
            if meta.get("finalizers") and kind in ("ResourceClaim", "PodGroup"):
                # an allocated claim's delete-protection (its pod is gone already); the
                # finalizer kubesched puts on PodGroups (the run that set it has ended)
                path = api.path(version, kind, meta["name"], meta["namespace"])
                api.patch(path, {"metadata": {"finalizers": None}})
            api.remove(version, kind, meta["name"], meta["namespace"], grace_period_seconds=0)
    for version, kind in CLUSTER_SCOPED:
        for obj in api.list(version, kind):
            name = obj["metadata"]["name"]
            if kind == "PriorityClass" and name.startswith("system-"):
                continue
            api.remove(version, kind, name)


def _strip(obj: JSON) -> JSON:
    out = copy.deepcopy(obj)
    meta = out["metadata"]
    for f in ("uid", "resourceVersion", "creationTimestamp", "generation"):
        meta.pop(f, None)
    return out


def prepare(objects: list[JSON], scheduler_name: str) -> tuple[list[JSON], list[str]]:
    """Cluster-ready copies of the loaded objects (in creation order) and the keys of the
    pods to be scheduled, in document order."""
    classes = {o["metadata"]["name"]: o for o in objects if o["kind"] == "PriorityClass"}
    global_default = next((c for c in classes.values() if c.get("globalDefault")), None)
    extra: dict[str, JSON] = {}
    out: list[JSON] = []
    pending: list[str] = []
    for obj in objects:
        o = _strip(obj)
        if o["kind"] == "Pod":
            hold_terminating(o)
            spec = o["spec"]
            priority = spec.pop("priority", 0)
            policy = spec.pop("preemptionPolicy", "PreemptLowerPriority")
            status = o.pop("status", None) or {}
            if status.get("startTime"):
                # The one pod status a scenario states: preemption compares start times.
                o["status"] = {"startTime": status["startTime"]}
            if status.get("phase") in FINISHED:
                # ... and a finished pod's phase: schedulers do not see such pods at all.
                o.setdefault("status", {})["phase"] = status["phase"]
            if status.get("nominatedNodeName"):
                # ... and a nomination (a preemption's, earlier): tried first.
                o.setdefault("status", {})["nominatedNodeName"] = status["nominatedNodeName"]
            if (
                not spec.get("priorityClassName")
                and not (global_default is not None and priority == global_default["value"])
                and (priority or policy != "PreemptLowerPriority")
            ):
                # Priority admission refuses spec.priority without a class: give it one
                name = f"diff-p{priority}" + ("-never" if policy == "Never" else "")
                extra[name] = {
                    "apiVersion": "scheduling.k8s.io/v1",
                    "kind": "PriorityClass",
                    "metadata": {"name": name},
                    "value": priority,
                    "preemptionPolicy": policy,
                }
                spec["priorityClassName"] = name
            if not spec.get("nodeName"):
                spec["schedulerName"] = scheduler_name
                pending.append(key_of(o))
        out.append(o)
    out.extend(extra.values())
    namespaces = {o["metadata"].get("namespace") for o in out if o["metadata"].get("namespace")} - {
        o["metadata"]["name"] for o in out if o["kind"] == "Namespace"
    }
    out.extend(
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}}
        for ns in sorted(namespaces)
    )
    rank = {kind: i for i, kind in enumerate(ORDER)}
    out.sort(key=lambda o: rank.get(o["kind"], len(ORDER)))  # stable: document order kept
    return out, pending


def apply(api: RestClient, objects: list[JSON]) -> None:
    uids: dict[str, str] = {}
    for obj in objects:
        body = copy.deepcopy(obj)
        kind = body["kind"]
        status = body.get("status")
        if kind == "PersistentVolume":
            ref = body["spec"].get("claimRef")
            if ref and ref.get("uid"):
                ref["uid"] = uids.get(f"{ref.get('namespace') or 'default'}/{ref['name']}", "")
        try:
            created = api.create(body)
        except ApiError as err:
            if kind == "Namespace" and err.status == 409:
                continue
            raise
        if kind == "PersistentVolumeClaim":
            uids[key_of(created)] = created["metadata"]["uid"]
        if status and kind in (
            "Pod",
            "Node",
            "PersistentVolume",
            "PersistentVolumeClaim",
            "PodDisruptionBudget",
            "ResourceClaim",
        ):
            if kind == "PodDisruptionBudget":
                status = {
                    "observedGeneration": created["metadata"].get("generation", 1),
                    "disruptedPods": {},
                    **status,
                }
            meta = created["metadata"]
            api.patch(
                api.path(
                    created["apiVersion"], kind, meta["name"], meta.get("namespace"), "status"
                ),
                {"status": status},
            )
        terminate(api, created)


def outcome(pod: JSON) -> tuple[str, str]:
    """(node | Unschedulable | Waiting, the PodScheduled message)."""
    node = pod["spec"].get("nodeName")
    for c in pod.get("status", {}).get("conditions") or ():
        if c["type"] == "PodScheduled" and c["status"] == "False":
            if node:
                break
            if c.get("reason") == "Unschedulable":
                return "Unschedulable", str(c.get("message") or "")
            return "Waiting", str(c.get("message") or "")
    return (node, "") if node else ("Waiting", "")


def observe(api: RestClient, keys: list[str]) -> dict[str, tuple[str, str]]:
    got: dict[str, tuple[str, str]] = {}
    for key in keys:
        ns, name = key.split("/")
        try:
            got[key] = outcome(api.read("v1", "Pod", name, ns))
        except ApiError as err:
            if err.status != 404:
                raise
            got[key] = ("Deleted", "")
    return got


def settle(
    api: RestClient, keys: list[str], expected: Mapping[str, set[str]]
) -> dict[str, tuple[str, str]]:
    """Wait until every pod matches its expectation (or SETTLE_TIMEOUT); the outcome."""
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while True:
        got = observe(api, keys)
        met = all(got[k][0] in expected.get(k, {got[k][0]}) for k in keys)
        if met or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    if met and any(v == {"Waiting"} or v == {"Unschedulable"} for v in expected.values()):
        time.sleep(QUIET)  # a pod expected to stay pending must not be bound meanwhile
        got = observe(api, keys)
    return got


@dataclass
class Run:
    scheduler: str
    outcomes: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: pods that were bound when the scheduler started and are gone (or going) at the end:
    #: preemption's victims (nothing else deletes pods here)
    victims: set[str] = field(default_factory=set)
    seconds: float = 0.0


def bound_pods(api: RestClient) -> set[str]:
    """Bound pods not already terminating (a scenario's terminating pod is no victim)."""
    return {
        key_of(p)
        for p in api.list("v1", "Pod")
        if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    }


def gone(api: RestClient, keys: set[str]) -> set[str]:
    """The pods of ``keys`` that no longer exist or are being deleted."""
    present = {
        key_of(p): p for p in api.list("v1", "Pod") if not p["metadata"].get("deletionTimestamp")
    }
    return {k for k in keys if k not in present}


class KubeschedThread:
    """``kubesched run`` (its ``run`` coroutine) in a thread with its own event loop."""

    def __init__(self, kubeconfig: str, seed: int | None = None) -> None:
        self.settings = Settings(
            kubeconfig=kubeconfig,
            seed=seed,
            scheduler_names=[KUBESCHED],
            leader_elect=False,
            bind_address="127.0.0.1",
            port=0,
            client_qps=0,
            resync_seconds=0,
        )
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="kubesched", daemon=True)

    def _main(self) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            ready = asyncio.Event()
            task = asyncio.create_task(run(settings=self.settings, stop=self._stop, ready=ready))
            await ready.wait()
            self._ready.set()
            await task

        try:
            asyncio.run(main())
        except BaseException as err:
            self._error = err
        finally:
            self._ready.set()

    def __enter__(self) -> KubeschedThread:
        self._thread.start()
        assert self._ready.wait(60), "kubesched run not ready within 60 s"
        if self._error is not None:
            raise self._error
        return self

    def __exit__(self, *exc: object) -> None:
        if self._loop is not None and self._stop is not None and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(30)
        gc.collect()  # anything the run left unclosed is reported here, not in a later test
        if self._error is not None:
            raise self._error


def run_scenario(
    cp: ControlPlane,
    objects: list[JSON],
    expected: Mapping[str, set[str]],
    scheduler: str,
    seed: int | None = None,
) -> Run:
    api = cp.api
    wipe(api)
    prepared, pending = prepare(objects, scheduler)
    apply(api, prepared)
    result = Run(scheduler)
    running = bound_pods(api)
    start = time.monotonic()
    if scheduler == KUBE_SCHEDULER:
        sched = cp.start_kube_scheduler()
        try:
            result.outcomes = settle(api, pending, expected)
        finally:
            sched.stop()
            cp.schedulers.remove(sched)
    else:
        with KubeschedThread(str(cp.kubeconfig), seed=seed):
            result.outcomes = settle(api, pending, expected)
    result.victims = gone(api, running)
    result.seconds = time.monotonic() - start
    return result


# -- the tests ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def diff_cluster(controlplane_binaries: Binaries) -> Iterator[ControlPlane]:
    """A control plane of this module's own: node counts appear in failure messages. The
    real resourceclaim controller makes the claims of pods using ResourceClaimTemplates."""
    with ControlPlane(controlplane_binaries) as cp, Controllers(cp.api) as ctl:
        install_crds(cp.api)
        cp.start_controller_manager(["resourceclaim-controller"])
        yield cp
        assert not ctl.errors, ctl.errors


CRDS = pathlib.Path(__file__).resolve().parents[2] / "crds"


#: scheduler-plugins' PodGroup CRD (the gang scenarios use its objects too)
TEST_CRDS = pathlib.Path(__file__).resolve().parents[1] / "crds"


def install_crds(api: RestClient) -> None:
    """kubesched's CRDs (``kubesched run`` watches SchedulingProfiles and PodGroups) and
    scheduler-plugins' PodGroup CRD."""
    for path in [*sorted(CRDS.glob("*.yaml")), *sorted(TEST_CRDS.glob("*.yaml"))]:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                api.create(doc)
    for group_version, kind in (
        ("kubesched.dev/v1alpha1", "SchedulingProfile"),
        ("kubesched.dev/v1alpha1", "PodGroup"),
        ("scheduling.x-k8s.io/v1alpha1", "PodGroup"),
    ):

        def served(gv: str = group_version, k: str = kind) -> bool:
            try:
                api.list(gv, k)  # 429 "storage is (re)initializing" for a moment
            except (ApiError, KeyError):
                return False
            return True

        wait_for(served, timeout=30, what=f"the {kind} CRD")


#: The API of Kubernetes' own gangs (Workload, PodGroup), served only with the
#: GenericWorkload gate: scenarios using it run in test_gang_differential, on a control
#: plane with the gates on, against kube-scheduler's own gang scheduling.
UPSTREAM_GANGS = "scheduling.k8s.io/v1beta1"


def uses_upstream_gangs(path: pathlib.Path) -> bool:
    """Whether a scenario file holds Workload or PodGroup objects of the upstream API."""
    return any(
        doc and doc.get("apiVersion") == UPSTREAM_GANGS and doc.get("kind") != "PriorityClass"
        for doc in yaml.safe_load_all(path.read_text())
    )


def _ids() -> list[Any]:
    params = []
    for path in FILES:
        if uses_upstream_gangs(path):
            continue
        params.append(pytest.param(path, id=str(path.relative_to(CORPUS))))
    return params


def _fmt(run: Run) -> str:
    text = "; ".join(
        f"{k}={v[0]}" + (f" ({v[1]})" if v[1] else "") for k, v in run.outcomes.items()
    )
    return text + (f"; victims {sorted(run.victims)}" if run.victims else "")


@pytest.mark.parametrize("path", _ids())
def test_kube_scheduler_and_kubesched_agree(diff_cluster: ControlPlane, path: pathlib.Path) -> None:
    expected = expectations(path)
    objects = load_scenarios([str(path)])
    if path.parent.name in KUBESCHED_ONLY:
        ours = run_scenario(diff_cluster, objects, expected, KUBESCHED)
        for key, allowed in expected.items():
            where = ours.outcomes[key][0]
            assert where in allowed, (
                f"kubesched put {key} on {where}, expected {sorted(allowed)}: {_fmt(ours)}"
            )
        return
    theirs = run_scenario(diff_cluster, objects, expected, KUBE_SCHEDULER)
    ours = run_scenario(diff_cluster, objects, expected, KUBESCHED)
    report = (
        f"\nkube-scheduler ({theirs.seconds:.1f} s): {_fmt(theirs)}"
        f"\nkubesched      ({ours.seconds:.1f} s): {_fmt(ours)}"
    )
    for key, allowed in expected.items():
        assert key in theirs.outcomes, f"{key} is not a pod the scenario schedules"
        assert theirs.outcomes[key][0] in allowed, (
            f"the corpus is wrong: kube-scheduler put {key} on {theirs.outcomes[key][0]}, "
            f"expected {sorted(allowed)}{report}"
        )
        assert ours.outcomes[key][0] in allowed, (
            f"kubesched put {key} on {ours.outcomes[key][0]}, expected {sorted(allowed)}{report}"
        )
    for key, (where, message) in theirs.outcomes.items():
        mine, my_message = ours.outcomes[key]
        if len(expected.get(key, ())) == 1 or where in ("Unschedulable", "Waiting"):
            assert mine == where, f"{key}: kube-scheduler {where}, kubesched {mine}{report}"
        if where == "Unschedulable":
            # the whole FailedScheduling message, byte for byte (the FitError summary,
            # DynamicResources' PostFilter ". not found" and preemption's verdict)
            assert my_message == message, f"{key}: messages differ{report}"
    victims = expected_victims(path)
    if victims is not None:
        assert theirs.victims == victims, (
            f"the corpus is wrong: kube-scheduler evicted {sorted(theirs.victims)}, "
            f"expected {sorted(victims)}{report}"
        )
    assert ours.victims == theirs.victims, (
        f"victims differ: kube-scheduler {sorted(theirs.victims)}, "
        f"kubesched {sorted(ours.victims)}{report}"
    )


# -- the simulator against kubesched run ----------------------------------------------------------

#: The tie-breaking seed of both ``kubesched simulate`` and ``kubesched run`` below.
SEED = 7


def as_terminated(obj: JSON) -> JSON:
    """A copy of a created object as it is after :func:`apply`: held pods terminating."""
    out = copy.deepcopy(obj)
    meta = out["metadata"]
    if out["kind"] == "Pod" and TERMINATING in (meta.get("finalizers") or ()):
        meta["deletionTimestamp"] = "2025-01-01T00:00:00Z"
    return out


#: A simulation that takes longer is stopped and fails its test (it runs in a process of
#: its own: a simulator that never settles must not hang the module).
SIMULATE_TIMEOUT = 60.0

Outcomes = dict[str, tuple[str, str]]


def _simulate_created(created: list[JSON]) -> Outcomes:
    docs = [Document("cluster", i, as_terminated(o)) for i, o in enumerate(created)]
    result = simulate(default_documents(docs), seed=SEED)
    return {f"{p.namespace}/{p.name}": (p.node or p.status, p.message) for p in result.pods}


def _simulate_to(created: list[JSON], conn: Connection) -> None:
    try:
        conn.send(_simulate_created(created))
    except BaseException:
        conn.send(traceback.format_exc())


def simulated(created: list[JSON]) -> Outcomes:
    """``kubesched simulate --seed SEED`` on the objects as they were created on the
    cluster (in that order; defaulted by the scenario loader as a file would be): each
    pod to schedule -> (node | Unschedulable | Waiting, message)."""
    ctx = multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_simulate_to, args=(created, send), daemon=True)
    proc.start()
    send.close()
    try:
        if not receive.poll(SIMULATE_TIMEOUT):
            pytest.fail(f"kubesched simulate did not finish within {SIMULATE_TIMEOUT:.0f} s")
        got: Outcomes | str = receive.recv()
    finally:
        receive.close()
        proc.kill()
        proc.join()
    if isinstance(got, str):
        pytest.fail(f"kubesched simulate failed:\n{got}")
    return got


@pytest.mark.parametrize("path", _ids())
def test_simulate_predicts_kubesched_run(diff_cluster: ControlPlane, path: pathlib.Path) -> None:
    expected = expectations(path)
    objects = load_scenarios([str(path)])
    created, pending = prepare(objects, KUBESCHED)
    predicted = simulated(created)
    ours = run_scenario(diff_cluster, objects, expected, KUBESCHED, seed=SEED)
    report = (
        "\nkubesched simulate: "
        + "; ".join(f"{k}={v[0]}" + (f" ({v[1]})" if v[1] else "") for k, v in predicted.items())
        + f"\nkubesched run:      {_fmt(ours)}"
    )
    assert sorted(predicted) == sorted(pending), f"the pods to schedule differ{report}"
    for key in pending:
        (where, message), (ran, ran_message) = predicted[key], ours.outcomes[key]
        assert where == ran, f"{key}: simulate {where}, run {ran}{report}"
        if where != "Waiting":
            # A waiting pod's message in the simulator is the queue's reason (the gates,
            # the gang's missing members); a cluster shows at most part of it (the API
            # server's SchedulingGated condition, an Event): only its status is compared.
            assert message == ran_message, f"{key}: the messages differ{report}"
