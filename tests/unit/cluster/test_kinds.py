"""The table of kinds (kubesched.cluster.kinds) is served by both adapters, kind by kind.

A kind added to the table is stored, found and listed by namespace the same way by the
in-memory cluster (the simulator's) and by the real adapter's store, and the real adapter
lists it at the table's path.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes_asyncio import client as k8s_client

from kubesched.cluster.kinds import KINDS, LIST_PATHS, Kind
from kubesched.cluster.kube import KubeCluster
from kubesched.cluster.memory import MemoryCluster
from tests.unit.cluster.test_kube import FakeAPI, fake  # noqa: F401 (a fixture)

IDS = [k.kind for k in KINDS]


def obj(k: Kind, name: str, namespace: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if not k.cluster_scoped:
        meta["namespace"] = namespace
    return {"apiVersion": k.group_version, "kind": k.kind.partition(".")[0], "metadata": meta}


@pytest.mark.parametrize("k", KINDS, ids=IDS)
def test_memory_cluster_stores_every_kind_by_its_scope(k: Kind) -> None:
    cluster = MemoryCluster()
    cluster.apply(obj(k, "a", "shop"))
    found = cluster.get(k.kind, "shop", "a")
    assert found is not None and found["metadata"]["name"] == "a"
    in_other = [o["metadata"]["name"] for o in cluster.list(k.kind, "other")]
    assert in_other == (["a"] if k.cluster_scoped else [])


@pytest.mark.parametrize("k", KINDS, ids=IDS)
def test_kube_cluster_stores_every_kind_by_its_scope(k: Kind) -> None:
    cluster = KubeCluster(k8s_client.Configuration(), reporting_instance_suffix="h")
    o = obj(k, "a", "shop")
    cluster.put(k.kind, o)
    assert cluster.get(k.kind, "shop", "a") is o
    assert list(cluster.list(k.kind, "other")) == ([o] if k.cluster_scoped else [])


async def test_kube_cluster_lists_every_kind_at_its_path(
    fake: tuple[FakeAPI, KubeCluster],  # noqa: F811
) -> None:
    api, cluster = fake
    for kind in LIST_PATHS:
        await cluster.list_objects(kind)
    paths = [r.path.removesuffix("?limit=500") for r in api.requests]
    assert len(set(paths)) == len(LIST_PATHS)
    assert {
        "/api/v1/pods",
        "/api/v1/persistentvolumes",
        "/apis/apps/v1/replicasets",
        "/apis/resource.k8s.io/v1/resourceclaimtemplates",
        "/apis/kubesched.dev/v1alpha1/podgroups",
        "/apis/scheduling.k8s.io/v1beta1/workloads",
        "/apis/scheduling.x-k8s.io/v1alpha1/podgroups",
    } <= set(paths)
