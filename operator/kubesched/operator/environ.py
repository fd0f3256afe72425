"""The environment's ``KUBESCHED_<FIELD>`` variables, read onto the fields of
:class:`~kubesched.operator.settings.Settings` (or any pydantic model).

Our own small reader, in place of pydantic-settings: importing that (31 modules, with
its sources for cloud secret stores, ``.env`` files and a CLI) cost ``kubesched run``
about 20 ms of CPU on its way to the first bind, and reading the environment through it
2 ms. It reads the variables as pydantic-settings read them by default:

- ``<PREFIX><FIELD>`` in any case (``kubesched_port`` sets ``port``); of two spellings of
  one name the later in the environment wins. A variable that names no field is ignored
  (other tools' ``KUBESCHED_*``, e.g. ``KUBESCHED_CONTROLPLANE_DIR``).
- An empty variable is an empty value, not an unset one.
- A list, tuple, set, dict, model or dataclass field takes JSON (``'["a", "b"]'``),
  unless its annotation carries :class:`NoDecode` (then its validators get the text); a
  union with such a member takes JSON if the text is JSON, else the text. Every other
  field gets the text, for pydantic to convert (``"8"`` to 8, ``"false"`` to False).
- Text that is not JSON where JSON is needed is a :class:`pydantic.ValidationError` on
  that field (``Invalid JSON: ...``), worded for the user as any other bad value.

The caller puts the values it was given explicitly (the CLI's flags) over these; a
given value replaces the variable's whole, it is not merged into it.

Only the standard library is imported here: ``cli/early.py`` calls :func:`variables`
before pydantic is imported.
"""

from __future__ import annotations

import collections
import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel
    from pydantic.fields import FieldInfo

__all__ = ["ENV_PREFIX", "NoDecode", "read", "variables"]

ENV_PREFIX = "KUBESCHED_"
"""The prefix of the variables of ``kubesched run``'s settings."""


class NoDecode:
    """Field metadata (``Annotated[list[str], NoDecode]``): the variable's text goes to the
    field's validators as it is, never decoded as JSON (a comma-separated list, say)."""


def variables(environ: Mapping[str, str], prefix: str) -> dict[str, tuple[str, str]]:
    """The variables whose name starts with ``prefix`` in any case, by the rest of the
    name in lower case: (the name as it is set, its value). Of two spellings of one name,
    the later in ``environ`` wins."""
    low_prefix = prefix.lower()
    found: dict[str, tuple[str, str]] = {}
    for name, value in environ.items():
        low = name.lower()
        if low.startswith(low_prefix):
            found[low[len(low_prefix) :]] = (name, value)
    return found


def read(model: type[BaseModel], prefix: str, environ: Mapping[str, str]) -> dict[str, Any]:
    """The values the variables give ``model``'s fields, by field name, for the model to
    validate (see the module's docstring). Raises :class:`pydantic.ValidationError` for a
    variable that is not JSON where its field needs JSON."""
    found = variables(environ, prefix)
    values: dict[str, Any] = {}
    for field, info in model.model_fields.items():
        if (hit := found.get(field.lower())) is not None:
            values[field] = _decode(model, field, info, hit[1])
    return values


def _decode(model: type[BaseModel], field: str, info: FieldInfo, text: str) -> Any:
    if NoDecode in info.metadata:
        return text
    annotation = _unwrap(info.annotation)
    if _takes_json(annotation):
        strict = True
    elif _is_union(annotation) and any(_takes_json(a) for a in typing.get_args(annotation)):
        strict = False  # e.g. list[str] | str: JSON if it is JSON
    else:
        return text
    import json

    try:
        return json.loads(text)
    except ValueError as e:
        if not strict:
            return text
        from pydantic import ValidationError

        raise ValidationError.from_exception_data(
            model.__name__,
            [{"type": "json_invalid", "loc": (field,), "input": text, "ctx": {"error": str(e)}}],
        ) from None


def _unwrap(annotation: Any) -> Any:
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    return annotation


def _is_union(annotation: Any) -> bool:
    return typing.get_origin(annotation) in (typing.Union, types.UnionType)


_CONTAINERS = (Mapping, Sequence, tuple, set, frozenset, collections.deque)


def _takes_json(annotation: Any) -> bool:
    """A container (not a string), a pydantic model or a dataclass, or a generic of one."""
    from pydantic import BaseModel

    annotation = _unwrap(annotation)
    t = typing.get_origin(annotation) or annotation  # list[str]: list
    if not isinstance(t, type) or issubclass(t, (str, bytes)):
        return False  # a Literal, a union, a string
    return issubclass(t, (*_CONTAINERS, BaseModel)) or dataclasses.is_dataclass(t)
