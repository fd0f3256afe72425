"""Extended resources backed by DRA (KEP-5004, DRAExtendedResource: GA and locked on in
kube-scheduler 1.37.2): a container's ``example.com/gpu: 2`` served by a DeviceClass
(``spec.extendedResourceName``, or the implicit ``deviceclass.resource.kubernetes.io/
<class>``) on nodes that advertise none of it.

As kube-scheduler's DynamicResources handles them, point by point:

- PreFilter: a pod requesting such a resource gets an implicit claim, in memory only
  (named ``<extended-resources>``, ``generateName: <pod>-extended-resources-``, owned by
  the pod, annotated ``resource.kubernetes.io/extended-resource-claim: "true"``). A claim
  with that annotation and the pod as controller already in the cluster (a bind that
  failed half-way) is used instead, and is *stale*.
- Filter, per node (before the pod's own claims are looked at): a stale claim fails every
  node (``cannot schedule extended resource claim``); an extended resource neither in the
  node's allocatable nor served by a class: ``cannot fit resource``; those a class serves
  and the node has none of (``allocatable == 0``) become the claim's requests for this
  node (one ``ExactCount`` request per container and resource, named
  ``container-<i>-request-<j>``, count = the container's quantity; a non-sidecar init
  container reuses later long-lived containers' requests, see
  :func:`requests_and_mappings`), allocated last, after the pod's own claims. A node that
  serves them all through device plugins needs no claim.
- Reserve: the node's allocation of that claim becomes in flight (keyed by a uid made up
  for it). Unreserve drops it and deletes the claim if PreBind created it.
- PreBind: the claim created (``generateName``), its finalizer, ``status.allocation`` and
  the pod in ``reservedFor`` written (as any claim's), PreBind waits until the watch has
  brought the new claim (kube polls its assume cache, up to 120 s), then the pod's
  ``status.extendedResourceClaimStatus`` (``requestMappings``: container, resource,
  request; ``resourceClaimName``) is patched.
- PostFilter: a stale claim is deleted (``deletion of ResourceClaim completed``), so the
  next attempt starts afresh.

Not modelled: kube allocates an empty implicit claim (and then fails PreBind on its empty
mappings) when a pod with claims of its own gets a node whose device plugins serve all of
its extended resources; here no implicit claim is made on such a node.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kubesched.framework.cluster_port import ClusterPort, ObjectStore
from kubesched.framework.dra import AllocationResult, ResourceClaim
from kubesched.framework.dra.extended import (
    EXTENDED_RESOURCE_CLAIM_ANNOTATION,
    ExtendedResourceClasses,
    classes_of,
    is_dra_extended_resource_name,
)
from kubesched.framework.interface import Handle
from kubesched.framework.nodeinfo import NodeInfo
from kubesched.framework.quantity import QuantityError, parse_quantity
from kubesched.framework.status import Status
from kubesched.framework.types import ObjectError, Pod
from kubesched.plugins.dynamic_resources.claims import allocation_dict
from kubesched.plugins.dynamic_resources.tracker import (
    CLAIM,
    ClaimTracker,
    Obj,
    Pending,
)

__all__ = [
    "CANNOT_FIT",
    "DELETED",
    "SPECIAL_NAME",
    "STALE",
    "ExtendedClaim",
    "Variant",
    "bind_extended",
    "find_extended_claim",
    "node_variant",
    "requests_and_mappings",
]

log = logging.getLogger("kubesched.plugins.dynamic_resources")

SPECIAL_NAME = "<extended-resources>"
"""kube's specialClaimInMemName: not a valid name, so never a real claim's."""
CANNOT_FIT = "cannot fit resource"
STALE = "cannot schedule extended resource claim"
DELETED = "deletion of ResourceClaim completed"
ASSUME_POLL = 0.05
"""How often PreBind looks for the created claim in the store (kube: 1 s)."""
ASSUME_TIMEOUT = 120.0
"""kube's AssumeExtendedResourceTimeoutDefaultSeconds: then PreBind goes on anyway."""


@dataclass(slots=True)
class Variant:
    """The implicit claim for one set of resources to allocate through DRA."""

    raw: dict[str, Any]
    claim: ResourceClaim
    mappings: list[dict[str, str]]


