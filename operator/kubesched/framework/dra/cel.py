"""CEL device selectors: the environment of k8s.io/dynamic-resource-allocation/cel.

Built on cel-expr-python (Google's C++ CEL runtime). ``device`` is a map with
``driver``, ``allowMultipleAllocations``, ``attributes[domain][id]`` and
``capacity[domain][id]``; an unqualified name belongs to the driver's domain. The
Kubernetes quantity and semver libraries are registered as Python functions. The runtime
cannot return opaque types from Python, so a quantity is the map
``{"kubernetes.Quantity": "<num>/<den>"}`` and a version ``{"kubernetes.Semver": "x.y.z"}``
(build metadata dropped): ``==`` between them keeps Kubernetes' meaning (same value,
same precedence), and the member functions check at run time which one they got.

Errors keep kube's texts where the allocator shows them: ``compilation failed: ERROR:
<input>:1:5: ...`` and runtime ``no such key: model`` (plus the optional-chaining hint,
as ``cel.EnhanceRuntimeError`` adds). A domain missing on a device is an empty map, as
upstream's map-with-default makes it, for domains the expression names literally.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from fractions import Fraction
from functools import lru_cache
from typing import Any

from cel_expr_python import cel
from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings

from kubesched.framework.dra import cel_libs, semver
from kubesched.framework.dra.cel_libs import CelValue
from kubesched.framework.dra.types import Device
from kubesched.framework.quantity import QuantityError, parse_quantity

__all__ = [
    "CelCache",
    "CelRuntimeError",
    "CompiledSelector",
    "device_input",
    "enhance_runtime_error",
]

_Q = "kubernetes.Quantity"
_S = "kubernetes.Semver"
_QUANTITY_FORMAT = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)
_INT64 = (-(2**63), 2**63 - 1)


class CelRuntimeError(Exception):
    """A selector failed on one device (the message is cel-go's wording)."""


def _qenc(f: Fraction) -> dict[str, str]:
    return {_Q: f"{f.numerator}/{f.denominator}"}


@lru_cache(maxsize=4096)
def _qdec_s(s: str) -> Fraction:
    return Fraction(s)


def _senc(v: semver.Version) -> dict[str, str]:
    return {_S: semver.format_version(v)}


@lru_cache(maxsize=4096)
def _sdec_s(s: str) -> semver.Version:
    return semver.parse(s)


def _kind(m: Mapping[str, Any]) -> str:
    if _Q in m:
        return _Q
    if _S in m:
        return _S
    raise ValueError("no such overload")


def _cmp(a: Mapping[str, Any], b: Mapping[str, Any]) -> int:
    ka, kb = _kind(a), _kind(b)
    if ka != kb:
        raise ValueError("no such overload")
    if ka == _Q:
        x, y = _qdec_s(a[_Q]), _qdec_s(b[_Q])
        return (x > y) - (x < y)
    return semver.compare(_sdec_s(a[_S]), _sdec_s(b[_S]))


def _quantity(s: str) -> dict[str, str]:
    try:
        return _qenc(parse_quantity(s))
    except QuantityError:
        raise ValueError(_QUANTITY_FORMAT) from None


def _is_quantity(s: str) -> bool:
    try:
        parse_quantity(s)
    except QuantityError:
        return False
    return True


def _semver(s: str, normalize: bool = False) -> dict[str, str]:
    try:
        return _senc(semver.normalize_and_parse(s) if normalize else semver.parse(s))
    except semver.SemverError as e:
        raise ValueError(str(e)) from None


def _is_semver(s: str, normalize: bool = False) -> bool:
    try:
        _semver(s, normalize)
    except ValueError:
        return False
    return True


def _q(m: Mapping[str, Any]) -> Fraction:
    if _Q not in m:
        raise ValueError("no such overload")
    return _qdec_s(m[_Q])


def _as_integer(m: Mapping[str, Any]) -> int:
    f = _q(m)
    if f.denominator != 1 or not _INT64[0] <= f.numerator <= _INT64[1]:
        raise ValueError("cannot convert value to integer")
    return f.numerator


def _is_integer(m: Mapping[str, Any]) -> bool:
    f = _q(m)
    return f.denominator == 1 and _INT64[0] <= f.numerator <= _INT64[1]


def _sv(m: Mapping[str, Any]) -> semver.Version:
    if _S not in m:
        raise ValueError("no such overload")
    return _sdec_s(m[_S])


def _add(m: Mapping[str, Any], o: CelValue) -> dict[str, str]:
    return _qenc(_q(m) + (o if isinstance(o, int) else _q(o)))


def _sub(m: Mapping[str, Any], o: CelValue) -> dict[str, str]:
    return _qenc(_q(m) - (o if isinstance(o, int) else _q(o)))


def _decls() -> list[CelValue]:
    T, V = cel.Type, cel.Type.Map(cel.Type.STRING, cel.Type.STRING)
    O = cel.Overload  # noqa: E741

    def f(name: str, *ov: CelValue) -> CelValue:
        return cel.FunctionDecl(name, list(ov))

    return [
        f("quantity", O("string_to_quantity", V, [T.STRING], impl=_quantity)),
        f("isQuantity", O("is_quantity_string", T.BOOL, [T.STRING], impl=_is_quantity)),
        f("sign", O("quantity_sign", T.INT, [V], impl=lambda m: (_q(m) > 0) - (_q(m) < 0))),
        f(
            "isGreaterThan",
            O(
                "k8s_is_greater_than",
                T.BOOL,
                [V, V],
                is_member=True,
                impl=lambda a, b: _cmp(a, b) > 0,
            ),
        ),
        f(
            "isLessThan",
            O("k8s_is_less_than", T.BOOL, [V, V], is_member=True, impl=lambda a, b: _cmp(a, b) < 0),
        ),
        f("compareTo", O("k8s_compare_to", T.INT, [V, V], is_member=True, impl=_cmp)),
        f(
            "asApproximateFloat",
            O("quantity_get_float", T.DOUBLE, [V], is_member=True, impl=lambda m: float(_q(m))),
        ),
        f("asInteger", O("quantity_get_int", T.INT, [V], is_member=True, impl=_as_integer)),
        f("isInteger", O("quantity_is_integer", T.BOOL, [V], is_member=True, impl=_is_integer)),
        f(
            "add",
            O("quantity_add", V, [V, V], is_member=True, impl=_add),
            O("quantity_add_int", V, [V, T.INT], is_member=True, impl=_add),
        ),
        f(
            "sub",
            O("quantity_sub", V, [V, V], is_member=True, impl=_sub),
            O("quantity_sub_int", V, [V, T.INT], is_member=True, impl=_sub),
        ),
        f(
            "semver",
            O("string_to_semver", V, [T.STRING], impl=_semver),
            O("string_bool_to_semver", V, [T.STRING, T.BOOL], impl=_semver),
        ),
        f(
            "isSemver",
            O("is_semver_string", T.BOOL, [T.STRING], impl=_is_semver),
            O("is_semver_string_bool", T.BOOL, [T.STRING, T.BOOL], impl=_is_semver),
        ),
        f("major", O("semver_major", T.INT, [V], is_member=True, impl=lambda m: _sv(m)[0])),
        f("minor", O("semver_minor", T.INT, [V], is_member=True, impl=lambda m: _sv(m)[1])),
        f("patch", O("semver_patch", T.INT, [V], is_member=True, impl=lambda m: _sv(m)[2])),
    ]


@lru_cache(maxsize=1)
def _env() -> CelValue:
    return cel.NewEnv(
        variables={"device": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)},
        functions=_decls() + cel_libs.declarations(),
        extensions=[
            ext_strings.ExtStrings(),
            ext_optional.ExtOptional(),
            ext_bindings.ExtBindings(),
        ],
    )


