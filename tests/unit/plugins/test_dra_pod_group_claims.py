"""PodGroup claims' rules (k8s.io/dynamic-resource-allocation's resourceclaim package):
who a claim is reserved for, which owner a member accepts, and the messages when not."""

from __future__ import annotations

from typing import Any

import pytest

from kubesched.framework.types import Pod
from kubesched.plugins.dynamic_resources.claims import is_for_pod, is_reserved_for
from kubesched.plugins.dynamic_resources.pod_group import (
    bind_to,
    is_own_pod_group_change,
    matching_claim,
)
from tests.builders import make_pod

TEMPLATE_CLAIM = {"name": "fabric", "resourceClaimTemplateName": "channel"}
GROUP_REF = {"apiGroup": "scheduling.k8s.io", "resource": "podgroups", "name": "train", "uid": "g"}
POD_REF = {"resource": "pods", "name": "m", "uid": "m"}


def member(group: str | None = "train") -> Pod:
    pod = make_pod("m").uid("m").spec(resourceClaims=[TEMPLATE_CLAIM]).obj()
    if group is not None:
        pod["spec"]["schedulingGroup"] = {"podGroupName": group}
    return Pod(pod)


def pod_group(*claims: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "train", "namespace": "default", "uid": "g"},
        "spec": {"resourceClaims": list(claims)},
    }


def owned_by(kind: str, name: str, uid: str, api: str = "scheduling.k8s.io/v1beta1") -> Any:
    ref = {"apiVersion": api, "kind": kind, "name": name, "uid": uid, "controller": True}
    return {"metadata": {"name": "c", "namespace": "default", "ownerReferences": [ref]}}


@pytest.mark.parametrize(
    ("claims", "pod_claim", "want"),
    [
        pytest.param([TEMPLATE_CLAIM], TEMPLATE_CLAIM, GROUP_REF, id="exact-match"),
        pytest.param(
            [{"name": "fabric", "resourceClaimTemplateName": "other"}],
            TEMPLATE_CLAIM,
            POD_REF,
            id="other-template",
        ),
        pytest.param(
            [{"name": "fabric", "resourceClaimName": "channel"}],
            TEMPLATE_CLAIM,
            POD_REF,
            id="claim-name-vs-template",
        ),
        pytest.param([], TEMPLATE_CLAIM, POD_REF, id="no-group-claims"),
    ],
)
def test_bind_to_the_pod_group_only_on_an_exact_match(
    claims: list[dict[str, Any]], pod_claim: dict[str, Any], want: dict[str, Any]
) -> None:
    assert bind_to(member(), pod_group(*claims), pod_claim) == want
    assert (matching_claim(pod_group(*claims), pod_claim) is not None) == (want == GROUP_REF)


def test_bind_to_without_a_pod_group_is_the_pod() -> None:
    assert bind_to(member(None), None, TEMPLATE_CLAIM) == POD_REF


def test_a_claim_owned_by_the_members_pod_group_is_accepted_only_with_the_gate() -> None:
    claim = owned_by("PodGroup", "train", "g")
    assert is_for_pod(member(), claim, accept_pod_group=True) is None
    assert is_for_pod(member(), claim) == (
        "ResourceClaim default/c was not created for Pod default/m (Pod is not owner)"
    )


def test_a_claim_owned_by_another_pod_group_names_both_candidates() -> None:
    claim = owned_by("PodGroup", "other", "o")
    assert is_for_pod(member(), claim, accept_pod_group=True) == (
        "ResourceClaim default/c was not created for Pod default/m "
        "(neither Pod nor PodGroup train is the owner)"
    )
    # a PodGroup of another API group of the same name is not the member's
    foreign = owned_by("PodGroup", "train", "g", api="scheduling.x-k8s.io/v1alpha1")
    assert is_for_pod(member(), foreign, accept_pod_group=True) is not None


def test_reserved_for_the_pod_group_counts_for_each_member_with_the_gate() -> None:
    claim = {"status": {"reservedFor": [GROUP_REF]}}
    assert is_reserved_for(member(), claim, accept_pod_group=True)
    assert not is_reserved_for(member(), claim)
    assert not is_reserved_for(member("other"), claim, accept_pod_group=True)
    assert is_reserved_for(member(), {"status": {"reservedFor": [POD_REF]}})


def test_a_member_is_retried_when_its_pod_group_with_claims_arrives_or_changes() -> None:
    """The queueing hint: a member held because its PodGroup was not known yet (the
    claim then looks like another owner's) is retried on the PodGroup's arrival."""
    group = pod_group(TEMPLATE_CLAIM)
    assert is_own_pod_group_change(member(), None, group)
    assert not is_own_pod_group_change(member("other"), None, group)
    assert not is_own_pod_group_change(member(None), None, group)
    assert not is_own_pod_group_change(member(), None, pod_group())  # no claims
    named = {**group, "status": {"resourceClaimStatuses": [{"name": "fabric"}]}}
    assert is_own_pod_group_change(member(), group, named)
    assert not is_own_pod_group_change(member(), named, named)
