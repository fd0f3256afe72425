"""Extended resources backed by DRA (KEP-5004, DRAExtendedResource: GA and locked on in
kube-scheduler 1.37): which DeviceClass serves a pod's extended resource request.

A DeviceClass serves two names: ``deviceclass.resource.kubernetes.io/<class>`` always
(the implicit name), and ``spec.extendedResourceName`` when set. Two classes naming the
same extended resource: the newer (``metadata.creationTimestamp``) wins, on a tie the
lower name, as kube-scheduler's extended resource cache decides (it follows the watch
events; this table is computed from the classes as they are, which is the state those
events lead to).

NodeResourcesFit leaves such a request to DynamicResources on a node that advertises
none of it in allocatable (``allocatable == 0``); DynamicResources then allocates it
as an implicit claim (see ``plugins/dynamic_resources/extended.py``).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from kubesched.framework.cluster_port import ObjectStore
from kubesched.framework.helpers import is_extended_resource_name
from kubesched.framework.interface import Handle

__all__ = [
    "DEVICE_CLASS_PREFIX",
    "EXTENDED_RESOURCE_CLAIM_ANNOTATION",
    "ExtendedResourceClasses",
    "classes_in",
    "classes_of",
    "extended_resource_classes",
    "is_dra_extended_resource_name",
]

DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
"""resource.k8s.io/v1 ResourceDeviceClassPrefix: the implicit name of every class."""
EXTENDED_RESOURCE_CLAIM_ANNOTATION = "resource.kubernetes.io/extended-resource-claim"
"""The annotation (value ``"true"``) on the claim kube-scheduler creates for them."""

_EPOCH = datetime.fromtimestamp(0).astimezone()


def is_dra_extended_resource_name(name: str) -> bool:
    """kube's IsDRAExtendedResourceName: an extended resource name, or an implicit one."""
    return is_extended_resource_name(name) or name.startswith(DEVICE_CLASS_PREFIX)


@dataclass(frozen=True, slots=True)
class ExtendedResourceClasses:
    """Extended resource name -> the name of the DeviceClass that serves it."""

    by_resource: Mapping[str, str]

    def class_for(self, resource: str) -> str | None:
        return self.by_resource.get(resource)

    def backed(self, requests: Mapping[str, int]) -> frozenset[str]:
        """The names among non-zero ``requests`` a class serves."""
        if not self.by_resource:
            return frozenset()
        return frozenset(
            name
            for name, q in requests.items()
            if q and name in self.by_resource and is_dra_extended_resource_name(name)
        )


def _created(meta: Mapping[str, Any]) -> datetime:
    raw = meta.get("creationTimestamp")
    if not isinstance(raw, str) or not raw:
        return _EPOCH
    try:
        got = datetime.fromisoformat(raw)
    except ValueError:
        return _EPOCH
    return got if got.tzinfo is not None else got.astimezone()


def extended_resource_classes(classes: Iterable[Mapping[str, Any]]) -> ExtendedResourceClasses:
    """The table for these DeviceClasses (raw dicts; a class without a name is skipped,
    an ``extendedResourceName`` that is not a string is ignored)."""
    out: dict[str, str] = {}
    explicit: dict[str, tuple[datetime, str]] = {}
    for raw in classes:
        meta = raw.get("metadata") or {}
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not isinstance(name, str) or not name:
            continue
        out[DEVICE_CLASS_PREFIX + name] = name
        spec = raw.get("spec") or {}
        ext = spec.get("extendedResourceName") if isinstance(spec, Mapping) else None
        if not isinstance(ext, str) or not ext:
            continue
        created = _created(meta)
        held = explicit.get(ext)
        if held is not None and (created < held[0] or (created == held[0] and name >= held[1])):
            continue
        explicit[ext] = (created, name)
    for ext, (_, name) in explicit.items():
        out[ext] = name
    return ExtendedResourceClasses(out)


NO_CLASSES = ExtendedResourceClasses({})


def classes_of(handle: Handle, requests: Mapping[str, int]) -> ExtendedResourceClasses:
    """The table of ``handle``'s store, or none without a scalar request (nothing to look
    up) or without a store (a framework built without one, e.g. for a dry run)."""
    if not requests:
        return NO_CLASSES
    try:
        store = handle.store
    except RuntimeError:
        return NO_CLASSES
    return classes_in(store)


_CACHE: dict[int, tuple[weakref.ref[Any], list[Any], ExtendedResourceClasses]] = {}


def classes_in(store: ObjectStore) -> ExtendedResourceClasses:
    """The table for the DeviceClasses ``store`` holds, recomputed only when one of them
    changed (the store hands out a new dict for a changed object)."""
    current = list(store.list("DeviceClass"))
    key = id(store)
    got = _CACHE.get(key)
    if (
        got is not None
        and got[0]() is store
        and len(got[1]) == len(current)
        and all(a is b for a, b in zip(got[1], current, strict=True))
    ):
        return got[2]
    table = extended_resource_classes(current)
    cache = _CACHE

    def forget(_: Any) -> None:
        cache.pop(key, None)

    try:
        ref = weakref.ref(store, forget)
    except TypeError:  # cannot be weakly referenced: not cached
        return table
    _CACHE[key] = (ref, current, table)
    return table