_STATUS = re.compile(r"^[A-Z_]+: ")
_STATUS_TAIL = re.compile(r" \[[A-Z_]+\]$")
_NO_KEY = re.compile(r'Key not found in map : "(.*)"')
_DOMAIN_REF = re.compile(r"""\b(attributes|capacity)\s*\[\s*(?:"([^"\\]*)"|'([^'\\]*)')\s*\]""")


def _go_type(t: CelValue) -> str:
    """cel-go's spelling of a type name (cel-cpp says INT where cel-go says int)."""
    name = str(t.name())
    name = {"NULL": "null_type", "NULL_TYPE": "null_type"}.get(name, name.lower())
    return name.replace("<", "(").replace(">", ")")


def _strip_status(msg: str) -> str:
    return _STATUS_TAIL.sub("", _STATUS.sub("", msg.strip(), count=1))


def _runtime_message(msg: str) -> str:
    msg = _strip_status(msg)
    m = _NO_KEY.search(msg)
    if m:
        return f"no such key: {m.group(1)}"
    if msg == "divide by zero":
        return "division by zero"
    return msg


def enhance_runtime_error(msg: str) -> str:
    """cel.EnhanceRuntimeError: a hint for missing keys."""
    if "no such key:" in msg:
        return (
            f"{msg}. consider using CEL optional chaining (.? followed by orValue()) or "
            "guarding the check with has() for optional fields"
        )
    return msg