@dataclass(slots=True)
class ExtendedClaim:
    """A pod's implicit claim across one scheduling cycle."""

    raw: Obj
    """The claim in memory, or the stale one found in the cluster."""
    requests: dict[str, int]
    """The pod's non-zero extended resource requests (served by a class or not)."""
    classes: ExtendedResourceClasses
    stale: bool = False
    variants: dict[frozenset[str], Variant] = field(default_factory=dict)
    by_node: dict[str, Variant] = field(default_factory=dict)
    """Per feasible node that needs one, its variant (Filter -> Reserve)."""
    reserved: tuple[Variant, AllocationResult] | None = None
    created: Obj | None = None
    """The claim as PreBind created (and then updated) it, for Unreserve to delete."""

    @property
    def uid(self) -> str:
        return str((self.raw.get("metadata") or {}).get("uid") or "")

    def for_node(self, pod: Pod, node_info: NodeInfo) -> tuple[Variant | None, str | None]:
        """kube's filterExtendedResources: the variant this node needs (None: none),
        or why the node cannot take the pod (UnschedulableAndUnresolvable)."""
        if self.stale:
            return None, STALE
        alloc = node_info.allocatable.scalar
        to_dra = []
        for name in self.requests:
            have = alloc.get(name)
            if self.classes.class_for(name) is not None and not have:
                to_dra.append(name)
            elif have is None:
                return None, CANNOT_FIT
        if not to_dra:
            return None, None
        key = frozenset(to_dra)
        got = self.variants.get(key)
        if got is None:
            got = self.variants[key] = self._variant(pod, sorted(to_dra))
        return got, None

    def _variant(self, pod: Pod, names: list[str]) -> Variant:
        requests, mappings = requests_and_mappings(pod, names, self.classes)
        raw = {
            **self.raw,
            "metadata": dict(self.raw.get("metadata") or {}),
            "spec": {"devices": {"requests": requests}},
        }
        return Variant(raw, ResourceClaim.from_dict(raw), mappings)

    def set_variant(self, node: str, variant: Variant | None) -> None:
        """Filter's outcome on a feasible node, for Reserve."""
        if variant is None:
            self.by_node.pop(node, None)
        else:
            self.by_node[node] = variant

    def reserve(
        self, tracker: ClaimTracker, pod: Pod, variant: Variant, alloc: AllocationResult
    ) -> str | None:
        """Reserve: the node's allocation in flight; an internal error's text if the
        made-up uid already has one."""
        if self.uid in tracker.pending:
            return (
                f"internal error, couldn't signal allocation for claim {SPECIAL_NAME}: "
                "claim already has a pending allocation"
            )
        tracker.pending[self.uid] = Pending(variant.claim, alloc, {pod.uid})
        self.reserved = (variant, alloc)
        return None

    def release(self, tracker: ClaimTracker) -> Obj | None:
        """Unreserve: the in-flight allocation dropped; the claim PreBind created, if
        any, returned for deletion."""
        if self.reserved is not None:
            tracker.pending.pop(self.uid, None)
            self.reserved = None
        created, self.created = self.created, None
        return created


def node_variant(
    ext: ExtendedClaim | None, pod: Pod, node_info: NodeInfo, plugin: str
) -> tuple[Variant | None, Status | None]:
    """:meth:`ExtendedClaim.for_node` as Filter reports it."""
    if ext is None:
        return None, None
    try:
        variant, reason = ext.for_node(pod, node_info)
    except ObjectError as e:
        return None, Status.as_error(f"extended resource claim: {e}", plugin=plugin)
    if reason is not None:
        return None, Status.unresolvable(reason, plugin=plugin)
    return variant, None


def find_extended_claim(
    pod: Pod, handle: Handle, tracker_of: Callable[[], ClaimTracker]
) -> ExtendedClaim | None:
    """kube's preFilterExtendedResources: None unless the pod requests an extended
    resource some DeviceClass serves (``tracker_of``: the plugin's tracker, asked for
    only then)."""
    scalar = pod.requests.scalar
    classes = classes_of(handle, scalar)
    if not classes.backed(scalar):
        return None
    store, tracker = handle.store, tracker_of()
    requests = {n: q for n, q in scalar.items() if q and is_dra_extended_resource_name(n)}
    for raw in store.list(CLAIM, pod.namespace):
        if _is_pods_extended_claim(pod, raw):
            current = tracker.get_claim(pod.namespace, str(raw["metadata"]["name"])) or raw
            return ExtendedClaim(current, requests, classes, stale=True)
    meta = {
        "namespace": pod.namespace,
        "name": SPECIAL_NAME,
        "uid": f"{SPECIAL_NAME}/{pod.uid}",
        "generateName": f"{pod.name}-extended-resources-",
        "ownerReferences": [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": pod.name,
                "uid": pod.uid,
                "controller": True,
            }
        ],
        "annotations": {EXTENDED_RESOURCE_CLAIM_ANNOTATION: "true"},
    }
    raw = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {},
    }
    return ExtendedClaim(raw, requests, classes)


def _is_pods_extended_claim(pod: Pod, raw: Obj) -> bool:
    meta = raw.get("metadata") or {}
    if (meta.get("annotations") or {}).get(EXTENDED_RESOURCE_CLAIM_ANNOTATION) != "true":
        return False
    return any(
        isinstance(ref, Mapping)
        and ref.get("name") == pod.name
        and ref.get("controller") is True
        and ref.get("uid") == pod.uid
        for ref in meta.get("ownerReferences") or ()
    )


# -- requests and mappings (kube's createRequestsAndMappings) ------------------------------------
def _container_requests(c: Mapping[str, Any]) -> dict[str, Any]:
    """``resources.requests`` as the API server defaults them (from the limits)."""
    res = c.get("resources") or {}
    out = dict(res.get("limits") or {})
    out.update(res.get("requests") or {})
    return out


