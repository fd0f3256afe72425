"""Every scenario of the corpus through `kubesched simulate --scenario F --output json`.

Each file under tests/scenarios/ starts with a line
``# expect: ns/name=NODE ns/name=n1|n2 ns/name=Unschedulable ns/name=Waiting`` saying
what kube-scheduler does with it (a ``|`` list where its choice is not unique). Each
preemption scenario's second line, ``# victims: ns/name ...`` (or ``# victims: none``),
names exactly the pods kube-scheduler evicts. The same files feed the differential test
against the real kube-scheduler.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator

import orjson
import pytest

from kubesched import cli
from kubesched.cluster.memory import MemoryCluster

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


def victims(path: pathlib.Path) -> set[str] | None:
    """The ``# victims:`` line (second line): the pods evicted; None when absent."""
    lines = path.read_text().splitlines()
    if len(lines) < 2 or not lines[1].startswith("# victims:"):
        return None
    names = lines[1].removeprefix("# victims:").split()
    return set() if names == ["none"] else set(names)


@pytest.fixture
def deleted_pods(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The keys of the pods the simulated scheduler deletes (preemption victims)."""
    out: list[str] = []
    delete = MemoryCluster.delete

    def recording(self: MemoryCluster, kind: str, key: str) -> None:
        if kind == "Pod":
            out.append(key)
        delete(self, kind, key)

    monkeypatch.setattr(MemoryCluster, "delete", recording)
    yield out


PREEMPTION = [p for p in FILES if p.parent.name == "preemption"]


@pytest.mark.parametrize("path", PREEMPTION, ids=[p.name for p in PREEMPTION])
def test_preemption_scenarios_name_their_victims(path: pathlib.Path) -> None:
    assert victims(path) is not None, (
        f"{path}: the second line must be '# victims: ns/name ...' or '# victims: none'"
    )


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
    path: pathlib.Path, capsys: pytest.CaptureFixture[str], deleted_pods: list[str]
) -> None:
    expected = expectations(path)
    evicted = victims(path)
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
            # kube-scheduler's shape; a gang's members say the gang's reason, which ends
            # with the first unplaced member's ``0/N nodes are available: ...`` (or names
            # the placements tried), see docs/differences.md.
            gang = message.startswith('pod group "') and (
                ": 0/" in message or "placements are available" in message
            )
            # a Kubernetes PodGroup whose pods disagree is not tried: kube's error
            disagree = message.startswith("all pods in a single pod group should have")
            # no node at all: kube's ErrNoNodesAvailable, as it is
            bare = message == "no nodes available to schedule pods"
            assert message.startswith("0/") or gang or disagree or bare, (
                "kube-scheduler's message shape"
            )
    if evicted is not None:
        assert set(deleted_pods) == evicted, (
            f"evicted {sorted(deleted_pods)}, kube-scheduler evicts {sorted(evicted)}"
        )
