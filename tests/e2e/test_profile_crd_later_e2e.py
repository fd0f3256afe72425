"""The SchedulingProfile CRD installed while ``kubesched run`` runs, on a real
kube-apiserver: once the API server serves it, kubesched starts Kopf again (Kopf resolves
the kinds it watches only as it starts), and a profile applied then serves its
schedulerName, with its status and finalizer, without a restart. Scheduling goes on
across Kopf's restart: with ``watch_engine: kopf`` too, where Kopf watches the pods.

A control plane of the test's own: the shared one has the CRDs installed.
"""

from __future__ import annotations

import json
import logging
import uuid
from typing import Any

import pytest
import yaml

from kubesched.operator import profile_handlers
from tests.controlplane import ControlPlane
from tests.e2e.support import call, eventually, install_crds, local_settings, running

pytestmark = pytest.mark.timeout(120)


@pytest.mark.parametrize("engine", ["direct", "kopf"])
async def test_a_profile_applied_after_a_late_crd_install_serves_without_a_restart(
    controlplane_factory: Any,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    engine: str,
) -> None:
    caplog.set_level(logging.INFO)
    monkeypatch.setattr(profile_handlers, "CRD_POLL", 0.5)
    cp: ControlPlane = await call(controlplane_factory)
    pool = {"e2e.kubesched.dev/pool": uuid.uuid4().hex[:8]}
    await call(cp.create_nodes, 2, labels=pool, prefix="late-", zones=0)
    spec = {"nodeSelector": pool}
    settings = local_settings(cp.kubeconfig, scheduler_names=["ks"], watch_engine=engine)
    async with running(settings) as started:
        rt = started.runtime
        assert rt.profiles.served is False
        await call(cp.create_pod, "before", scheduler_name="ks", spec=spec)
        assert await call(cp.wait_bound, "before")  # the built-in profile serves

        await call(install_crds, cp)
        await eventually(rt.profiles.crd_found.is_set, in_thread=False, what="the CRD found")
        profile = {
            "apiVersion": "kubesched.dev/v1alpha1",
            "kind": "SchedulingProfile",
            "metadata": {"name": "late"},
            "spec": {"schedulerName": "late"},
        }
        done = await call(cp.kubectl, "apply", "-f", "-", input=yaml.safe_dump(profile))
        assert done.returncode == 0, done.stderr
        await call(cp.create_pod, "late-pod", scheduler_name="late", spec=spec)
        assert await call(cp.wait_bound, "late-pod")

        def compiled() -> dict[str, Any] | None:
            got = cp.kubectl("get", "schedulingprofile", "late", "-o", "json", check=True)
            obj: dict[str, Any] = json.loads(got.stdout)
            conditions = (obj.get("status") or {}).get("conditions") or ()
            ok = any(c["type"] == "Ready" and c["reason"] == "Compiled" for c in conditions)
            return obj if ok else None

        obj = await eventually(compiled, what="the profile's Ready condition")
        assert obj["metadata"]["finalizers"] == ["kubesched.dev/finalizer"]

        # the restarted Kopf watches what it watched before (with engine kopf: the pods)
        await call(cp.create_pod, "after", scheduler_name="ks", spec=spec)
        assert await call(cp.wait_bound, "after")

    said = [r.getMessage() for r in caplog.records if r.name.startswith("kubesched")]
    assert (
        "the SchedulingProfile CRD is installed now: SchedulingProfiles are applied from "
        "now on (Kopf restarts to watch them)"
    ) in said
    assert "Kopf starts again, to watch SchedulingProfiles" in said
    loud = [f"{r.name}: {r.getMessage()}" for r in caplog.records if r.levelno >= logging.WARNING]
    assert loud == [], loud
