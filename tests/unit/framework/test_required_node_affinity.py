"""A pod's nodeSelector AND its required node affinity (kube's GetRequiredNodeAffinity):
the one rule NodeAffinity's Filter, PodTopologySpread's ``nodeAffinityPolicy: Honor`` and
the simulator's DaemonSet expansion read, so the three cannot disagree on a node."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.framework.labels import RequiredNodeAffinity
from kubesched.framework.types import ObjectError, Pod

GPU = {"kubernetes.io/hostname": "gpu-1", "accelerator": "a100", "zone": "z1"}
CPU = {"kubernetes.io/hostname": "cpu-1", "zone": "z2"}


def pod(selector: dict[str, str] | None = None, terms: list[Any] | None = None) -> Pod:
    spec: dict[str, Any] = {"containers": [{"name": "c"}]}
    if selector is not None:
        spec["nodeSelector"] = selector
    if terms is not None:
        spec["affinity"] = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
            }
        }
    return Pod({"metadata": {"name": "p", "namespace": "default"}, "spec": spec})


def matches(p: Pod) -> tuple[bool, bool]:
    req = RequiredNodeAffinity.of_pod(p)
    return req.matches(GPU, "gpu-1"), req.matches(CPU, "cpu-1")


def test_a_pod_without_either_matches_every_node_and_says_it_is_empty() -> None:
    req = RequiredNodeAffinity.of_pod(pod())
    assert req.empty
    assert matches(pod()) == (True, True)


def test_the_selector_and_the_terms_both_hold_and_the_terms_are_ored() -> None:
    by_zone = [{"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z1"]}]}]
    by_name = [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["cpu-1"]}]}]
    assert matches(pod(terms=by_zone + by_name)) == (True, True)
    assert matches(pod({"accelerator": "a100"}, by_name)) == (False, False)
    assert matches(pod({"accelerator": "a100"}, by_zone)) == (True, False)
    assert not RequiredNodeAffinity.of_pod(pod(terms=by_zone)).empty


def test_an_empty_term_and_an_empty_term_list_match_nothing() -> None:
    assert matches(pod(terms=[{}])) == (False, False)
    assert matches(pod(terms=[])) == (False, False)


def test_a_term_that_does_not_parse_matches_nothing_and_the_others_still_count() -> None:
    broken = {"matchExpressions": [{"key": "zone", "operator": "Sideways", "values": ["z2"]}]}
    good = {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["z2"]}]}
    assert matches(pod(terms=[broken, good])) == (False, True)
    assert matches(pod(terms=[broken])) == (False, False)


def test_strict_refuses_what_does_not_parse_naming_the_field() -> None:
    broken = {"matchExpressions": [{"key": "zone", "operator": "Sideways", "values": ["z2"]}]}
    with pytest.raises(ObjectError, match=r"^spec\.template\..*nodeSelectorTerms\[0\]"):
        RequiredNodeAffinity.of_pod(
            pod(terms=[broken]),
            strict=True,
            field="spec.template.spec.affinity.nodeAffinity."
            "requiredDuringSchedulingIgnoredDuringExecution",
        )
