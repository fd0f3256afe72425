"""Which DeviceClass serves an extended resource (DRAExtendedResource, GA in 1.37)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.framework.dra.extended import (
    classes_in,
    extended_resource_classes,
    is_dra_extended_resource_name,
)
from tests.unit.plugins.fakes import FakeStore


def cls(name: str, ext: str | None = None, created: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if created is not None:
        meta["creationTimestamp"] = created
    spec: dict[str, Any] = {"selectors": []}
    if ext is not None:
        spec["extendedResourceName"] = ext
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": meta,
        "spec": spec,
    }


@pytest.mark.parametrize(
    ("classes", "expected"),
    [
        pytest.param([], {}, id="none"),
        pytest.param(
            [cls("gpu")],
            {"deviceclass.resource.kubernetes.io/gpu": "gpu"},
            id="implicit-name-only",
        ),
        pytest.param(
            [cls("gpu", "example.com/gpu")],
            {"deviceclass.resource.kubernetes.io/gpu": "gpu", "example.com/gpu": "gpu"},
            id="explicit-and-implicit",
        ),
        pytest.param(
            [
                cls("new", "example.com/gpu", "2026-01-02T00:00:00Z"),
                cls("old", "example.com/gpu", "2026-01-01T00:00:00Z"),
            ],
            {
                "deviceclass.resource.kubernetes.io/new": "new",
                "deviceclass.resource.kubernetes.io/old": "old",
                "example.com/gpu": "new",
            },
            id="newer-class-wins",
        ),
        pytest.param(
            [
                cls("b", "example.com/gpu", "2026-01-01T00:00:00Z"),
                cls("a", "example.com/gpu", "2026-01-01T00:00:00Z"),
            ],
            {
                "deviceclass.resource.kubernetes.io/a": "a",
                "deviceclass.resource.kubernetes.io/b": "b",
                "example.com/gpu": "a",
            },
            id="same-time-lower-name-wins",
        ),
        pytest.param(
            [{"metadata": {}}, {"metadata": {"name": "x"}, "spec": {"extendedResourceName": 3}}],
            {"deviceclass.resource.kubernetes.io/x": "x"},
            id="malformed-fields-ignored",
        ),
    ],
)
def test_table(classes: list[dict[str, Any]], expected: dict[str, str]) -> None:
    assert dict(extended_resource_classes(classes).by_resource) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("example.com/gpu", True),
        ("deviceclass.resource.kubernetes.io/gpu", True),
        ("cpu", False),
        ("kubernetes.io/something", False),
        ("hugepages-2Mi", False),
    ],
)
def test_dra_extended_resource_name(name: str, expected: bool) -> None:
    assert is_dra_extended_resource_name(name) is expected


def test_backed_keeps_non_zero_requests_a_class_serves() -> None:
    table = extended_resource_classes([cls("gpu", "example.com/gpu")])
    reqs = {"example.com/gpu": 2, "example.com/nic": 1, "deviceclass.resource.kubernetes.io/gpu": 0}
    assert table.backed(reqs) == {"example.com/gpu"}


def test_store_table_follows_class_changes() -> None:
    store = FakeStore(cls("gpu"))
    first = classes_in(store)
    assert classes_in(store) is first, "unchanged classes: the same table"
    store.add(cls("gpu", "example.com/gpu"))
    assert classes_in(store).class_for("example.com/gpu") == "gpu"
