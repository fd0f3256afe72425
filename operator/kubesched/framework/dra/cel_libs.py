"""Kubernetes' list library (ListsVersion 1, on in 1.37), cel-go's sets extension and
kube's regex ``find``/``findAll``, as Python functions for cel-expr-python.

The runtime dispatches on the argument's kind (list), not its element type, so each
function is one overload over ``list(dyn)``; errors keep kube's texts. Left out:
the list ``indexOf``/``lastIndexOf`` (the runtime cannot hold them beside the strings
extension's functions of those names) and ``includes`` (a Python overload taking a
``dyn`` argument never matches at run time). Regular
expressions use Python's ``re`` (kube uses RE2: the same for the usual patterns).
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, TypeAlias

from cel_expr_python import cel

__all__ = ["CelValue", "declarations"]

CelValue: TypeAlias = Any
"""A value or object of cel-expr-python (a CEL value converted to Python, a type, a
declaration, an environment): the library ships no type information, so this is where
the framework's typing stops."""


def _is_sorted(xs: list[CelValue]) -> bool:
    return all(xs[i] <= xs[i + 1] for i in range(len(xs) - 1))


def _sum(xs: list[CelValue]) -> CelValue:
    return sum(xs[1:], xs[0]) if xs else 0


def _extreme(name: str, pick: CelValue) -> CelValue:
    def f(xs: list[CelValue]) -> CelValue:
        if not xs:
            raise ValueError(f"{name} called on empty list")
        return pick(xs)

    return f


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as e:
        raise ValueError(f"Illegal regex: {e}") from None


def _find(s: str, pattern: str) -> str:
    m = _regex(pattern).search(s)
    return m.group(0) if m else ""


def _find_all(s: str, pattern: str, limit: int = -1) -> list[str]:
    found = [m.group(0) for m in _regex(pattern).finditer(s)]
    return found if limit < 0 else found[:limit]


def declarations() -> list[CelValue]:
    T = cel.Type
    L = T.List(T.DYN)
    O = cel.Overload  # noqa: E741

    def f(name: str, *ov: CelValue) -> CelValue:
        return cel.FunctionDecl(name, list(ov))

    return [
        f("isSorted", O("list_is_sorted", T.BOOL, [L], is_member=True, impl=_is_sorted)),
        f("sum", O("list_sum", T.DYN, [L], is_member=True, impl=_sum)),
        f("min", O("list_min", T.DYN, [L], is_member=True, impl=_extreme("min", min))),
        f("max", O("list_max", T.DYN, [L], is_member=True, impl=_extreme("max", max))),
        f(
            "sets.contains",
            O("list_sets_contains_list", T.BOOL, [L, L], impl=lambda a, b: all(x in a for x in b)),
        ),
        f(
            "sets.equivalent",
            O(
                "list_sets_equivalent_list",
                T.BOOL,
                [L, L],
                impl=lambda a, b: all(x in b for x in a) and all(x in a for x in b),
            ),
        ),
        f(
            "sets.intersects",
            O(
                "list_sets_intersects_list",
                T.BOOL,
                [L, L],
                impl=lambda a, b: any(x in a for x in b),
            ),
        ),
        f(
            "find",
            O("string_find_string", T.STRING, [T.STRING, T.STRING], is_member=True, impl=_find),
        ),
        f(
            "findAll",
            O(
                "string_find_all_string",
                T.List(T.STRING),
                [T.STRING, T.STRING],
                is_member=True,
                impl=_find_all,
            ),
            O(
                "string_find_all_string_int",
                T.List(T.STRING),
                [T.STRING, T.STRING, T.INT],
                is_member=True,
                impl=_find_all,
            ),
        ),
    ]
