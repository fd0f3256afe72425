"""A scenario's objects on a real kube-apiserver, for the differential tests
(:mod:`tests.e2e.differential_support`) and the e2e tests that play a scenario: the
control plane with the CRDs, the objects made ready for the API server (:func:`prepare`:
creation order, priority classes, the one status a scenario may state) and created
(:func:`apply`), everything removed between scenarios (:func:`wipe`), and the
controllers nobody runs here played by :class:`Controllers` (kubelet's deletions, the PV
controller, a CSI provisioner)."""

from __future__ import annotations

import contextlib
import copy
import pathlib
import threading
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import yaml

from kubesched.cluster.kinds import KINDS
from tests.controlplane import ApiError, Binaries, ControlPlane, RestClient, wait_for
from tests.e2e.support import CRDS

JSON = dict[str, Any]

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
