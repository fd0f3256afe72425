"""The DRA machinery DynamicResources runs for pods with claims, imported on first use.

DynamicResources is in every default profile, so ``kubesched run`` builds it before its
first bind; the allocator, CEL, the claim tracker and the extended-resource claims
behind it (:mod:`kubesched.framework.dra` and this package's heavy modules: ~30 ms of
imports) serve only pods with ResourceClaims or with extended resources some
DeviceClass backs. The plugin reaches them as attributes of this module: the first
attribute read imports its source module (PEP 562 ``__getattr__``) and keeps its names
here, so later reads are plain module lookups (Filter reads them once per node).
``tests/unit/test_startup_imports.py`` fails when ``kubesched run`` imports them before
scheduling again; ``tests/unit/plugins/test_dynamic_resources_machinery.py`` keeps
:data:`SOURCES` and the typed names below alike.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kubesched.framework.dra import CANNOT_ALLOCATE as CANNOT_ALLOCATE
    from kubesched.framework.dra import AllocationError as AllocationError
    from kubesched.framework.dra import AllocationTimeout as AllocationTimeout
    from kubesched.framework.dra import Allocator as Allocator
    from kubesched.framework.dra import NodeAllocationError as NodeAllocationError
    from kubesched.plugins.dynamic_resources.explain import explain_node as explain_node
    from kubesched.plugins.dynamic_resources.extended import DELETED as DELETED
    from kubesched.plugins.dynamic_resources.extended import bind_extended as bind_extended
    from kubesched.plugins.dynamic_resources.extended import (
        find_extended_claim as find_extended_claim,
    )
    from kubesched.plugins.dynamic_resources.extended import node_variant as node_variant
    from kubesched.plugins.dynamic_resources.tracker import Pending as Pending
    from kubesched.plugins.dynamic_resources.tracker import tracker_for as tracker_for

SOURCES: dict[str, tuple[str, ...]] = {
    "kubesched.framework.dra": (
        "CANNOT_ALLOCATE",
        "AllocationError",
        "AllocationTimeout",
        "Allocator",
        "NodeAllocationError",
    ),
    "kubesched.plugins.dynamic_resources.explain": ("explain_node",),
    "kubesched.plugins.dynamic_resources.extended": (
        "DELETED",
        "bind_extended",
        "find_extended_claim",
        "node_variant",
    ),
    "kubesched.plugins.dynamic_resources.tracker": ("Pending", "tracker_for"),
}
"""Each name this module hands out, by the module it comes from."""


if not TYPE_CHECKING:  # mypy reads the imports above; an unknown name stays an error

    def __getattr__(name: str) -> object:
        for source, names in SOURCES.items():
            if name in names:
                module = importlib.import_module(source)
                globals().update({n: getattr(module, n) for n in names})
                return globals()[name]
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
