"""An object deleted after the start's first listing (the prefetch's) and before the
watches begin: its kind's informer watches from that listing's resourceVersion, so the
deletion arrives as an event and the object is forgotten. (When Kopf watched the kinds
other than pods and nodes, its own later listing never had it, no DELETED came, and a
deleted budget kept protecting pods from preemption until a reconcile caught it.)"""

from __future__ import annotations

import asyncio
import logging

import pytest

from kubesched.cluster.prefetch import Prefetch
from tests.controlplane import ControlPlane
from tests.e2e.support import eventually, local_settings, running

pytestmark = pytest.mark.timeout(90)


async def test_an_object_deleted_between_the_prefetch_and_the_watch_is_forgotten(
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
        # by its watch, not by a reconcile's fresh listing
        assert started.runtime.kopf_kinds == ()
    assert not [r for r in caplog.records if "forgetting it" in r.getMessage()]
