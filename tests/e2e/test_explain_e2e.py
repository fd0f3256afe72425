"""``kubesched explain --kubeconfig`` on a real kube-apiserver: it reads the cluster once
(every kind ``kubesched run`` lists, and the SchedulingProfiles) and explains a pending
pod through the profile serving its schedulerName; a kubeconfig whose identity may not
list pods is one line and exit 2."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
import yaml

from kubesched.cli import main
from tests.controlplane import Binaries, ControlPlane

pytestmark = pytest.mark.timeout(120)

CRDS = Path(__file__).parents[2] / "crds"

PROFILE = {
    "apiVersion": "kubesched.dev/v1alpha1",
    "kind": "SchedulingProfile",
    "metadata": {"name": "pack"},
    "spec": {
        "schedulerName": "pack",
        "plugins": {
            "score": {
                "disabled": [{"name": "*"}],
                "enabled": [{"name": "NodeResourcesFit", "weight": 7}],
            }
        },
        "pluginConfig": [
            {"name": "NodeResourcesFit", "args": {"scoringStrategy": {"type": "MostAllocated"}}}
        ],
    },
}


@pytest.fixture(scope="module")
def cp(controlplane_binaries: Binaries) -> Iterator[ControlPlane]:
    with ControlPlane(controlplane_binaries) as plane:
        plane.kubectl("apply", "-f", CRDS, check=True)
        plane.kubectl(
            "wait", "--for=condition=Established", "crd", "--all", "--timeout=30s", check=True
        )
        yield plane


async def test_explain_reads_the_cluster_and_its_profiles(
    cp: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = {"e2e.kubesched.dev/pool": "explain"}
    made = await asyncio.to_thread(cp.create_nodes, 2, labels=pool, prefix="ex-", zones=0)
    done = cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(PROFILE))
    assert done.returncode == 0, done.stderr
    high = {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": "explain-high"},
        "value": 1000,
    }
    await asyncio.to_thread(cp.api.create, high)
    await asyncio.to_thread(
        cp.create_pod,
        "packed",
        scheduler_name="pack",
        spec={"nodeSelector": pool, "priorityClassName": "explain-high"},
    )
    await asyncio.to_thread(
        cp.create_pod, "nowhere", scheduler_name="pack", spec={"nodeSelector": {"absent": "x"}}
    )
    argv = ["explain", "default/packed", "--kubeconfig", str(cp.kubeconfig), "--output", "json"]
    assert await asyncio.to_thread(main, argv) == 0
    out, err = capsys.readouterr()
    doc = orjson.loads(out)
    assert (doc["profile"], doc["status"]) == ("pack", "Pending"), err
    assert doc["scorePlugins"] == ["NodeResourcesFit:7"]
    assert sorted(f["node"] for f in doc["feasible"]) == sorted(made)

    argv[1] = "default/nowhere"
    assert await asyncio.to_thread(main, argv) == 0
    doc = orjson.loads(capsys.readouterr().out)
    assert doc["feasible"] == []
    rejected = {r["node"]: r["plugin"] for r in doc["rejected"] if r["node"] in made}
    assert rejected == dict.fromkeys(made, "NodeAffinity")


async def test_an_identity_that_may_not_list_pods_is_one_line(
    cp: ControlPlane, capsys: pytest.CaptureFixture[str]
) -> None:
    nobody = cp.kubeconfig_for(token="not-a-known-token")
    argv = ["explain", "default/packed", "--kubeconfig", str(nobody)]
    assert await asyncio.to_thread(main, argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("kubesched: error: cannot list pods on https://"), err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
