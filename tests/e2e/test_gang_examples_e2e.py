"""The examples of policies/examples/ are accepted by kube-apiserver 1.37 with
Kubernetes' gang API on (``GenericWorkload``, ``scheduling.k8s.io/v1beta1``) and the
CRDs of kubesched and of scheduler-plugins (tests/crds) installed: ``kubectl apply
--dry-run=server`` of each file (what the gang examples do: tests/integration/
test_gang_examples.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.controlplane import ControlPlane

pytestmark = pytest.mark.timeout(180)

ROOT = Path(__file__).parents[2]
EXAMPLES = sorted((ROOT / "policies" / "examples").glob("*.yaml"))


@pytest.fixture
def gang_cluster(controlplane_factory: Callable[..., ControlPlane]) -> ControlPlane:
    plane = controlplane_factory(
        feature_gates={"GenericWorkload": True, "TopologyAwareWorkloadScheduling": True},
        runtime_config={"scheduling.k8s.io/v1beta1": True},
    )
    for crds in (ROOT / "crds", ROOT / "tests" / "crds"):
        plane.kubectl("apply", "-f", crds, check=True)
    plane.kubectl("wait", "--for=condition=Established", "crd", "--all", check=True)
    return plane


def test_every_example_is_accepted_by_kube_apiserver(gang_cluster: ControlPlane) -> None:
    names = {p.name for p in EXAMPLES}
    assert names >= {
        "gang-upstream.yaml",
        "gang-scheduler-plugins.yaml",
        "gang-topology.yaml",
        "gang-preemption.yaml",
    }
    for path in EXAMPLES:
        # A dry run creates nothing: what the file's other objects refer to (its
        # namespaces, its PriorityClasses) must exist already.
        for doc in yaml.safe_load_all(path.read_text()):
            if doc and doc.get("kind") == "Namespace":
                gang_cluster.ensure_namespace(doc["metadata"]["name"])
            elif doc and doc.get("kind") == "PriorityClass":
                gang_cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc), check=True)
        out = gang_cluster.kubectl("apply", "--dry-run=server", "-f", path)
        assert out.returncode == 0, f"{path.name}: {out.stderr}"
        assert "(server dry run)" in out.stdout, out.stdout


def test_kube_apiserver_refuses_a_pod_group_without_a_policy(gang_cluster: ControlPlane) -> None:
    """What a user who leaves the policy to the Workload's template is told."""
    (group,) = [
        d
        for d in yaml.safe_load_all((ROOT / "policies/examples/gang-upstream.yaml").read_text())
        if d["kind"] == "PodGroup"
    ]
    del group["spec"]["schedulingPolicy"]
    gang_cluster.ensure_namespace(group["metadata"]["namespace"])
    out = gang_cluster.kubectl("apply", "--dry-run=server", "-f", "-", input=yaml.safe_dump(group))
    assert out.returncode != 0
    assert "spec.schedulingPolicy" in out.stderr
