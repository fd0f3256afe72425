"""The plugin registry: name -> (Args model, factory). Duplicates are refused.

A plugin module exports ``NAME``, ``Args`` (a pydantic model whose field defaults are
kube-scheduler's; a plugin without arguments leaves it out and gets :class:`NoArgs`) and
``new(args, handle)``. In-tree plugins are registered by
``kubesched.plugins.in_tree_registry()``; out-of-tree plugins arrive through the
``kubesched.plugins`` entry-point group, loaded when the registry is first asked for a
name it lacks or for every name (:meth:`Registry.defer_entry_points`): a scheduler whose
profiles name in-tree plugins only does not read every installed package's metadata.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, TypeVar, overload

import pydantic

from kubesched.framework.interface import Handle, Plugin

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

__all__ = [
    "ENTRY_POINT_GROUP",
    "DuplicatePluginError",
    "Factory",
    "NoArgs",
    "PluginSpec",
    "Registry",
]

ENTRY_POINT_GROUP = "kubesched.plugins"

log = logging.getLogger("kubesched.profiles")  # where this failure was logged before it moved here


def entry_points(*, group: str) -> Iterable[EntryPoint]:
    """importlib.metadata's, imported on first use (its import and the scan of the
    installed packages take tens of milliseconds at start-up)."""
    from importlib import metadata

    return metadata.entry_points(group=group)


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
        self._deferred = False

    def defer_entry_points(self) -> None:
        """Load the out-of-tree plugins (:meth:`load_entry_points`) when first asked for
        a name not registered, or for every name. A broken one is logged and left out:
        it cannot stop the scheduler."""
        self._deferred = True

    def _load_deferred(self) -> None:
        if self._deferred:
            self._deferred = False
            try:
                self.load_entry_points()
            except Exception:
                log.exception("loading out-of-tree plugins failed")

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
        if name not in self._specs:
            self._load_deferred()
        return self._specs.get(name)

    def __contains__(self, name: object) -> bool:
        if name not in self._specs:
            self._load_deferred()
        return name in self._specs

    def __iter__(self) -> Iterator[str]:
        self._load_deferred()
        return iter(self._specs)

    def names(self) -> list[str]:
        self._load_deferred()
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
