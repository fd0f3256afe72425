"""The kinds kubesched reads from a cluster, in one table both adapters and the watches use.

For each kind: its API group/version and plural (the REST path), whether it is
cluster-scoped (an object's store key is its name, else ``namespace/name``), and who
reads it. ``kubesched run`` watches the :data:`WATCHED` kinds (Kopf or the informers) and
lists them before its first cycle; the Helm chart's ClusterRole grants list and watch on
exactly these (tests/helm/test_chart.py checks it against this table). The start-up
prefetch (:mod:`kubesched.cluster.prefetch`) lists them too, before pydantic and the
models are imported: so this module imports none of them.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TypeVar

from kubesched.api.gang_apis import STORE_KINDS, WORKLOAD_STORE_KIND, GangAPI

__all__ = [
    "CLUSTER_SCOPED",
    "KINDS",
    "LIST_PATHS",
    "OPTIONAL_KINDS",
    "PROFILE",
    "REQUIRED_KINDS",
    "WATCHED",
    "Kind",
    "Reader",
    "in_namespace",
    "object_key",
]

_V = TypeVar("_V")


class Reader(enum.Enum):
    """Who reads a kind."""

    RUN = "run"
    """``kubesched run`` watches it; pods and nodes, and what plugins read or requeue on."""
    EXPLAIN = "explain"
    """Only ``kubesched explain`` lists it, with the user's credentials."""
    GANG_SOURCE = "gang-source"
    """A foreign gang API, watched while the API server serves it (``gang_sources``)."""
    PROFILES = "profiles"
    """The SchedulingProfiles, read by their own Kopf handlers (``profile_handlers``)."""


@dataclass(frozen=True, slots=True)
class Kind:
    kind: str
    """The object store's kind (the gang kinds that share a name carry their group)."""
    group_version: str
    plural: str
    cluster_scoped: bool = False
    reader: Reader = Reader.RUN
    optional: bool = False
    """A missing CRD or API means none exist, not an error."""

    @property
    def prefix(self) -> str:
        """The REST path prefix: ``/api/v1`` for the core group, else ``/apis/<g>/<v>``."""
        if "/" not in self.group_version:
            return f"/api/{self.group_version}"
        return f"/apis/{self.group_version}"


_RESOURCE = "resource.k8s.io/v1"
_STORAGE = "storage.k8s.io/v1"

KINDS: tuple[Kind, ...] = (
    Kind("Pod", "v1", "pods"),
    Kind("Node", "v1", "nodes", cluster_scoped=True),
    Kind("Namespace", "v1", "namespaces", cluster_scoped=True),
    Kind("PersistentVolumeClaim", "v1", "persistentvolumeclaims"),
    Kind("PersistentVolume", "v1", "persistentvolumes", cluster_scoped=True),
    Kind("Service", "v1", "services"),
    Kind("ReplicationController", "v1", "replicationcontrollers"),
    Kind("ReplicaSet", "apps/v1", "replicasets"),
    Kind("StatefulSet", "apps/v1", "statefulsets"),
    Kind("StorageClass", _STORAGE, "storageclasses", cluster_scoped=True),
    Kind("CSINode", _STORAGE, "csinodes", cluster_scoped=True),
    Kind("CSIDriver", _STORAGE, "csidrivers", cluster_scoped=True),
    Kind("CSIStorageCapacity", _STORAGE, "csistoragecapacities"),
    Kind("PodDisruptionBudget", "policy/v1", "poddisruptionbudgets"),
    Kind("PriorityClass", "scheduling.k8s.io/v1", "priorityclasses", cluster_scoped=True),
    # Dynamic Resource Allocation (framework.cluster_port.DRA_KINDS): resource.k8s.io/v1 is
    # served since Kubernetes 1.34; without it no pod can have a claim
    Kind("DeviceClass", _RESOURCE, "deviceclasses", cluster_scoped=True, optional=True),
    Kind("ResourceSlice", _RESOURCE, "resourceslices", cluster_scoped=True, optional=True),
    Kind("ResourceClaim", _RESOURCE, "resourceclaims", optional=True),
    # DeviceTaintRules taint the slices' devices (v1 since 1.37, on by default)
    Kind("DeviceTaintRule", _RESOURCE, "devicetaintrules", cluster_scoped=True, optional=True),
    # Coscheduling's gangs: without the CRD the initial sync lists none, and the informer
    # looks again every minute (a CRD installed later is watched without a restart)
    Kind(STORE_KINDS[GangAPI.KUBESCHED], GangAPI.KUBESCHED.value, "podgroups", optional=True),
    # a pod whose claim the resourceclaim controller has yet to create is explained from its
    # template; kube-scheduler never reads templates
    Kind("ResourceClaimTemplate", _RESOURCE, "resourceclaimtemplates", reader=Reader.EXPLAIN),
    # the foreign gang APIs (kubesched.api.gangs)
    Kind(
        STORE_KINDS[GangAPI.UPSTREAM],
        GangAPI.UPSTREAM.value,
        "podgroups",
        reader=Reader.GANG_SOURCE,
    ),
    Kind(WORKLOAD_STORE_KIND, GangAPI.UPSTREAM.value, "workloads", reader=Reader.GANG_SOURCE),
    Kind(
        STORE_KINDS[GangAPI.SCHEDULER_PLUGINS],
        GangAPI.SCHEDULER_PLUGINS.value,
        "podgroups",
        reader=Reader.GANG_SOURCE,
    ),
    Kind(
        "SchedulingProfile",
        GangAPI.KUBESCHED.value,
        "schedulingprofiles",
        cluster_scoped=True,
        reader=Reader.PROFILES,
    ),
)

WATCHED: tuple[Kind, ...] = tuple(k for k in KINDS if k.reader is Reader.RUN)
"""What ``kubesched run`` watches, in the order of its initial sync."""

PROFILE: Kind = next(k for k in KINDS if k.reader is Reader.PROFILES)

LIST_PATHS: dict[str, tuple[str, str]] = {
    k.kind: (k.prefix, k.plural) for k in KINDS if k.reader is not Reader.PROFILES
}
"""Store kind -> (path prefix, plural) of everything the adapters list by kind."""

CLUSTER_SCOPED: frozenset[str] = frozenset(k.kind for k in KINDS if k.cluster_scoped)

OPTIONAL_KINDS: frozenset[str] = frozenset(k.kind for k in WATCHED if k.optional)
"""Watched kinds a cluster may not serve (a CRD not installed, an API group off): a 404
listing one means none."""
REQUIRED_KINDS: frozenset[str] = frozenset(k.kind for k in WATCHED if not k.optional)
"""Watched kinds every API server serves: a 404 listing one is an error."""


def object_key(kind: str, namespace: str | None, name: str) -> str:
    """The store key of an object: its name if ``kind`` is cluster-scoped, else
    ``namespace/name`` (``default`` for a missing namespace, as the API server does)."""
    if kind in CLUSTER_SCOPED:
        return name
    return f"{namespace or 'default'}/{name}"


def in_namespace(kind: str, objs: Mapping[str, _V], namespace: str | None) -> list[_V]:
    """The objects of a store's ``kind`` (key -> object) in ``namespace``; all of them for
    ``None`` or a cluster-scoped kind."""
    if namespace is None or kind in CLUSTER_SCOPED:
        return list(objs.values())
    prefix = f"{namespace}/"
    return [o for k, o in objs.items() if k.startswith(prefix)]
