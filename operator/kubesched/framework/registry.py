"""The plugin registry: name -> (Args model, factory). Duplicates are refused.

A plugin module exports ``NAME``, ``Args`` (a pydantic model whose field defaults are
kube-scheduler's; a plugin without arguments leaves it out and gets :class:`NoArgs`) and
``new(args, handle)``. In-tree plugins are registered by
``kubesched.plugins.in_tree_registry()``; out-of-tree plugins arrive through the
``kubesched.plugins`` entry-point group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from types import ModuleType
from typing import TypeVar, overload

import pydantic

from kubesched.framework.interface import Handle, Plugin

__all__ = [
    "ENTRY_POINT_GROUP",
    "DuplicatePluginError",
    "Factory",
    "NoArgs",
    "PluginSpec",
    "Registry",
]

ENTRY_POINT_GROUP = "kubesched.plugins"

ArgsT = TypeVar("ArgsT", bound=pydantic.BaseModel)

Factory = Callable[[ArgsT, Handle], Plugin]
"""A plugin module's ``new(args, handle)``: its decoded ``Args`` and the framework in,
a plugin out (whose extension points the profile compiler reads off its methods)."""


class DuplicatePluginError(ValueError):
    pass


class NoArgs(pydantic.BaseModel):
    """For plugins that take no arguments."""

    model_config = pydantic.ConfigDict(extra="forbid", defer_build=True)


@dataclass(frozen=True, slots=True)
class PluginSpec:
    name: str
    args: type[pydantic.BaseModel]
    factory: Factory[pydantic.BaseModel]
    """Takes an instance of ``args`` (as :meth:`parse_args` returns); the registry wraps
    the plugin's own factory so that any other model is refused with a TypeError."""
    source: str = ""

    def parse_args(self, raw: Mapping[str, object] | None) -> pydantic.BaseModel:
        """Validate args; raises ``pydantic.ValidationError`` with field paths."""
        return self.args.model_validate(dict(raw or {}))


class Registry:
    def __init__(self) -> None:
        self._specs: dict[str, PluginSpec] = {}

    @overload
    def register(self, name: str, factory: Factory[NoArgs], *, source: str = "") -> None: ...

    @overload
    def register(
        self, name: str, factory: Factory[ArgsT], args: type[ArgsT], *, source: str = ""
    ) -> None: ...

    def register(
        self,
        name: str,
        factory: Factory[ArgsT] | Factory[NoArgs],
        args: type[ArgsT] | type[NoArgs] = NoArgs,
        *,
        source: str = "",
    ) -> None:
        """Add a plugin; mypy checks that ``factory`` takes ``args``' model."""
        if name in self._specs:
            raise DuplicatePluginError(
                f"plugin {name!r} is already registered (by {self._specs[name].source or 'in-tree'})"
            )
        self._specs[name] = PluginSpec(name, args, _checked(name, factory, args), source)

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


def _checked(
    name: str, factory: Factory[ArgsT] | Factory[NoArgs], args: type[ArgsT] | type[NoArgs]
) -> Factory[pydantic.BaseModel]:
    """``factory`` taking any model, refusing (TypeError) one that is not ``args``'."""

    def new(parsed: pydantic.BaseModel, handle: Handle) -> Plugin:
        if not isinstance(parsed, args):
            raise TypeError(f"plugin {name!r} takes {args.__name__}, not {type(parsed).__name__}")
        # The overloads of Registry.register pair factory and args; mypy cannot
        # follow that pairing through the union.
        return factory(parsed, handle)  # type: ignore[arg-type]

    return new
