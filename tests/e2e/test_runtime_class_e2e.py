"""The pods RuntimeClass admission refuses, on the real kube-apiserver: the simulator's
scenario loader (``kubesched.simulator.runtime_classes``) must refuse the same pods with
the API server's words, and write into an accepted pod what the API server writes."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest

from kubesched.framework.types import ObjectError
from kubesched.simulator.apiserver import admit_pod
from tests.controlplane import ApiError, ControlPlane

JSON = dict[str, Any]

CLASS = "e2e-sandbox"
BARE = "e2e-bare"
CLASSES: dict[str, JSON] = {
    CLASS: {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": CLASS},
        "handler": "kata",
        "overhead": {"podFixed": {"cpu": "250m", "memory": "120Mi"}},
        "scheduling": {
            "nodeSelector": {"sandbox": "true"},
            "tolerations": [
                {"key": "sandbox", "operator": "Exists", "effect": "NoSchedule"},
                {"operator": "Exists", "effect": "NoExecute"},
            ],
        },
    },
    BARE: {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": BARE},
        "handler": "runc",
    },
}


@pytest.fixture(scope="module")
def classes(controlplane: ControlPlane) -> Iterator[ControlPlane]:
    for rc in CLASSES.values():
        controlplane.api.create(rc)
    yield controlplane
    for name in CLASSES:
        controlplane.api.remove("node.k8s.io/v1", "RuntimeClass", name)


def _pod(name: str, spec: JSON) -> JSON:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "c", "image": "busybox"}], **spec},
    }


REFUSED: dict[str, JSON] = {
    "missing": {"runtimeClassName": "e2e-none"},
    "other-overhead": {"runtimeClassName": CLASS, "overhead": {"cpu": "1"}},
    "overhead-alone": {"overhead": {"cpu": "1"}},
    "overhead-bare-class": {"runtimeClassName": BARE, "overhead": {"cpu": "1"}},
    "selector-conflict": {"runtimeClassName": CLASS, "nodeSelector": {"sandbox": "no"}},
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_refused_by_both_with_the_same_words(
    classes: ControlPlane, namespace: str, case: str
) -> None:
    pod = _pod(f"refused-{case}", REFUSED[case])
    with pytest.raises(ObjectError) as ours:
        admit_pod(copy.deepcopy(pod), {}, CLASSES)
    with pytest.raises(ApiError) as theirs:
        classes.api.create(pod, namespace)
    assert theirs.value.status == 403
    message = theirs.value.body["message"]
    assert message.startswith(f'pods "refused-{case}" is forbidden: ')
    # ours: the field, then the API server's reason
    assert str(ours.value).split(": ", 1)[1] == message.split(" is forbidden: ", 1)[1]


def test_an_accepted_pod_is_written_as_the_api_server_writes_it(
    classes: ControlPlane, namespace: str
) -> None:
    pod = _pod(
        "accepted",
        {
            "runtimeClassName": CLASS,
            "nodeSelector": {"disk": "ssd"},
            "tolerations": [{"key": "sandbox", "operator": "Equal", "value": "a"}],
        },
    )
    ours = copy.deepcopy(pod)
    admit_pod(ours, {}, CLASSES)
    stored = classes.api.create(pod, namespace)["spec"]
    assert ours["spec"]["nodeSelector"] == stored["nodeSelector"]
    assert ours["spec"]["overhead"] == stored["overhead"]
    assert ours["spec"]["tolerations"] == stored["tolerations"]
