"""The cluster side of the differential tests (test_differential.py,
test_gang_differential.py): a scenario applied to a real kube-apiserver, the controllers
nobody runs played by :class:`Controllers`, ``kubesched run`` in a thread of its own,
and each pod's outcome read back (see test_differential.py's docstring)."""

from __future__ import annotations

import asyncio
import contextlib
import copy
import gc
import pathlib
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml

from kubesched.cluster.kinds import KINDS
from kubesched.operator.run import run
from kubesched.operator.settings import Settings
from tests.controlplane import ApiError, Binaries, ControlPlane, RestClient, wait_for
from tests.e2e.support import CRDS

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
#: The pod condition of an in-place resize the kubelet has not done (or cannot do).
RESIZE = "PodResizePending"

ANN_BIND_COMPLETED = "pv.kubernetes.io/bind-completed"
ANN_BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
ANN_SELECTED_NODE = "volume.kubernetes.io/selected-node"

#: Namespaced kinds wiped between scenarios, with their API versions.
NAMESPACED = (
    ("v1", "Pod"),
    ("v1", "LimitRange"),
    ("v1", "PersistentVolumeClaim"),
    ("storage.k8s.io/v1", "CSIStorageCapacity"),
    ("v1", "Service"),
    ("v1", "ReplicationController"),
    ("apps/v1", "ReplicaSet"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("policy/v1", "PodDisruptionBudget"),
    ("kubesched.dev/v1alpha1", "PodGroup"),
    ("scheduling.x-k8s.io/v1alpha1", "PodGroup"),
    ("resource.k8s.io/v1", "ResourceClaim"),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"),
)
#: What is wiped between scenarios besides the namespaced kinds above: every cluster-scoped
#: kind kubesched reads (cluster/kinds.py), but the namespaces and our own profiles, and
#: RuntimeClasses (which only the API server's admission reads).
CLUSTER_SCOPED = (
    *(
        (k.group_version, k.kind)
        for k in KINDS
        if k.cluster_scoped and k.kind not in ("Namespace", "SchedulingProfile")
    ),
    ("node.k8s.io/v1", "RuntimeClass"),
)
#: Creation order: what others refer to first.
ORDER = (
    "Namespace",
    "PriorityClass",
    "RuntimeClass",
    "LimitRange",
    "StorageClass",
    "CSIDriver",
    "DeviceClass",
    "Node",
    "CSINode",
    "CSIStorageCapacity",
    "ResourceSlice",
    "DeviceTaintRule",
    "PersistentVolumeClaim",
    "PersistentVolume",
    "PodDisruptionBudget",
    "Service",
    "ReplicationController",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
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
    """A thread playing kubelet (finish deletions), PV controller (complete bindings) and
    an external provisioner (a PV for each claim VolumeBinding selected a node for)."""

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
        for pvc in self.api.list("v1", "PersistentVolumeClaim"):
            self._provision(pvc)
        for pv in self.api.list("v1", "PersistentVolume"):
            ref = pv["spec"].get("claimRef")
            if ref:
                self._complete_binding(pv, ref)

    def _provision(self, pvc: JSON) -> None:
        """A CSI provisioner's answer to ``volume.kubernetes.io/selected-node``: a PV of
        the claim's size and class, bound to it (kube-scheduler's PreBind waits for it;
        capacity objects are the driver's to update, and none here does)."""
        meta, spec = pvc["metadata"], pvc["spec"]
        if spec.get("volumeName") or ANN_SELECTED_NODE not in (meta.get("annotations") or {}):
            return
        sc = self.api.read("storage.k8s.io/v1", "StorageClass", spec["storageClassName"])
        if sc.get("provisioner") in (None, "", "kubernetes.io/no-provisioner"):
            return
        name = f"pvc-{meta['uid']}"
        self.api.create(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {
                    "name": name,
                    "annotations": {"pv.kubernetes.io/provisioned-by": sc["provisioner"]},
                },
                "spec": {
                    "capacity": {"storage": spec["resources"]["requests"]["storage"]},
                    "accessModes": spec["accessModes"],
                    "storageClassName": spec["storageClassName"],
                    "persistentVolumeReclaimPolicy": "Delete",
                    "csi": {"driver": sc["provisioner"], "volumeHandle": name},
                    "claimRef": {
                        "kind": "PersistentVolumeClaim",
                        "apiVersion": "v1",
                        "namespace": meta["namespace"],
                        "name": meta["name"],
                        "uid": meta["uid"],
                    },
                },
            }
        )

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
            if status.get("containerStatuses"):
                # ... and what a kubelet reports of an in-place resize: the resources
                # allocated and in use, and whether the resize is pending
                o.setdefault("status", {})["containerStatuses"] = status["containerStatuses"]
                resize = [c for c in status.get("conditions") or () if c["type"] == RESIZE]
                if resize:
                    o["status"]["conditions"] = resize
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


PENDING = ("Unschedulable", "SchedulerError", "Waiting")
"""The outcomes of a pod left unbound (:func:`outcome`)."""


def outcome(pod: JSON) -> tuple[str, str]:
    """(node | Unschedulable | SchedulerError | Waiting, the PodScheduled message):
    ``PodScheduled=False`` with reason Unschedulable or SchedulerError (tried, failed
    with an error), Waiting for any other (or none)."""
    node = pod["spec"].get("nodeName")
    for c in pod.get("status", {}).get("conditions") or ():
        if c["type"] == "PodScheduled" and c["status"] == "False":
            if node:
                break
            if c.get("reason") in ("Unschedulable", "SchedulerError"):
                return str(c["reason"]), str(c.get("message") or "")
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
    if met and any(v and v <= set(PENDING) for v in expected.values()):
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
    #: pods left unbound -> their status.nominatedNodeName ("" for none)
    nominated: dict[str, str] = field(default_factory=dict)

    def summary(self) -> str:
        """Every pod's outcome (and nomination), then the victims: for a failure report."""
        text = "; ".join(
            f"{k}={where}" + (f" nominated {self.nominated[k]!r}" if self.nominated.get(k) else "")
            for k, (where, _) in sorted(self.outcomes.items())
        )
        return text + (f"; victims {sorted(self.victims)}" if self.victims else "")


def bound_pods(api: RestClient) -> set[str]:
    """Bound pods not already terminating (a scenario's terminating pod is no victim)."""
    return {
        key_of(p)
        for p in api.list("v1", "Pod")
        if p["spec"].get("nodeName") and not p["metadata"].get("deletionTimestamp")
    }


def nominations(api: RestClient, keys: list[str]) -> dict[str, str]:
    """Each pod's status.nominatedNodeName ("" for none or a pod gone)."""
    got: dict[str, str] = {}
    for key in keys:
        ns, name = key.split("/")
        try:
            pod = api.read("v1", "Pod", name, ns)
        except ApiError as err:
            if err.status != 404:
                raise
            pod = {}
        got[key] = str((pod.get("status") or {}).get("nominatedNodeName") or "")
    return got


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
        # What the run left unclosed is collected here, so that its ResourceWarnings (warnings
        # are errors) fail this test rather than a later one.
        self._thread.join(30)
        gc.collect()
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
    result.nominated = nominations(api, [k for k, v in result.outcomes.items() if v[0] in PENDING])
    result.victims = gone(api, running)
    result.seconds = time.monotonic() - start
    return result


@contextlib.contextmanager
def scenario_control_plane(
    binaries: Binaries,
    *,
    controllers: Sequence[str] = (),
    feature_gates: Mapping[str, bool] | None = None,
    runtime_config: Mapping[str, bool] | None = None,
) -> Iterator[ControlPlane]:
    """A control plane of a test module's own (node counts appear in the messages
    compared) with kubesched's and scheduler-plugins' CRDs and :class:`Controllers`, whose
    errors fail the module at its end; ``controllers``: kube-controller-manager's to run
    too (the resourceclaim controller makes the claims of ResourceClaimTemplates)."""
    with (
        ControlPlane(binaries, feature_gates=feature_gates, runtime_config=runtime_config) as cp,
        Controllers(cp.api) as ctl,
    ):
        install_crds(cp.api)
        if controllers:
            cp.start_controller_manager(list(controllers))
        yield cp
        assert not ctl.errors, ctl.errors


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
