"""One read of everything the scheduler looks at, from a live API server
(``kubesched explain`` against a cluster).

The kinds are ``kubesched run``'s (:data:`kubesched.cluster.kinds.LIST_PATHS`: pods,
nodes, volumes, storage classes, CSI nodes, PDBs, priority classes, services and
controllers for default spreading, the three gang APIs) plus the SchedulingProfiles, so
an explanation uses the same objects and the same profile chain the running scheduler
would. Each object comes back with its ``kind`` and ``apiVersion``, as a scenario file
states them. Pods and nodes must be readable; any other kind the server does not serve
(a gang API not installed: 404) is skipped quietly, and one it refuses (403) is skipped
with a warning.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kubesched.cluster.kinds import LIST_PATHS, PROFILE
from kubesched.cluster.kube import KubeCluster
from kubesched.cluster.kubeconfig import load_client_configuration
from kubesched.framework.cluster_port import ClusterError, NotFound

__all__ = ["PROFILE_PATH", "ClusterRead", "ClusterReadError", "read_cluster"]

PROFILE_PATH = (PROFILE.prefix, PROFILE.plural)
REQUIRED = ("Pod", "Node")


class ClusterReadError(Exception):
    """The cluster could not be read (unreachable, or pods or nodes refused)."""


@dataclass
class ClusterRead:
    host: str
    objects: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _as_object(kind: str, prefix: str, obj: dict[str, Any]) -> dict[str, Any]:
    api_version = prefix.removeprefix("/api/").removeprefix("/apis/")
    return {**obj, "kind": kind.partition(".")[0], "apiVersion": api_version}


async def read_cluster(kubeconfig: str | None) -> ClusterRead:
    """Every kind the scheduler reads, listed once. Raises
    :class:`~kubesched.cluster.kubeconfig.KubeconfigError` or :class:`ClusterReadError`."""
    cfg = await load_client_configuration(kubeconfig)
    out = ClusterRead(str(cfg.host))
    kube = KubeCluster(cfg, reporting_instance_suffix="explain", qps=0)
    try:
        await _read_into(out, kube)
    finally:
        await kube.close()
    return out


async def _read_into(out: ClusterRead, kube: KubeCluster) -> None:
    kinds = [*REQUIRED, *(k for k in LIST_PATHS if k not in REQUIRED)]
    for kind in kinds:
        prefix, plural = LIST_PATHS[kind]
        try:
            items = await kube.list_objects(kind)
        except ClusterError as e:
            _refused(out, kind, plural, e)
            continue
        out.objects.extend(_as_object(kind, prefix, o) for o in items)
    prefix, plural = PROFILE_PATH
    try:
        page = await kube.request("GET", f"{prefix}/{plural}")
    except ClusterError as e:
        _refused(out, "SchedulingProfile", plural, e)
    else:
        items = (page or {}).get("items") or []
        out.objects.extend(_as_object("SchedulingProfile", prefix, o) for o in items)


def _refused(out: ClusterRead, kind: str, plural: str, e: ClusterError) -> None:
    if e.code in ("connection", "timeout"):
        raise ClusterReadError(f"cannot reach the API server at {out.host}: {_cause(e)}")
    if kind in REQUIRED:
        raise ClusterReadError(f"cannot list {plural} on {out.host}: {_cause(e)}")
    if isinstance(e, NotFound) or e.code == "404":
        return  # an API this cluster does not serve
    out.warnings.append(f"{plural} not read ({_cause(e)}); explaining without them")


def _cause(e: ClusterError) -> str:
    text = str(e)
    # "GET /api/v1/pods: ClientConnectorError: Cannot connect to host ..." -> the cause
    _, sep, rest = text.partition(": ")
    return rest if sep else text