class CompiledSelector:
    """One compiled expression, or the compile error (``error``, cel-go's wording)."""

    __slots__ = ("_attr_domains", "_cap_domains", "_program", "error", "expression")

    def __init__(self, expression: str) -> None:
        self.expression = expression
        self.error: str | None = None
        self._program: CelValue = None
        self._attr_domains: tuple[str, ...] = ()
        self._cap_domains: tuple[str, ...] = ()
        try:
            prog = _env().compile(expression)
        except RuntimeError as e:
            lines = [ln for ln in _strip_status(str(e)).splitlines() if "<input>:-1:-1" not in ln]
            # cel-cpp escapes '?' in the parser's expected-token list, cel-go does not.
            text = "\n".join(lines).rstrip().replace("'\\u003F'", "'?'")
            self.error = "compilation failed: " + text
            return
        rt = prog.return_type()
        if rt != cel.Type.BOOL and rt != cel.Type.DYN:
            self.error = f"must evaluate to bool or the unknown type, not {_go_type(rt)}"
            return
        self._program = prog
        refs = _DOMAIN_REF.findall(expression)
        self._attr_domains = tuple({d or s for k, d, s in refs if k == "attributes"})
        self._cap_domains = tuple({d or s for k, d, s in refs if k == "capacity"})

    def matches(self, device: Device, driver: str) -> bool:
        """Evaluate on one device; raises CelRuntimeError (unenhanced message).
        The outcome is remembered on the device (``Device.cel_results``)."""
        got = device.cel_results.get(self.expression)
        if got is None:
            try:
                got = self._eval(device, driver)
            except CelRuntimeError as e:
                got = str(e)
            device.cel_results[self.expression] = got
        if got is True or got is False:
            return got
        raise CelRuntimeError(got)

    def _eval(self, device: Device, driver: str) -> bool:
        if self._program is None:
            raise CelRuntimeError(self.error or "not compiled")
        inp = device_input(device, driver)
        if self._attr_domains or self._cap_domains:
            attrs, caps = inp["attributes"], inp["capacity"]
            if any(d not in attrs for d in self._attr_domains) or any(
                d not in caps for d in self._cap_domains
            ):
                inp = dict(inp)
                inp["attributes"] = {**{d: {} for d in self._attr_domains}, **attrs}
                inp["capacity"] = {**{d: {} for d in self._cap_domains}, **caps}
        r = self._program.eval(data={"device": inp})
        v = r.value()
        if v is True or v is False:
            return bool(v)
        t = r.type()
        if t == cel.Type.ERROR:
            raise CelRuntimeError(_runtime_message(str(v)))
        name = _go_type(t)
        raise CelRuntimeError(
            f"CEL result of type {name} could not be converted to bool: "
            f"type conversion error from '{name}' to 'bool'"
        )


def device_input(device: Device, driver: str) -> dict[str, Any]:
    """The ``device`` variable for one device, built once per device object."""
    if device.cel_input is not None and device.cel_input["driver"] == driver:
        return device.cel_input
    attrs: dict[str, dict[str, Any]] = {}
    for name, a in device.attributes.items():
        domain, _, ident = name.rpartition("/")
        v: CelValue = a.value
        if a.kind == "version":
            try:
                v = _senc(semver.parse(str(a.value)))
            except semver.SemverError as e:
                raise CelRuntimeError(f"attribute {name}: parse semantic version: {e}") from None
        attrs.setdefault(domain or driver, {})[ident] = v
    caps: dict[str, dict[str, Any]] = {}
    for name, c in device.capacity.items():
        domain, _, ident = name.rpartition("/")
        caps.setdefault(domain or driver, {})[ident] = _qenc(c.value)
    device.cel_input = {
        "driver": driver,
        "allowMultipleAllocations": bool(device.allow_multiple_allocations),
        "attributes": attrs,
        "capacity": caps,
    }
    return device.cel_input


class CelCache:
    """Compile each expression once (kube's cel.Cache, unbounded here: selectors come
    from a handful of classes and claims)."""

    __slots__ = ("_compiled",)

    def __init__(self) -> None:
        self._compiled: dict[str, CompiledSelector] = {}

    def get(self, expression: str) -> CompiledSelector:
        c = self._compiled.get(expression)
        if c is None:
            c = self._compiled[expression] = CompiledSelector(expression)
        return c
