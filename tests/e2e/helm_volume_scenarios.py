"""The volume scenarios of tests/e2e/test_helm_install.py (the others are in
helm_support), both with WaitForFirstConsumer claims: a static PersistentVolume that
kubesched's VolumeBinding claims for the pod, and a dynamically provisioned claim on
which it writes the node it chose (``volume.kubernetes.io/selected-node``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from tests.e2e.helm_support import (
    Logs,
    Outcome,
    Scenario,
    World,
    about,
    cached,
    read,
    uid,
    wait_either,
)
from tests.e2e.support import call


def _available(pv: Mapping[str, Any]) -> bool:
    return bool((pv.get("status") or {}).get("phase") == "Available")


async def static_volume(w: World, logs: Logs, forbidden: str | None) -> Outcome:
    tag = uid()
    sc, pv, pvc = f"static-{tag}", f"pv-{tag}", f"claim-{tag}"
    cp = w.cp
    cp.api.create(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": sc},
            "provisioner": "kubernetes.io/no-provisioner",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    )
    w.cleanup.append(lambda: cp.api.remove("storage.k8s.io/v1", "StorageClass", sc))
    cp.api.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolume",
            "metadata": {"name": pv},
            "spec": {
                "capacity": {"storage": "1Gi"},
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": sc,
                "hostPath": {"path": f"/tmp/{pv}"},
            },
        }
    )
    w.cleanup.append(lambda: cp.api.remove("v1", "PersistentVolume", pv))
    # what the PV controller (not running here) does to a new volume
    cp.api.patch(f"/api/v1/persistentvolumes/{pv}/status", {"status": {"phase": "Available"}})
    cp.api.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": pvc, "namespace": w.ns},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": sc,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
    )
    # seen before the pod (each kind comes by a watch of its own), the PV as Available
    await cached(w, "StorageClass", sc)
    await cached(w, "PersistentVolume", pv, holds=_available)
    await cached(w, "PersistentVolumeClaim", pvc)
    name = f"static-{tag}"
    await call(w.pod, name, volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": pvc}}])

    def claimed() -> bool:
        ref = ((read(cp, "v1", "PersistentVolume", pv, None) or {}).get("spec") or {}).get(
            "claimRef"
        )
        return bool(ref and ref["name"] == pvc)

    out = await wait_either(
        claimed,
        logs,
        about(pv, forbidden),
        f"{pv} claimed by {pvc}",
        diagnose=lambda: w.read_pod(name),
    )
    if not out.ok:
        assert not await call(w.bound, name)
    return out


async def dynamic_volume(w: World, logs: Logs, forbidden: str | None) -> Outcome:
    tag = uid()
    sc, pvc = f"dynamic-{tag}", f"claim-{tag}"
    cp = w.cp
    cp.api.create(
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "StorageClass",
            "metadata": {"name": sc},
            "provisioner": "e2e.kubesched.dev/fake",
            "volumeBindingMode": "WaitForFirstConsumer",
        }
    )
    w.cleanup.append(lambda: cp.api.remove("storage.k8s.io/v1", "StorageClass", sc))
    cp.api.create(
        {
            "apiVersion": "v1",
            "kind": "PersistentVolumeClaim",
            "metadata": {"name": pvc, "namespace": w.ns},
            "spec": {
                "accessModes": ["ReadWriteOnce"],
                "storageClassName": sc,
                "resources": {"requests": {"storage": "1Gi"}},
            },
        }
    )
    await cached(w, "StorageClass", sc)  # seen before the pod (watches of their own)
    await cached(w, "PersistentVolumeClaim", pvc)
    name = f"dynamic-{tag}"
    await call(w.pod, name, volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": pvc}}])

    def selected() -> bool:
        claim = read(cp, "v1", "PersistentVolumeClaim", pvc, w.ns) or {}
        return "volume.kubernetes.io/selected-node" in (claim["metadata"].get("annotations") or {})

    out = await wait_either(
        selected,
        logs,
        about(pvc, forbidden),
        f"{pvc} given a selected node",
        diagnose=lambda: w.read_pod(name),
    )
    if not out.ok:
        assert not await call(w.bound, name)
    return out


VOLUME_SCENARIOS: dict[str, Scenario] = {
    "static-volume": static_volume,
    "dynamic-volume": dynamic_volume,
}
