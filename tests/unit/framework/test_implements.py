"""``implements`` answers as ``isinstance`` does for the extension-point protocols: the
profile compiler uses it to decide which points a plugin runs at."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from kubesched.framework import interface
from kubesched.framework.implements import implements
from kubesched.plugins import in_tree_registry
from kubesched.profiles import compile_profile, default_profile_spec

PROTOCOLS = [
    v
    for v in vars(interface).values()
    if inspect.isclass(v) and getattr(v, "_is_runtime_protocol", False)
]


def in_tree_plugins() -> list[Any]:
    fwk = compile_profile(default_profile_spec()).framework
    registry = in_tree_registry()
    return [
        spec.factory(spec.parse_args({}), fwk)
        for spec in (registry.get(n) for n in registry.names())
        if spec is not None
    ]


class Odd:
    """Members set on the instance, a method set to None, a member missing."""

    name = "odd"
    filter = None

    def __init__(self) -> None:
        self.score = lambda *a: 0
        self.normalize_score = lambda *a: None
        self.less = lambda a, b: True


def test_every_in_tree_plugin_implements_what_isinstance_says() -> None:
    plugins = in_tree_plugins()
    assert len(plugins) >= 20 and len(PROTOCOLS) >= 15
    answers = {
        (p.name, proto.__name__): (implements(p, proto), isinstance(p, proto))
        for p in plugins
        for proto in PROTOCOLS
    }
    assert {k: v for k, v in answers.items() if v[0] != v[1]} == {}
    # both answers occur: the check is not constant
    assert {v[0] for v in answers.values()} == {True, False}


@pytest.mark.parametrize("proto", PROTOCOLS, ids=lambda p: p.__name__)
def test_instance_members_and_none_methods_as_isinstance(proto: type) -> None:
    odd = Odd()
    assert implements(odd, proto) == isinstance(odd, proto)


def test_a_method_set_to_none_does_not_implement_its_point() -> None:
    odd = Odd()
    assert not implements(odd, interface.FilterPlugin)
    assert implements(odd, interface.ScorePlugin)
