"""DynamicResources' ResourceClaim writes against a real API server (``KubeCluster``'s
``update_claim_status``, ``unreserve_claim``, ``deallocate_claim`` delegate here).

As kube-scheduler v1.37.2's PreBind (``bindClaim``) makes them:

* the first attempt starts from the claim as the store holds it (no read); each retry
  after a ``409 Conflict`` (the claim changed since: a benign concurrent update) reads the
  claim afresh and starts over, at most :data:`CONFLICT_STEPS` attempts 10 ms apart
  (client-go's ``retry.DefaultRetry``); the last conflict is what the caller gets;
* a claim being deleted, or allocated meanwhile when we bring an allocation, or
  deallocated meanwhile when we only add a reservation, is not retried: ``Conflict``
  with kube-scheduler's words (``claim <ns>/<name> got allocated elsewhere in the
  meantime``);
* storing an allocation first puts the ``resource.kubernetes.io/delete-protection``
  finalizer on the claim by a normal update (the status subresource ignores metadata);
* then one update of ``resourceclaims/<name>/status``: ``status.allocation`` (with
  ``allocationTimestamp``, as DRADeviceBindingConditions, on by default in 1.37, has it)
  and the pod appended to ``status.reservedFor``.

Errors keep their class (``Conflict``, ``NotFound``, ``ClusterError`` and its
``retryable``) and read as kube-scheduler's: ``add allocation and reservation to claim
ns/name: <the API server's message>``, ``add finalizer to claim ...``, ``get updated
claim ... after conflict: ...``.
"""

from __future__ import annotations

import asyncio
import copy
import random
import re
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, Protocol

from kubesched.api.meta import rfc3339
from kubesched.cluster.kube_http import STRATEGIC_MERGE
from kubesched.framework.cluster_port import ClusterError, Conflict, NotFound

__all__ = [
    "CONFLICT_STEPS",
    "FINALIZER",
    "bind_claim",
    "create_claim",
    "deallocate_claim",
    "delete_claim",
    "unreserve_claim",
    "wrapped",
]

FINALIZER = "resource.kubernetes.io/delete-protection"
CONFLICT_STEPS = 5
"""client-go's ``retry.DefaultRetry``: 5 attempts, 10 ms apart, 10% jitter."""
CONFLICT_DELAY = 0.01

_HTTP_TEXT = re.compile(r"^[A-Z]+ \S+: \d{3} (?P<message>.*)$", re.S)


class Requester(Protocol):
    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
    ) -> Any: ...


def _path(claim: Mapping[str, Any]) -> tuple[str, str]:
    meta = claim.get("metadata") or {}
    ns, name = str(meta.get("namespace") or "default"), str(meta.get("name") or "")
    return f"{ns}/{name}", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims/{name}"


def wrapped(error: ClusterError, prefix: str) -> ClusterError:
    """``error`` of the same class, saying ``<prefix>: <the API server's message>``."""
    match = _HTTP_TEXT.match(str(error))
    out = type(error)(f"{prefix}: {match['message'] if match else error}")
    out.code, out.retryable, out.retry_after = error.code, error.retryable, error.retry_after
    return out


def _server_conflict(error: ClusterError) -> bool:
    return isinstance(error, Conflict) and error.code == "409"


