"""The DRA scenario of tests/e2e/test_helm_install.py: DynamicResources' reads and its
PreBind writes under the chart's ClusterRole.

The test is the driver: it publishes a ResourceSlice of one device on one of the
release's nodes and a DeviceClass selecting it by CEL, and creates a ResourceClaim (no
template, so no resourceclaim controller is needed); a pod using the claim must be bound
to that node, the claim allocated there and reserved for the pod. Without the write
rules the API server refuses PreBind's writes (``update resourceclaims`` for the
delete-protection finalizer, ``update resourceclaims/status``, and the synthetic
``resourceclaims/binding`` kube-apiserver checks for allocation and reservedFor
changes): the pod stays unbound and the claim unallocated.

Two more cover extended resources backed by DRA (the class also serves
``e2e.kubesched.dev/gpu-<tag>``): ``dra-extended``, a pod asking for that resource is
bound with the claim PreBind creates for it (``create resourceclaims``) and its name in
the pod's ``status.extendedResourceClaimStatus``; ``dra-extended-stale``, a claim of
that kind already owned by the pod (a PreBind that failed half-way) is deleted by
PostFilter (``delete resourceclaims``) before the pod is placed.
"""

from __future__ import annotations

from typing import Any

from tests.e2e.helm_support import (
    POOL,
    Logs,
    Outcome,
    Scenario,
    World,
    about,
    cached,
    read,
    remove_with_finalizers,
    uid,
    wait_either,
)
from tests.e2e.support import JSON, call

RESOURCE = "resource.k8s.io/v1"


def _setup(w: World, tag: str, *, claim_too: bool = True) -> tuple[str, str]:
    """The device on one of the release's nodes, its class (serving the extended
    resource :func:`_resource`), and a claim of it: (node, claim name)."""
    cp = w.cp
    nodes = cp.api.list("v1", "Node", labelSelector=f"{POOL}={w.pool[POOL]}")
    node = sorted(n["metadata"]["name"] for n in nodes)[0]
    driver, cls, claim = f"gpu-{tag}.e2e.kubesched.dev", f"gpu-{tag}", f"dra-{tag}"
    cp.api.create(
        {
            "apiVersion": RESOURCE,
            "kind": "DeviceClass",
            "metadata": {"name": cls},
            "spec": {
                "extendedResourceName": _resource(tag),
                "selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}],
            },
        }
    )
    w.cleanup.append(lambda: cp.api.remove(RESOURCE, "DeviceClass", cls))
    cp.api.create(
        {
            "apiVersion": RESOURCE,
            "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{driver}"},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                "devices": [{"name": "gpu-0"}],
            },
        }
    )
    w.cleanup.append(lambda: cp.api.remove(RESOURCE, "ResourceSlice", f"{node}-{driver}"))
    if not claim_too:
        return node, claim
    cp.api.create(
        {
            "apiVersion": RESOURCE,
            "kind": "ResourceClaim",
            "metadata": {"name": claim, "namespace": w.ns},
            "spec": {
                "devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": cls}}]}
            },
        }
    )
    # allocated, it carries the delete-protection finalizer no controller here removes
    w.cleanup.append(lambda: remove_with_finalizers(cp, RESOURCE, "ResourceClaim", claim, w.ns))
    return node, claim


async def dra(w: World, logs: Logs, forbidden: str | None) -> Outcome:
    """A pod with a ResourceClaim: bound to the node with the device, the claim allocated
    there and reserved for the pod."""
    tag = uid()
    node, claim = await call(_setup, w, tag)
    name = claim  # the pod is named as its claim: a 403 line names either
    await call(
        w.pod,
        name,
        resourceClaims=[{"name": "gpu", "resourceClaimName": claim}],
    )

    def status() -> JSON:
        return dict((read(w.cp, RESOURCE, "ResourceClaim", claim, w.ns) or {}).get("status") or {})

    def allocated() -> bool:
        st = status()
        reserved = [r.get("name") for r in st.get("reservedFor") or ()]
        return w.bound(name) == node and bool(st.get("allocation")) and reserved == [name]

    out = await wait_either(
        allocated,
        logs,
        about(name, forbidden),
        f"{name} bound to {node}, its claim allocated and reserved",
        diagnose=lambda: (w.bound(name), status()),
    )
    if not out.ok:
        assert not await call(w.bound, name), f"{name} was bound without its device"
        assert not (await call(status)).get("allocation")
    return out


