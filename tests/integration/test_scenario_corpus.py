"""Every scenario of the corpus through `kubesched simulate --scenario F --output json`.

Each file under tests/scenarios/ starts with a line
``# expect: ns/name=NODE ns/name=n1|n2 ns/name=Unschedulable ns/name=Waiting`` saying
what kube-scheduler does with it (a ``|`` list where its choice is not unique). The
same files feed the differential test against the real kube-scheduler.
"""

from __future__ import annotations

import pathlib

import orjson
import pytest

from kubesched import cli

CORPUS = pathlib.Path(__file__).resolve().parent.parent / "scenarios"
FILES = sorted(CORPUS.rglob("*.yaml"))


def expectations(path: pathlib.Path) -> dict[str, set[str]]:
    first = path.read_text().splitlines()[0]
    assert first.startswith("# expect:"), f"{path} must start with an '# expect:' line"
    out: dict[str, set[str]] = {}
    for item in first.removeprefix("# expect:").split():
        key, _, value = item.partition("=")
        out[key] = set(value.split("|"))
    return out


def test_the_corpus_covers_every_plugin_family() -> None:
    families = {p.parent.name for p in FILES}
    assert {
        "node-affinity",
        "node-ports",
        "image-locality",
        "pod-topology-spread",
        "inter_pod_affinity",
        "preemption",
        "scheduling-gates",
        "gang",
    } <= families


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(CORPUS)) for p in FILES])
def test_scenario_places_pods_as_kube_scheduler_does(
    path: pathlib.Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expected = expectations(path)
    code = cli.main(["simulate", "--scenario", str(path), "--output", "json", "--seed", "0"])
    out = capsys.readouterr().out
    assert code == 0
    doc = orjson.loads(out)
    got = {
        f"{p['namespace']}/{p['name']}": (p["node"] or p["status"], p["message"])
        for p in doc["pods"]
    }
    for key, allowed in expected.items():
        assert key in got, f"{key} missing from the simulation output"
        where, message = got[key]
        assert where in allowed, f"{key}: expected {sorted(allowed)}, got {where} ({message})"
        if where == "Unschedulable":
            assert message.startswith("0/"), "kube-scheduler's message shape"