async def bind_claim(
    api: Requester,
    claim: Mapping[str, Any],
    allocation: Mapping[str, Any] | None,
    reserved_for: Mapping[str, Any],
    *,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> dict[str, Any]:
    """PreBind's write for one claim (see the module docstring); the claim as stored."""
    key, path = _path(claim)
    current: dict[str, Any] = copy.deepcopy(dict(claim))
    last: ClusterError | None = None
    for attempt in range(CONFLICT_STEPS):
        if attempt:
            await asyncio.sleep(CONFLICT_DELAY * (1 + 0.1 * random.random()))
            try:
                current = dict(await api.request("GET", path))
            except ClusterError as e:
                raise wrapped(e, f"get updated claim {key} after conflict") from e
        try:
            return await _attempt(api, key, path, current, allocation, reserved_for, now)
        except ClusterError as e:
            if not _server_conflict(e):
                raise
            last = e
    assert last is not None
    raise last


async def _attempt(
    api: Requester,
    key: str,
    path: str,
    current: dict[str, Any],
    allocation: Mapping[str, Any] | None,
    reserved_for: Mapping[str, Any],
    now: Callable[[], datetime],
) -> dict[str, Any]:
    meta = current.setdefault("metadata", {})
    if meta.get("deletionTimestamp"):
        raise Conflict(f"claim {key} got deleted in the meantime")
    status = current.setdefault("status", {})
    if allocation is not None:
        if status.get("allocation"):
            raise Conflict(f"claim {key} got allocated elsewhere in the meantime")
        finalizers = meta.setdefault("finalizers", [])
        if FINALIZER not in finalizers:
            finalizers.append(FINALIZER)
            try:
                current = dict(await api.request("PUT", path, current))
            except ClusterError as e:
                raise wrapped(e, f"add finalizer to claim {key}") from e
            status = current.setdefault("status", {})
        status["allocation"] = copy.deepcopy(dict(allocation))
    status.setdefault("reservedFor", []).append(dict(reserved_for))
    stored = status.get("allocation")
    if not isinstance(stored, dict):
        raise Conflict(f"claim {key} got deallocated elsewhere in the meantime")
    if not stored.get("allocationTimestamp"):
        stored["allocationTimestamp"] = rfc3339(now())
    try:
        return dict(await api.request("PUT", f"{path}/status", current))
    except ClusterError as e:
        what = (
            "add allocation and reservation to" if allocation is not None else "add reservation to"
        )
        raise wrapped(e, f"{what} claim {key}") from e


async def unreserve_claim(api: Requester, claim: Mapping[str, Any], pod_uid: str) -> None:
    """Unreserve: the pod's entry out of ``status.reservedFor`` by a strategic merge patch
    (``$patch: delete`` on its uid, guarded by the claim's uid), no fresh copy needed."""
    _, path = _path(claim)
    uid = (claim.get("metadata") or {}).get("uid")
    await api.request(
        "PATCH",
        f"{path}/status",
        {
            "metadata": {"uid": uid},
            "status": {"reservedFor": [{"$patch": "delete", "uid": pod_uid}]},
        },
        content_type=STRATEGIC_MERGE,
    )


async def deallocate_claim(api: Requester, claim: Mapping[str, Any]) -> None:
    """PostFilter: allocation, reservedFor and devices cleared by an update of the status
    from the claim as the store holds it (its resourceVersion: ``Conflict`` when it changed
    since)."""
    _, path = _path(claim)
    new = copy.deepcopy(dict(claim))
    status = new.setdefault("status", {})
    for field_name in ("allocation", "reservedFor", "devices"):
        status.pop(field_name, None)
    await api.request("PUT", f"{path}/status", new)


async def create_claim(api: Requester, claim: Mapping[str, Any]) -> dict[str, Any]:
    """PreBind of extended resources backed by DRA: the claim created (the API server
    gives it its name from ``metadata.generateName``); the claim as stored. Errors read as
    kube-scheduler's: ``create claim for extended resources <ns>/: <message>`` (the name
    is cleared before the create, as kube's is)."""
    ns = str((claim.get("metadata") or {}).get("namespace") or "default")
    try:
        return dict(
            await api.request(
                "POST", f"/apis/resource.k8s.io/v1/namespaces/{ns}/resourceclaims", dict(claim)
            )
        )
    except ClusterError as e:
        raise wrapped(e, f"create claim for extended resources {ns}/") from e


async def delete_claim(api: Requester, claim: Mapping[str, Any]) -> None:
    """The claim kube-scheduler made for a pod's extended resources deleted (Unreserve,
    or a stale one in PostFilter): the delete-protection finalizer first taken off by a
    normal update (a conflict reads the claim afresh and retries, as kube's
    ``RetryOnConflict``), then the delete; a claim already gone is no error."""
    key, path = _path(claim)
    current: dict[str, Any] = copy.deepcopy(dict(claim))
    for attempt in range(CONFLICT_STEPS):
        if attempt:
            await asyncio.sleep(CONFLICT_DELAY * (1 + 0.1 * random.random()))
            try:
                current = dict(await api.request("GET", path))
            except ClusterError as e:
                if isinstance(e, NotFound):
                    return
                raise wrapped(e, f"get resourceclaim {key}") from e
        finalizers = (current.get("metadata") or {}).get("finalizers") or []
        if FINALIZER not in finalizers:
            break
        current["metadata"]["finalizers"] = [f for f in finalizers if f != FINALIZER]
        try:
            await api.request("PUT", path, current)
            break
        except NotFound:
            return
        except ClusterError as e:
            if not _server_conflict(e) or attempt == CONFLICT_STEPS - 1:
                raise wrapped(e, f"update resourceclaim {key}") from e
    try:
        await api.request("DELETE", path)
    except NotFound:
        return
