"""DynamicResources on a real kube-apiserver 1.37, kube-scheduler 1.37 beside kubesched.

The test is the DRA driver: it publishes the ResourceSlices (no kubelet, no driver
process), a DeviceClass selecting its devices by CEL, and a ResourceClaimTemplate; the
real resourceclaim controller (kube-controller-manager) makes each pod's claim from the
template. Each scheduler gets a set of fresh objects of its own (two nodes, the second
with a slice of two devices, pods selecting that set's nodes; both sets exist before
either scheduler runs, so both see the same cluster), and then:

* a pod with a claim from the template is bound to the node with the devices, its claim
  allocated there (``status.allocation``: same request, driver, device as kube-scheduler
  chooses; pool and node selector that set's node) and reserved for the pod, with the
  delete-protection finalizer;
* two more such pods created at once: one gets the second device, never the first pod's;
  the other is Unschedulable with the very message kube-scheduler writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest

from tests.controlplane import ApiError, ControlPlane
from tests.e2e import support
from tests.e2e.support import JSON, call, local_settings, running

pytestmark = pytest.mark.timeout(300)


async def eventually(check: Callable[[], Any], *, what: str) -> Any:
    """:func:`support.eventually`, 60 s (claims take a controller)."""
    return await support.eventually(check, within=60.0, what=what)


NS = "dra"
DRIVER = "gpu.e2e.kubesched.dev"
CLASS = "e2e-gpu"
TEMPLATE = "one-gpu"
SET_LABEL = "e2e.kubesched.dev/dra-set"
KUBE_SCHEDULER = "kube-scheduler-dra"
KUBESCHED = "kubesched"
RESOURCE = "resource.k8s.io/v1"
FINALIZER = "resource.kubernetes.io/delete-protection"


@pytest.fixture
def cp(controlplane_factory: Callable[..., ControlPlane]) -> Iterator[ControlPlane]:
    plane = controlplane_factory()
    plane.ensure_namespace(NS)
    plane.start_controller_manager(["resourceclaim-controller"])
    plane.api.create(
        {
            "apiVersion": RESOURCE,
            "kind": "DeviceClass",
            "metadata": {"name": CLASS},
            "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
        }
    )
    plane.api.create(
        {
            "apiVersion": RESOURCE,
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": TEMPLATE, "namespace": NS},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpu", "exactly": {"deviceClassName": CLASS}}]
                    }
                }
            },
        }
    )
    plane.start_kube_scheduler(
        {
            "apiVersion": "kubescheduler.config.k8s.io/v1",
            "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": KUBE_SCHEDULER}],
        }
    )
    yield plane


@contextlib.asynccontextmanager
async def kubesched(cp: ControlPlane) -> AsyncIterator[None]:
    async with running(local_settings(cp.kubeconfig, scheduler_names=[KUBESCHED])):
        yield


def publish_set(cp: ControlPlane, name: str) -> str:
    """Two nodes labelled ``name``; the driver publishes two devices on the second one."""
    _, with_devices = cp.create_nodes(2, prefix=f"{name}-node-", labels={SET_LABEL: name})
    cp.api.create(
        {
            "apiVersion": RESOURCE,
            "kind": "ResourceSlice",
            "metadata": {"name": f"{with_devices}-{DRIVER}"},
            "spec": {
                "driver": DRIVER,
                "nodeName": with_devices,
                "pool": {"name": with_devices, "generation": 1, "resourceSliceCount": 1},
                "devices": [
                    {"name": f"gpu-{i}", "attributes": {"index": {"int": i}}} for i in range(2)
                ],
            },
        }
    )
    return with_devices


def create_pod(cp: ControlPlane, name: str, scheduler: str, set_name: str) -> None:
    cp.create_pod(
        name,
        namespace=NS,
        scheduler_name=scheduler,
        spec={
            "nodeSelector": {SET_LABEL: set_name},
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": TEMPLATE}],
            "containers": [
                {
                    "name": "pause",
                    "image": "registry.k8s.io/pause:3.10",
                    "resources": {"requests": {"cpu": "100m"}, "claims": [{"name": "gpu"}]},
                }
            ],
        },
    )


def read_pod(cp: ControlPlane, name: str) -> JSON:
    return dict(cp.api.read("v1", "Pod", name, NS))


def claim_of(cp: ControlPlane, pod: str) -> JSON | None:
    """The claim the resourceclaim controller made for the pod (named in its status)."""
    statuses = read_pod(cp, pod).get("status", {}).get("resourceClaimStatuses") or []
    name = next((s.get("resourceClaimName") for s in statuses if s["name"] == "gpu"), None)
    if not name:
        return None
    try:
        return dict(cp.api.read(RESOURCE, "ResourceClaim", name, NS))
    except ApiError as e:
        if e.status == 404:
            return None
        raise


def unschedulable_message(cp: ControlPlane, pod: str) -> str | None:
    for c in read_pod(cp, pod).get("status", {}).get("conditions") or ():
        if c["type"] == "PodScheduled" and c["status"] == "False":
            return str(c.get("message") or "")
    return None


async def allocated(cp: ControlPlane, pod: str) -> tuple[str, JSON]:
    """(node, claim) once the pod is bound and its claim allocated and reserved for it."""

    def done() -> tuple[str, JSON] | None:
        node = read_pod(cp, pod)["spec"].get("nodeName")
        claim = claim_of(cp, pod)
        status = (claim or {}).get("status") or {}
        if node and claim and status.get("allocation") and status.get("reservedFor"):
            return str(node), claim
        return None

    out: tuple[str, JSON] = await eventually(done, what=f"{pod} bound, its claim allocated")
    return out


def devices(claim: JSON, node: str) -> list[JSON]:
    """The allocation's device results, the set's node name replaced by ``NODE``."""
    results = claim["status"]["allocation"]["devices"]["results"]
    return [{k: ("NODE" if v == node else v) for k, v in r.items()} for r in results]


async def schedule(cp: ControlPlane, scheduler: str, set_name: str, node: str) -> JSON:
    """The DRA story for one scheduler on fresh objects; what a user sees, comparable."""
    first = f"{set_name}-first"
    await call(create_pod, cp, first, scheduler, set_name)
    bound, claim = await allocated(cp, first)
    assert bound == node
    alloc = claim["status"]["allocation"]
    terms = alloc["nodeSelector"]["nodeSelectorTerms"]
    assert terms == [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}
    ]
    assert alloc.get("allocationTimestamp")
    (reserved,) = claim["status"]["reservedFor"]
    assert (reserved["resource"], reserved["name"]) == ("pods", first)
    assert FINALIZER in claim["metadata"]["finalizers"]
    others = [f"{set_name}-second", f"{set_name}-third"]
    for name in others:
        await call(create_pod, cp, name, scheduler, set_name)

    def settled() -> tuple[str, str] | None:
        bound = [p for p in others if read_pod(cp, p)["spec"].get("nodeName")]
        pending = [(p, unschedulable_message(cp, p)) for p in others if p not in bound]
        if len(bound) == 1 and len(pending) == 1 and pending[0][1]:
            return bound[0], str(pending[0][1])
        return None

    second, message = await eventually(settled, what="one more pod bound, one Unschedulable")
    _, second_claim = await allocated(cp, second)
    first_devices, second_devices = devices(claim, node), devices(second_claim, node)
    assert first_devices != second_devices, "two pods got the same device"
    await asyncio.sleep(2)  # nothing else happens: the third pod stays pending
    assert not any(read_pod(cp, p)["spec"].get("nodeName") for p in others if p != second)
    return {"first": first_devices, "second": second_devices, "message": message}


async def test_kubesched_allocates_devices_as_kube_scheduler(
    cp: ControlPlane, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    # both sets first: each scheduler sees the same four nodes and two slices
    nodes = {name: await call(publish_set, cp, name) for name in ("ks", "kubesched")}
    upstream = await schedule(cp, KUBE_SCHEDULER, "ks", nodes["ks"])
    async with kubesched(cp):
        ours = await schedule(cp, KUBESCHED, "kubesched", nodes["kubesched"])
    assert upstream["first"] == [
        {"request": "gpu", "driver": DRIVER, "pool": "NODE", "device": "gpu-0"}
    ], upstream
    assert ours == upstream
    assert upstream["message"].startswith(
        "0/4 nodes are available: 2 cannot allocate all claims, 2 node(s) didn't match "
    ), upstream["message"]
