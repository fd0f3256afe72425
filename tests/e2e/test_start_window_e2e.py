"""An object of a kind Kopf watches for kubesched, deleted after the start's first listing
(the prefetch's) and before Kopf's own: Kopf's listing never had it, so no DELETED comes.
The reconcile that follows Kopf's start forgets it; a deleted budget would otherwise keep
protecting pods from preemption for as long as kubesched runs."""

from __future__ import annotations

import asyncio
import logging

import pytest

from kubesched.cluster.prefetch import Prefetch
from tests.controlplane import ControlPlane
from tests.e2e.support import eventually, local_settings, running

pytestmark = pytest.mark.timeout(90)


async def test_an_object_deleted_before_kopf_listed_it_is_forgotten(
    controlplane: ControlPlane, crds: None, namespace: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="kubesched")
    budget = {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "b", "namespace": namespace},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "x"}}},
    }
    await asyncio.to_thread(controlplane.api.create, budget)
    prefetch = Prefetch(str(controlplane.kubeconfig)).start()
    last = prefetch.kinds[-1]
    assert last not in ("PodDisruptionBudget", "Pod", "Node"), prefetch.kinds
    await prefetch.take(last)  # the thread lists in order: the budget's page is in
    await asyncio.to_thread(
        controlplane.api.remove, "policy/v1", "PodDisruptionBudget", "b", namespace
    )
    settings = local_settings(controlplane.kubeconfig, scheduler_names=["start-window"])
    async with running(settings, prefetch=prefetch) as started:
        store = started.runtime.cluster.objects
        key = f"{namespace}/b"
        await eventually(
            lambda: key not in store.get("PodDisruptionBudget", {}),
            within=20,
            what="the budget forgotten",
            in_thread=False,
        )
    forgotten = [r.getMessage() for r in caplog.records if "forgetting it" in r.getMessage()]
    assert f"PodDisruptionBudget {key} is gone from the API server: forgetting it" in forgotten
