"""The port the scheduler talks to a cluster through, and the read-only object store.

Two adapters implement :class:`ClusterPort`: ``kubesched.cluster.memory`` (simulator,
tests) and ``kubesched.cluster.kube`` (a real API server). Methods raise
:class:`ClusterError` subclasses; the scheduler decides what a failure means.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kubesched.framework.types import Pod

__all__ = [
    "DRA_KINDS",
    "ClusterError",
    "ClusterPort",
    "Conflict",
    "NotFound",
    "ObjectStore",
    "PodCondition",
    "condition_of",
]


class ClusterError(Exception):
    """A write the cluster refused or could not take."""

    retryable = True
    code = ""
    """What failed, for metrics and retries: the HTTP status (``"500"``, ``"429"``),
    ``"timeout"`` or ``"connection"``; empty when the adapter does not say."""
    retry_after: float | None = None
    """The server's Retry-After, in seconds, when it sent one (429, 503)."""
    server_message = ""
    """The API server's own message (its Status's), which client-go's errors read, as in
    kube-scheduler's ``pods "p" not found``; empty when it sent none."""


class NotFound(ClusterError):
    """The object is gone (e.g. the pod was deleted between cycle and bind)."""

    retryable = False


class Conflict(ClusterError):
    """The object changed under us (e.g. the pod is already bound)."""

    retryable = False


@dataclass(frozen=True, slots=True)
class PodCondition:
    type: str
    status: str
    reason: str = ""
    message: str = ""

    def written_in(self, status: Mapping[str, Any]) -> bool:
        """Whether a pod's ``status`` already has this condition with the same status,
        reason and message: writing it would change nothing (kube-scheduler's
        ``podutil.UpdatePodCondition`` test; the transition time follows the status)."""
        current = condition_of(status, self.type)
        return (
            current is not None
            and current.get("status") == self.status
            and (current.get("reason") or "") == self.reason
            and (current.get("message") or "") == self.message
        )


def condition_of(status: Mapping[str, Any], type_: str) -> Mapping[str, Any] | None:
    """The condition of type ``type_`` in a pod's ``status``, if any."""
    for c in status.get("conditions") or ():
        if isinstance(c, Mapping) and c.get("type") == type_:
            return c
    return None


class ClusterPort(Protocol):
    async def bind(self, pod: Pod, node_name: str) -> None:
        """Create the pods/binding subresource."""
        ...

    async def record_event(
        self,
        regarding: Pod,
        *,
        event_type: str,
        reason: str,
        action: str,
        message: str,
        reporting_controller: str,
        related: Pod | None = None,
    ) -> None:
        """An events.k8s.io Event about ``regarding`` (``Scheduled``, ``FailedScheduling``...)."""
        ...

    async def patch_pod_status(
        self,
        pod: Pod,
        *,
        condition: PodCondition | None = None,
        nominated_node_name: str | None = None,
    ) -> None:
        """Set a pod condition and/or ``status.nominatedNodeName`` ("" clears it)."""
        ...

    async def delete_pod(self, pod: Pod, *, condition: PodCondition | None = None) -> None:
        """Delete a victim, after setting ``condition`` (``DisruptionTarget``) on it."""
        ...

    async def bind_volume(
        self, pvc: Mapping[str, Any], pv_name: str | None, selected_node: str | None
    ) -> None:
        """VolumeBinding's PreBind writes for one claim (``pvc`` as the store holds it).

        ``pv_name``: static binding; the PV's ``spec.claimRef`` is set to the claim (with the
        ``pv.kubernetes.io/bound-by-controller`` annotation), as kube-scheduler writes it.
        ``selected_node``: dynamic provisioning; the claim is annotated
        ``volume.kubernetes.io/selected-node: <node>`` for the external provisioner.
        An adapter without a PV controller behind it (the memory cluster) also completes
        what the controller would: ``spec.volumeName``, ``pv.kubernetes.io/bind-completed``
        and the ``Bound`` phases. Raises ``NotFound`` when the claim or PV is gone and
        ``Conflict`` when the PV is already bound to another claim.
        """
        ...

    async def update_claim_status(
        self,
        claim: Mapping[str, Any],
        allocation: Mapping[str, Any] | None,
        reserved_for: Mapping[str, Any],
    ) -> Mapping[str, Any]:
        """DynamicResources' PreBind write for one ResourceClaim (``claim`` as the store
        holds it); returns the claim as stored afterwards.

        Reads the current claim, then: ``allocation`` (a ``status.allocation`` dict, or
        None when the claim is already allocated) is stored after the finalizer
        ``resource.kubernetes.io/delete-protection`` is on the claim (a normal update, as
        kube-scheduler adds it); ``reserved_for`` (``{"resource": "pods", "name": ...,
        "uid": ...}``) is appended to ``status.reservedFor``. Raises ``NotFound`` when the
        claim is gone, ``Conflict`` with ``claim <ns>/<name> got allocated elsewhere in
        the meantime`` when ``allocation`` is given and the stored claim already has one,
        or ``claim <ns>/<name> got deleted in the meantime`` when it is being deleted.
        """
        ...

    async def unreserve_claim(self, claim: Mapping[str, Any], pod_uid: str) -> None:
        """DynamicResources' Unreserve: remove the entry of ``pod_uid`` from the claim's
        ``status.reservedFor`` (kube-scheduler sends a strategic merge patch with
        ``$patch: delete`` on the uid, so it needs no fresh copy). ``NotFound`` when the
        claim is gone."""
        ...

    async def deallocate_claim(self, claim: Mapping[str, Any]) -> None:
        """DynamicResources' PostFilter: clear ``status.allocation``, ``status.reservedFor``
        and ``status.devices`` of a claim reserved for nobody (or only the pod being
        scheduled), so the pod can be tried with a fresh allocation. ``Conflict`` when the
        stored claim changed since ``claim`` (its resourceVersion), ``NotFound`` when
        gone."""
        ...

    async def create_claim(self, claim: Mapping[str, Any]) -> Mapping[str, Any]:
        """DynamicResources' PreBind of a pod's extended resources backed by DRA: create
        the ResourceClaim (``metadata.generateName`` gives its name); returns it as stored.
        Errors read ``create claim for extended resources <ns>/: <message>``."""
        ...

    async def delete_claim(self, claim: Mapping[str, Any]) -> None:
        """Delete a claim DynamicResources created for extended resources (Unreserve; a
        stale one in PostFilter): the ``resource.kubernetes.io/delete-protection``
        finalizer taken off (a normal update) first; a claim already gone is no error."""
        ...

    async def set_extended_resource_claim_status(self, pod: Pod, status: Mapping[str, Any]) -> None:
        """Patch the pod's ``status.extendedResourceClaimStatus`` (``requestMappings``,
        ``resourceClaimName``). Errors read ``update pod <ns>/<name>
        ExtendedResourceClaimStatus: <message>``; ``NotFound`` when the pod is gone."""
        ...


DRA_KINDS = (
    "DeviceClass",
    "ResourceSlice",
    "ResourceClaim",
    "ResourceClaimTemplate",
    "DeviceTaintRule",
)
"""The store kinds of resource.k8s.io/v1 (``handle.store.get/list`` use these names);
DeviceClass, ResourceSlice and DeviceTaintRule are cluster-scoped."""


class ObjectStore(Protocol):
    """Watched objects other than pods and nodes, as plain dicts (read-only)."""

    def get(self, kind: str, namespace: str, name: str) -> Mapping[str, Any] | None: ...

    def list(self, kind: str, namespace: str | None = None) -> Iterable[Mapping[str, Any]]: ...
