"""The plugin registry: in-tree plugins and out-of-tree ones from entry points, each name
once, a refusal naming what is wrong."""

from __future__ import annotations

import types

import pydantic
import pytest

from kubesched.framework import registry as registry_module
from kubesched.framework.registry import DuplicatePluginError, Registry


# -- Registry -------------------------------------------------------------------------------------
def plugin_module(name: str, module_name: str = "") -> types.ModuleType:
    m = types.ModuleType(module_name or f"fake_{name.lower()}")
    m.NAME = name  # type: ignore[attr-defined]
    m.new = lambda args, handle: object()  # type: ignore[attr-defined]
    return m


def test_registry_refuses_duplicates_naming_who_registered_first() -> None:
    reg = Registry()
    reg.register_module(plugin_module("Foo", "first_pkg.foo"))
    with pytest.raises(
        DuplicatePluginError, match=r"'Foo' is already registered \(by first_pkg.foo\)"
    ):
        reg.register_module(plugin_module("Foo", "second_pkg.foo"))


def test_registry_refuses_a_module_without_name_or_factory() -> None:
    with pytest.raises(TypeError, match="exports NAME and new"):
        Registry().register_module(types.ModuleType("empty"))


class FakeEntryPoint:
    def __init__(self, name: str, obj: object) -> None:
        self.name = name
        self.obj = obj

    def load(self) -> object:
        return self.obj


def test_registry_loads_out_of_tree_plugins_from_entry_points(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Args(pydantic.BaseModel):
        size: int = 3

    mod = plugin_module("OutOfTree")
    mod.Args = Args  # type: ignore[attr-defined]
    seen: list[str] = []

    def entry_points(*, group: str) -> list[FakeEntryPoint]:
        seen.append(group)
        return [FakeEntryPoint("oot", mod)]

    monkeypatch.setattr(registry_module, "entry_points", entry_points)
    reg = Registry()
    assert reg.load_entry_points() == ["OutOfTree"]
    assert seen == ["kubesched.plugins"]
    spec = reg.get("OutOfTree")
    assert spec is not None and spec.source == "entry point oot"
    assert spec.parse_args({"size": 5}) == Args(size=5)


def test_an_entry_point_that_is_not_a_module_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        registry_module, "entry_points", lambda *, group: [FakeEntryPoint("bad", object())]
    )
    with pytest.raises(TypeError, match="entry point bad: expected a plugin module"):
        Registry().load_entry_points()


def test_an_entry_point_clashing_with_an_in_tree_plugin_is_refused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(
        registry_module,
        "entry_points",
        lambda *, group: [FakeEntryPoint("dup", plugin_module("NodeName"))],
    )
    reg = Registry()
    reg.register_module(plugin_module("NodeName", "kubesched.plugins.node_name"))
    with pytest.raises(DuplicatePluginError, match=r"by kubesched\.plugins\.node_name"):
        reg.load_entry_points()


def test_the_default_registry_reads_entry_points_only_for_a_name_not_in_tree(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A profile of in-tree plugins is compiled without scanning the installed packages;
    a name not in-tree loads the out-of-tree plugins once, and a broken one is logged."""
    from kubesched.profiles import default_registry

    scans: list[str] = []

    def entry_points(*, group: str) -> list[FakeEntryPoint]:
        scans.append(group)
        return [FakeEntryPoint("oot", plugin_module("OutOfTree")), FakeEntryPoint("bad", 1)]

    monkeypatch.setattr(registry_module, "entry_points", entry_points)
    reg = default_registry()
    assert reg.get("NodeResourcesFit") is not None and "TaintToleration" in reg
    assert scans == []
    assert "OutOfTree" in reg
    assert reg.get("Unknown") is None and "Unknown" not in reg.names()
    assert scans == ["kubesched.plugins"]
    assert "entry point bad: expected a plugin module" in caplog.text
