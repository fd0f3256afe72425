"""Raw resource.k8s.io/v1 objects for the DRA tests (dicts, as they come off the wire)."""

from __future__ import annotations

from typing import Any

DRIVER = "gpu.example.com"


class Node:
    def __init__(self, name: str = "node-1", labels: dict[str, str] | None = None) -> None:
        self.name = name
        self.labels = labels or {}


def device(name: str, **attrs: Any) -> dict[str, Any]:
    """A device; keyword attributes become typed attributes (int/bool/string)."""
    out: dict[str, Any] = {"name": name, "attributes": {}}
    for k, v in attrs.items():
        kind = "bool" if isinstance(v, bool) else "int" if isinstance(v, int) else "string"
        out["attributes"][k] = {kind: v}
    return out


def slice_(
    name: str = "slice-1",
    devices: list[dict[str, Any]] | None = None,
    *,
    node: str | None = "node-1",
    pool: str | None = None,
    driver: str = DRIVER,
    generation: int = 1,
    count: int = 1,
    **spec: Any,
) -> dict[str, Any]:
    s: dict[str, Any] = {
        "driver": driver,
        "pool": {
            "name": pool or node or "pool",
            "generation": generation,
            "resourceSliceCount": count,
        },
        "devices": devices if devices is not None else [],
        **spec,
    }
    if node is not None:
        s["nodeName"] = node
    return {"metadata": {"name": name}, "spec": s}


def gpus(n: int, node: str = "node-1", **attrs: Any) -> dict[str, Any]:
    return slice_(f"{node}-gpus", [device(f"gpu-{i}", **attrs) for i in range(n)], node=node)


def device_class(
    name: str = "gpu", *selectors: str, config: list[Any] | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": e}} for e in selectors]}
    if config:
        spec["config"] = config
    return {"metadata": {"name": name}, "spec": spec}


def exactly(
    name: str = "req", cls: str = "gpu", count: int | None = None, **kw: Any
) -> dict[str, Any]:
    ex: dict[str, Any] = {"deviceClassName": cls, **kw}
    if count is not None:
        ex["count"] = count
    if "selectors" in ex:
        ex["selectors"] = [{"cel": {"expression": e}} for e in ex["selectors"]]
    return {"name": name, "exactly": ex}


def claim(name: str = "claim", *requests: dict[str, Any], **devices: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
        "spec": {"devices": {"requests": list(requests) or [exactly()], **devices}},
    }
