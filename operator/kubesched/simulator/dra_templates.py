"""DRA objects of the benchmark workloads, modelled on scheduler_perf's ``dra/templates``
(v1.37.2): its DeviceClass ``test-class`` (a CEL selector on the driver), a
ResourceClaimTemplate with one request of that class, one ResourceSlice per node (a pool
of its own, ``resourceslice-basic-devices``: an Intel-GPU-like device with 13 attributes
and 2 capacities), and pods claiming a device from the template. Pure data.
"""

from __future__ import annotations

from typing import Any

from kubesched.simulator.templates import pod

__all__ = [
    "CLAIM_TEMPLATE",
    "DEVICE_CLASS",
    "DRIVER",
    "claim_template",
    "device_class",
    "pod_with_claim",
    "resource_slice",
]

DRIVER = "test-driver.cdi.k8s.io"
DEVICE_CLASS = "test-class"
CLAIM_TEMPLATE = "test-claim-template"
PCI_ROOTS = 2


def device_class(name: str = DEVICE_CLASS) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f'device.driver == "{DRIVER}"'}}]},
    }


def claim_template(name: str = CLAIM_TEMPLATE, requests: int = 1) -> dict[str, Any]:
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {"name": f"req-{i}", "exactly": {"deviceClassName": DEVICE_CLASS}}
                        for i in range(requests)
                    ]
                }
            }
        },
    }


def _device(i: int) -> dict[str, Any]:
    root = i % PCI_ROOTS
    return {
        "name": f"basic-device-{i}",
        "attributes": {
            "driver": {"string": "xe"},
            "driverVersion": {"version": "1.2.3"},
            "resource.k8s.io/pciRoot": {"string": str(root)},
            "family": {"string": "Arc Pro B-Series"},
            "health": {"string": "Healthy"},
            "model": {"string": "B60"},
            "pciAddress": {"string": f"0000:0{i}:00.0"},
            "pciId": {"string": "0xe211"},
            "pciRoot": {"string": f"0{root}"},
            "resource.kubernetes.io/pciBusID": {"string": f"0000:0{i}:00.0"},
            "resource.kubernetes.io/pciRoot": {"string": f"pci0000:0{root}"},
            "sriov": {"bool": True},
            "type": {"string": "gpu"},
        },
        "capacity": {"memory": {"value": "24480Mi"}, "millicores": {"value": "1k"}},
    }


def resource_slice(index: int, node_name: str, devices: int = 8) -> dict[str, Any]:
    """The devices a driver publishes for one node: one slice, one pool of its own."""
    name = f"resourceslice-{index}"
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": name},
        "spec": {
            "pool": {"name": name, "generation": 1, "resourceSliceCount": 1},
            "driver": DRIVER,
            "nodeName": node_name,
            "devices": [_device(i) for i in range(devices)],
        },
    }


def pod_with_claim(name: str, role: str, template: str = CLAIM_TEMPLATE) -> dict[str, Any]:
    """scheduler_perf's ``pod-with-claim-template``: a pause pod (pod-default's requests)
    whose container uses one claim made from ``template``."""
    obj = pod(
        name, role, resourceClaims=[{"name": "resource", "resourceClaimTemplateName": template}]
    )
    obj["spec"]["containers"][0]["resources"]["claims"] = [{"name": "resource"}]
    return obj
