"""Every scenario of the corpus through `kubesched simulate --scenario F --output json`.

Each file under tests/scenarios/ starts with a line
``# expect: ns/name=NODE ns/name=n1|n2 ns/name=Unschedulable ns/name=Waiting`` saying
what kube-scheduler does with it (a ``|`` list where its choice is not unique). Each
preemption scenario's second line, ``# victims: ns/name ...`` (or ``# victims: none``),
names exactly the pods kube-scheduler evicts. The same files feed the differential test
against the real kube-scheduler, whose order among equal pods listed at start is not
fixed: the expectations must hold with the pending pods listed the other way round too.
"""

from __future__ import annotations

import pathlib
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
import yaml

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


def _pending(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The pods of a scenario's documents that are to be scheduled (no ``nodeName``)."""
    return [
        d
        for d in docs
        if d.get("kind") == "Pod"
        and d["metadata"].get("name")
        and not (d.get("spec") or {}).get("nodeName")
    ]


def _queued_in_reverse(path: pathlib.Path, into: pathlib.Path) -> dict[str, str]:
    """``path`` with its pending pods renamed so that they sort the other way round
    (``r002-a``, ``r001-b``) into ``into``; new key -> old key."""
    docs = [d for d in yaml.safe_load_all(path.read_text()) if d]
    pending = _pending(docs)
    keys = sorted(
        (d["metadata"].get("namespace") or "default", d["metadata"]["name"]) for d in pending
    )
    new_name = {key: f"r{len(keys) - i:03d}-{key[1]}" for i, key in enumerate(keys)}
    for d in pending:
        key = (d["metadata"].get("namespace") or "default", d["metadata"]["name"])
        d["metadata"]["name"] = new_name[key]
    into.write_text(yaml.safe_dump_all(docs))
    return {f"{ns}/{new}": f"{ns}/{old}" for (ns, old), new in new_name.items()}


REORDERED = [
    p
    for p in FILES
    if p.parent.name != "gang"  # its members' order is kube's member order (see docs)
    and len(_pending([d for d in yaml.safe_load_all(p.read_text()) if d])) > 1
]


@pytest.mark.parametrize("path", REORDERED, ids=[str(p.relative_to(CORPUS)) for p in REORDERED])
def test_expectations_hold_whatever_order_the_pending_pods_are_listed_in(
    path: pathlib.Path,
    tmp_path: pathlib.Path,
    capsys: pytest.CaptureFixture[str],
    deleted_pods: list[str],
) -> None:
    # kubesched queues equal pods listed at start by name; kube-scheduler 1.37 in the
    # order its streaming list delivers them, which is not fixed. An expectation that
    # holds in one order only flakes in the differential test (limit-range.yaml did,
    # once in a fresh-clone run): the corpus states what holds in any order.
    reordered = tmp_path / path.name
    old_key = _queued_in_reverse(path, reordered)
    code = cli.main(["simulate", "--scenario", str(reordered), "--output", "json", "--seed", "0"])
    assert code == 0
    doc = orjson.loads(capsys.readouterr().out)
    got = {}
    for p in doc["pods"]:
        key = f"{p['namespace']}/{p['name']}"
        got[old_key.get(key, key)] = p["node"] or p["status"]
    for key, allowed in expectations(path).items():
        assert got.get(key) in allowed, (
            f"{key}: expected {sorted(allowed)}, got {got.get(key)} with the pending pods "
            "listed the other way round"
        )
    evicted = victims(path)
    if evicted is not None:
        assert {old_key.get(k, k) for k in deleted_pods} == evicted
