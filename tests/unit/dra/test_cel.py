"""CEL device selectors: kube's environment, extension functions and error texts."""

from __future__ import annotations

import pytest

from kubesched.framework.dra.cel import CelCache, CelRuntimeError
from kubesched.framework.dra.types import ResourceSlice
from tests.unit.dra.builders import slice_

DEV = {
    "name": "gpu-0",
    "attributes": {
        "model": {"string": "A100"},
        "numa": {"int": 1},
        "mig": {"bool": True},
        "driverVersion": {"version": "1.2.3-rc.1"},
        "pci.example.com/bus": {"string": "0000:3b"},
    },
    "capacity": {"memory": {"value": "40Gi"}, "cores": {"value": "1500m"}},
}
DEVICE = ResourceSlice.from_dict(slice_(devices=[DEV])).devices[0]
DRIVER = "gpu.example.com"
A = 'device.attributes["gpu.example.com"]'
C = 'device.capacity["gpu.example.com"]'

TRUE_EXPRESSIONS = [
    'device.driver == "gpu.example.com"',
    f'{A}.model == "A100"',
    f"{A}.numa == 1 && {A}.mig",
    f'{A}.model.startsWith("A") && {A}.model.lowerAscii() == "a100"',
    'device.attributes["pci.example.com"].bus == "0000:3b"',
    f'"model" in {A}',
    f"has({A}.numa)",
    f'{A}.?nope.orValue("none") == "none"',
    'device.attributes["other.example.com"].?x.orValue(0) == 0',
    "device.allowMultipleAllocations == false",
    f'{C}.memory.compareTo(quantity("32Gi")) > 0',
    f'{C}.memory.isGreaterThan(quantity("40G"))',
    f'{C}.memory == quantity("40960Mi")',
    f"{C}.memory.asInteger() == 42949672960",
    f"!{C}.cores.isInteger()",
    f"{C}.cores.asApproximateFloat() == 1.5",
    f'{C}.cores.add(quantity("500m")) == quantity("2")',
    f'{C}.cores.sub(1).isLessThan(quantity("1"))',
    'sign(quantity("-1")) == -1',
    'isQuantity("1Gi") && !isQuantity("1 Gi")',
    f'{A}.driverVersion.isLessThan(semver("1.2.3"))',
    f'{A}.driverVersion.compareTo(semver("1.2.3-rc.0")) == 1',
    f"{A}.driverVersion.major() == 1 && {A}.driverVersion.minor() == 2",
    'semver("v01.2", true) == semver("1.2.0")',
    'semver("1.0.0-alpha.1").isLessThan(semver("1.0.0-alpha.beta"))',
    'semver("1.0.0+build.1") == semver("1.0.0")',
    'isSemver("1.2.3") && !isSemver("1.2") && isSemver("1.2", true)',
    "cel.bind(m, device.attributes[\"gpu.example.com\"].model, m == 'A100')",
]


@pytest.mark.parametrize("expr", TRUE_EXPRESSIONS)
def test_selector_matches(expr: str) -> None:
    c = CelCache().get(expr)
    assert c.error is None
    assert c.matches(DEVICE, DRIVER) is True


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        (f"{A}.nope == 1", "no such key: nope"),
        ('device.attributes["other.example.com"].x == 1', "no such key: x"),
        ('quantity("1.5").asInteger() == 1', "cannot convert value to integer"),
        ('semver("1.2") == semver("1.2.0")', "No Major.Minor.Patch elements found"),
        ("1 / 0 == 1", "division by zero"),
        (
            f"{A}.model",
            "CEL result of type string could not be converted to bool: "
            "type conversion error from 'string' to 'bool'",
        ),
    ],
)
def test_runtime_errors(expr: str, message: str) -> None:
    c = CelCache().get(expr)
    assert c.error is None
    with pytest.raises(CelRuntimeError) as e:
        c.matches(DEVICE, DRIVER)
    assert str(e.value).startswith(message)


def test_invalid_quantity_is_a_runtime_error_with_kubes_text() -> None:
    with pytest.raises(CelRuntimeError) as e:
        CelCache().get('quantity("1 Gi") == quantity("1Gi")').matches(DEVICE, DRIVER)
    assert str(e.value) == (
        "quantities must match the regular expression "
        "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )


@pytest.mark.parametrize(
    ("expr", "error"),
    [
        ("device.driver ==", "compilation failed: ERROR: <input>:1:17: Syntax error:"),
        ("foo == 1", "compilation failed: ERROR: <input>:1:1: undeclared reference to 'foo'"),
        (
            'quantity("1") == 1',
            "compilation failed: ERROR: <input>:1:15: found no matching overload",
        ),
        ("1 + 1", "must evaluate to bool or the unknown type, not int"),
        ("[true]", "must evaluate to bool or the unknown type, not list(bool)"),
    ],
)
def test_compile_errors(expr: str, error: str) -> None:
    c = CelCache().get(expr)
    assert c.error is not None and c.error.startswith(error)
    with pytest.raises(CelRuntimeError):
        c.matches(DEVICE, DRIVER)


def test_each_expression_is_compiled_once() -> None:
    cache = CelCache()
    assert cache.get("device.driver == 'x'") is cache.get("device.driver == 'x'")


@pytest.mark.parametrize(
    "expr",
    [
        "[1, 2, 3].isSorted() && ![2, 1].isSorted()",
        "[3, 1].min() == 1 && [3, 1].max() == 3",
        "[1.5, 2.5].sum() == 4.0 && [1, 2].sum() == 3",
        "sets.contains([1, 2], [1]) && sets.equivalent([1, 2], [2, 1]) && !sets.intersects([1], [2])",
        '"abc123".find("[0-9]+") == "123" && "a1b2".findAll("[0-9]") == ["1", "2"]',
        '"a1b2c3".findAll("[0-9]", 2) == ["1", "2"]',
    ],
)
def test_kubernetes_list_sets_and_regex_libraries(expr: str) -> None:
    c = CelCache().get(expr)
    assert c.error is None
    assert c.matches(DEVICE, DRIVER) is True


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        ("[].min() == 1", "min called on empty list"),
        ('"a".find("(") == ""', "Illegal regex: "),
    ],
)
def test_library_errors(expr: str, message: str) -> None:
    with pytest.raises(CelRuntimeError) as e:
        CelCache().get(expr).matches(DEVICE, DRIVER)
    assert str(e.value).startswith(message)
