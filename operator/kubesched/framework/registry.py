"""The plugin registry: name -> (Args model, factory). Duplicates are refused.

A plugin module exports ``NAME``, ``Args`` (a pydantic model whose field defaults are
kube-scheduler's) and ``new(args, handle)``. In-tree plugins are registered by
``kubesched.plugins.in_tree_registry()``; out-of-tree plugins arrive through the
``kubesched.plugins`` entry-point group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import ModuleType
from typing import Any

import pydantic

from kubesched.framework.interface import Handle

__all__ = ["ENTRY_POINT_GROUP", "DuplicatePluginError", "PluginSpec", "Registry"]

ENTRY_POINT_GROUP = "kubesched.plugins"

Factory = Callable[[Any, Handle], Any]


class DuplicatePluginError(ValueError):
    pass


class NoArgs(pydantic.BaseModel):
    """For plugins that take no arguments."""

    model_config = pydantic.ConfigDict(extra="forbid")


@dataclass(frozen=True, slots=True)
class PluginSpec:
    name: str
    args: type[pydantic.BaseModel]
    factory: Factory
    source: str = ""

    def parse_args(self, raw: Mapping[str, Any] | None) -> pydantic.BaseModel:
        """Validate args; raises ``pydantic.ValidationError`` with field paths."""
        return self.args.model_validate(dict(raw or {}))


class Registry:
    def __init__(self) -> None:
        self._specs: dict[str, PluginSpec] = {}

    def register(
        self,
        name: str,
        factory: Factory,
        args: type[pydantic.BaseModel] = NoArgs,
        *,
        source: str = "",
    ) -> None:
        if name in self._specs:
            raise DuplicatePluginError(
                f"plugin {name!r} is already registered (by {self._specs[name].source or 'in-tree'})"
            )
        self._specs[name] = PluginSpec(name, args, factory, source)

    def register_module(self, module: ModuleType, *, source: str = "") -> None:
        name = getattr(module, "NAME", None)
        factory = getattr(module, "new", None)
        if not isinstance(name, str) or not callable(factory):
            raise TypeError(
                f"{module.__name__}: a plugin module exports NAME and new(args, handle)"
            )
        self.register(
            name, factory, getattr(module, "Args", NoArgs), source=source or module.__name__
        )

    def load_entry_points(self) -> list[str]:
        """Register out-of-tree plugins; returns their names."""
        loaded = []
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            obj = ep.load()
            if isinstance(obj, ModuleType):
                self.register_module(obj, source=f"entry point {ep.name}")
                loaded.append(obj.NAME)
            else:
                raise TypeError(f"entry point {ep.name}: expected a plugin module")
        return loaded

    def get(self, name: str) -> PluginSpec | None:
        return self._specs.get(name)

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __iter__(self) -> Iterator[str]:
        return iter(self._specs)

    def names(self) -> list[str]:
        return sorted(self._specs)
