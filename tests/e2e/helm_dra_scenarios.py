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
"""

from __future__ import annotations

from tests.e2e.helm_support import (
    POOL,
    Logs,
    Outcome,
    Scenario,
    World,
    about,
    read,
    remove_with_finalizers,
    uid,
    wait_either,
)
from tests.e2e.support import JSON, call

RESOURCE = "resource.k8s.io/v1"


def _setup(w: World, tag: str) -> tuple[str, str]:
    """The device on one of the release's nodes, its class, and a claim of it: (node,
    claim name)."""
    cp = w.cp
    nodes = cp.api.list("v1", "Node", labelSelector=f"{POOL}={w.pool[POOL]}")
    node = sorted(n["metadata"]["name"] for n in nodes)[0]
    driver, cls, claim = f"gpu-{tag}.e2e.kubesched.dev", f"gpu-{tag}", f"dra-{tag}"
    cp.api.create(
        {
            "apiVersion": RESOURCE,
            "kind": "DeviceClass",
            "metadata": {"name": cls},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{driver}"'}}]},
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


DRA_SCENARIOS: dict[str, Scenario] = {"dra": dra}