def _resource(tag: str) -> str:
    return f"e2e.kubesched.dev/gpu-{tag}"


def _gpu_pod(w: World, name: str, tag: str, **spec: Any) -> JSON:
    container = {
        "name": "pause",
        "image": "registry.k8s.io/pause:3.10",
        "resources": {
            "requests": {"cpu": "100m", _resource(tag): "1"},
            "limits": {_resource(tag): "1"},
        },
    }
    return w.pod(name, containers=[container], **spec)


def _extended_claims(w: World, pod: str) -> list[JSON]:
    return [
        c
        for c in w.cp.api.list(RESOURCE, "ResourceClaim", namespace=w.ns)
        if any(r.get("name") == pod for r in c["metadata"].get("ownerReferences") or ())
    ]


async def dra_extended(w: World, logs: Logs, forbidden: str | None) -> Outcome:
    """A pod asking for the extended resource: bound to the node with the device, the
    claim PreBind created allocated there and named in the pod's status."""
    tag = uid()
    node, _ = await call(_setup, w, tag, claim_too=False)
    name = f"dra-ext-{tag}"
    await call(_gpu_pod, w, name, tag)
    w.cleanup.append(lambda: _remove_claims(w, name))

    def done() -> bool:
        pod = w.read_pod(name) or {}
        st = (pod.get("status") or {}).get("extendedResourceClaimStatus") or {}
        claims = _extended_claims(w, name)
        return (
            w.bound(name) == node
            and len(claims) == 1
            and bool((claims[0].get("status") or {}).get("allocation"))
            and st.get("resourceClaimName") == claims[0]["metadata"]["name"]
        )

    out = await wait_either(
        done,
        logs,
        about(name, forbidden),
        f"{name} bound to {node} with its extended resource claim",
        diagnose=lambda: (w.bound(name), _extended_claims(w, name)),
    )
    if not out.ok:
        assert not await call(w.bound, name), f"{name} was bound without its device"
    return out


async def dra_extended_stale(w: World, logs: Logs, forbidden: str | None) -> Outcome:
    """A pod whose extended resource claim from an earlier attempt is still there: the
    scheduler deletes it (PostFilter), and a fresh one is made."""
    tag = uid()
    await call(_setup, w, tag, claim_too=False)
    name = f"dra-stale-{tag}"
    pod = await call(_gpu_pod, w, name, tag, schedulingGates=[{"name": "e2e.kubesched.dev/hold"}])
    stale = f"{name}-extended-resources-old"
    await call(
        w.cp.api.create,
        {
            "apiVersion": RESOURCE,
            "kind": "ResourceClaim",
            "metadata": {
                "name": stale,
                "namespace": w.ns,
                "annotations": {"resource.kubernetes.io/extended-resource-claim": "true"},
                "ownerReferences": [
                    {
                        "apiVersion": "v1",
                        "kind": "Pod",
                        "name": name,
                        "uid": pod["metadata"]["uid"],
                        "controller": True,
                    }
                ],
            },
            "spec": {"devices": {"requests": [_request(tag)]}},
        },
    )
    w.cleanup.append(lambda: _remove_claims(w, name))
    # Its watch and the pods' keep no order between them: were the gate's lifting seen
    # first, the pod would be scheduled with a fresh claim, as kube-scheduler would.
    await cached(w, "ResourceClaim", stale)
    await call(
        w.cp.api.patch, w.cp.api.path("v1", "Pod", name, w.ns), {"spec": {"schedulingGates": None}}
    )

    def gone() -> bool:
        return read(w.cp, RESOURCE, "ResourceClaim", stale, w.ns) is None

    return await wait_either(
        gone, logs, about(stale, forbidden), f"{stale} deleted", diagnose=lambda: w.bound(name)
    )


def _request(tag: str) -> JSON:
    return {
        "name": "container-0-request-1",
        "exactly": {"deviceClassName": f"gpu-{tag}", "count": 1},
    }


def _remove_claims(w: World, pod: str) -> None:
    for c in _extended_claims(w, pod):
        remove_with_finalizers(w.cp, RESOURCE, "ResourceClaim", c["metadata"]["name"], w.ns)


DRA_SCENARIOS: dict[str, Scenario] = {
    "dra": dra,
    "dra-extended": dra_extended,
    "dra-extended-stale": dra_extended_stale,
}