def _count(q: object) -> int:
    """kube's Quantity.AsInt64: 0 when not a whole number."""
    try:
        got = parse_quantity(q)  # type: ignore[arg-type]
    except QuantityError:
        return 0
    return int(got) if got.denominator == 1 else 0


def _container_request(
    index: int,
    c: Mapping[str, Any],
    resource: str,
    class_name: str,
    reusable: list[dict[str, Any] | None],
) -> tuple[dict[str, Any] | None, list[dict[str, str]]]:
    """One container's request for ``resource`` (None when it asks none or the
    ``reusable`` requests of later long-lived containers cover it) and its mappings."""
    creqs = _container_requests(c)
    if resource not in creqs:
        return None, []
    want = _count(creqs[resource])
    if want == 0:
        return None, []
    cname = str(c.get("name") or "")
    mappings: list[dict[str, str]] = []
    covered = 0
    for r in reusable:
        if r is None:
            continue
        covered += int(r["exactly"]["count"])
        mappings.append(
            {"containerName": cname, "resourceName": resource, "requestName": r["name"]}
        )
        if covered >= want:
            return None, mappings
    name = f"container-{index}-request-{sorted(creqs).index(resource)}"
    request = {
        "name": name,
        "exactly": {
            "deviceClassName": class_name,
            "allocationMode": "ExactCount",
            "count": want - covered,
        },
    }
    mappings.append({"containerName": cname, "resourceName": resource, "requestName": name})
    return request, mappings


def requests_and_mappings(
    pod: Pod, resources: list[str], classes: ExtendedResourceClasses
) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """The implicit claim's requests (sorted by name) and the pod's request mappings.

    Containers are numbered init containers first. Long-lived ones (regular and sidecar)
    each get their own request; a non-sidecar init container first reuses the requests of
    long-lived containers after it and asks only for the rest; of those init requests
    only the largest is kept, and every init mapping points at it."""
    inits = [c for c in pod.spec.get("initContainers") or () if isinstance(c, Mapping)]
    containers = inits + [c for c in pod.spec.get("containers") or () if isinstance(c, Mapping)]
    short = [i for i, c in enumerate(inits) if c.get("restartPolicy") != "Always"]
    long = [i for i in range(len(containers)) if i not in short]
    requests: list[dict[str, Any]] = []
    mappings: list[dict[str, str]] = []
    for resource in sorted(resources):
        class_name = classes.class_for(resource)
        if class_name is None:
            continue
        long_reqs: list[dict[str, Any] | None] = [None] * len(containers)
        long_maps: list[dict[str, str]] = []
        for i in long:
            long_reqs[i], got = _container_request(i, containers[i], resource, class_name, [])
            long_maps += got
        biggest: dict[str, Any] | None = None
        short_names: set[str] = set()
        short_maps: list[dict[str, str]] = []
        for i in short:
            req, got = _container_request(i, containers[i], resource, class_name, long_reqs[i:])
            if req is not None:
                short_names.add(req["name"])
                if biggest is None or biggest["exactly"]["count"] < req["exactly"]["count"]:
                    biggest = req
            short_maps += got
        if biggest is not None and len(short_names) > 1:
            short_names.discard(biggest["name"])
            for m in short_maps:
                if m["requestName"] in short_names:
                    m["requestName"] = biggest["name"]
        if biggest is not None:
            requests.append(biggest)
        requests += [r for r in long_reqs if r is not None]
        mappings += long_maps + short_maps
    requests.sort(key=lambda r: str(r["name"]))
    return requests, mappings


# -- PreBind ---------------------------------------------------------------------------------
async def bind_extended(
    cluster: ClusterPort, store: ObjectStore, tracker: ClaimTracker, pod: Pod, ext: ExtendedClaim
) -> None:
    """Create the claim, store its allocation and reservation, wait for the watch to
    bring it, then record it in the pod's status (``ClusterError`` on a failed write)."""
    assert ext.reserved is not None
    variant, alloc = ext.reserved
    body = {**variant.raw, "metadata": dict(variant.raw["metadata"])}
    for cleared in ("name", "uid"):
        body["metadata"].pop(cleared, None)
    ext.created = await cluster.create_claim(body)
    binding = {"resource": "pods", "name": pod.name, "uid": pod.uid}
    ext.created = await cluster.update_claim_status(ext.created, allocation_dict(alloc), binding)
    meta = ext.created.get("metadata") or {}
    ns, name = str(meta.get("namespace") or pod.namespace), str(meta.get("name") or "")
    await _wait_for_store(store, ns, name)
    tracker.assume(ext.created)
    await cluster.set_extended_resource_claim_status(
        pod, {"requestMappings": variant.mappings, "resourceClaimName": name}
    )


async def _wait_for_store(store: ObjectStore, namespace: str, name: str) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + ASSUME_TIMEOUT
    while store.get(CLAIM, namespace, name) is None:
        if loop.time() >= deadline:
            log.info(
                "ResourceClaim %s/%s not seen by the watch after %.0f s",
                namespace,
                name,
                ASSUME_TIMEOUT,
            )
            return
        await asyncio.sleep(ASSUME_POLL)
