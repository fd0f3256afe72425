"""``kubesched validate``: every problem of every document with its path, files,
directories and stdin, warnings on suspicious profiles, other kinds labelled by kind,
and a KubeSchedulerConfiguration imported (``--convert``)."""

from __future__ import annotations

import io
import os
import threading
from pathlib import Path

import pytest
import yaml

from kubesched.cli import main

PROFILES = """\
apiVersion: v1
kind: Pod
metadata: {name: web, namespace: team}
---
apiVersion: kubesched.dev/v1alpha1
kind: SchedulingProfile
metadata: {name: x}
spec:
  schedulerName: "Bad Name"
  percentageOfNodesToScore: 200
  plugins:
    score:
      enabled: [{name: Nope}]
  pluginConfig:
  - name: NodeResourcesFit
    args: {scoringStrategy: {type: Most}}
---
apiVersion: kubesched.dev/v1alpha1
kind: SchedulingProfile
metadata: {name: legacy}
spec:
  schedulerName: default-scheduler
  plugins:
    multiPoint:
      disabled: [{name: InterPodAffinity}]
  pluginConfig:
  - name: InterPodAffinity
    args: {hardPodAffinityWeight: 2}
---
apiVersion: kubesched.dev/v1alpha1
kind: SchedulingProfile
metadata: {name: bare}
"""

KSC = """\
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
percentageOfNodesToScore: 30
podMaxBackoffSeconds: 20
profiles:
- schedulerName: bin-packing
  plugins:
    score:
      disabled: [{name: NodeResourcesBalancedAllocation}]
  pluginConfig:
  - name: NodeResourcesFit
    args:
      apiVersion: kubescheduler.config.k8s.io/v1
      kind: NodeResourcesFitArgs
      scoringStrategy: {type: MostAllocated}
- schedulerName: quick
  percentageOfNodesToScore: 10
"""


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str], str]:
    code = main(["validate", *argv])
    out, err = capsys.readouterr()
    return code, out.splitlines(), err


def test_every_problem_of_every_document(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "profiles.yaml"
    path.write_text(PROFILES)
    code, lines, _ = run(capsys, str(path))
    assert code == 1
    x = f'{path}: document 1 (SchedulingProfile "x"): Ready=False '
    assert lines == [
        f"{path}: document 0 (Pod team/web): skipped: not a SchedulingProfile",
        x + "InvalidSpec: spec.schedulerName: String should match pattern "
        "'^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$'",
        x + "InvalidSpec: spec.percentageOfNodesToScore: Input should be less than or equal to 100",
        x + "InvalidArgs: spec.pluginConfig[0].args.scoringStrategy.type: Input should be "
        "'LeastAllocated', 'MostAllocated' or 'RequestedToCapacityRatio'",
        lines[4],
        f'{path}: document 2 (SchedulingProfile "legacy"): warning: spec.schedulerName: '
        "'default-scheduler' is kube-scheduler's: both would schedule the same pods, unless "
        "kube-scheduler is not running",
        f'{path}: document 2 (SchedulingProfile "legacy"): warning: spec.pluginConfig[0]: '
        "args for 'InterPodAffinity', which is not enabled: they have no effect",
        f'{path}: document 2 (SchedulingProfile "legacy"): Ready=True Compiled',
        f'{path}: document 3 (SchedulingProfile "bare"): warning: no spec: kube-scheduler\'s '
        "default plugins, serving schedulerName 'kubesched'",
        f'{path}: document 3 (SchedulingProfile "bare"): Ready=True Compiled',
    ]
    assert lines[4].startswith(
        x + "InvalidPlugin: spec.plugins.score.enabled[0].name: unknown plugin 'Nope' (known: "
    )


def test_directories_and_stdin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "a.yml").write_text(PROFILES.split("---\n")[3])
    (tmp_path / "notes.txt").write_text("not yaml: [")
    monkeypatch.setattr("sys.stdin", io.StringIO(PROFILES.split("---\n")[2]))
    code, lines, _ = run(capsys, str(tmp_path), "-")
    assert code == 0
    assert lines[0] == f'{tmp_path}/sub/a.yml: document 0 (SchedulingProfile "bare"): ' + (
        "warning: no spec: kube-scheduler's default plugins, serving schedulerName 'kubesched'"
    )
    assert lines[-1] == '<stdin>: document 0 (SchedulingProfile "legacy"): Ready=True Compiled'


def test_a_pipe_is_read_as_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``kubesched validate <(helm template ...)``: the shell passes /dev/fd/N, a pipe, not
    a regular file (it used to be refused as 'no such file or directory')."""
    fifo = tmp_path / "profiles"
    os.mkfifo(fifo)

    def feed() -> None:
        with open(fifo, "w") as f:
            f.write(PROFILES.split("---\n")[2])

    writer = threading.Thread(target=feed, daemon=True)  # blocks until the fifo is read
    writer.start()
    try:
        code, lines, _ = run(capsys, str(fifo))
    finally:
        writer.join(10)
    assert code == 0
    assert lines[-1] == f'{fifo}: document 0 (SchedulingProfile "legacy"): Ready=True Compiled'
    assert run(capsys, "/dev/null")[:2] == (1, ["/dev/null: no documents in the file"])
    missing = run(capsys, str(tmp_path / "nope.yaml"))
    assert missing[0] == 2 and "nope.yaml: no such file or directory" in missing[2]


def test_schedulername_conflicts_across_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bare = PROFILES.split("---\n")[3]
    (tmp_path / "a.yaml").write_text(bare)
    (tmp_path / "b.yaml").write_text(bare.replace("name: bare", "name: other"))
    code, lines, _ = run(capsys, str(tmp_path / "a.yaml"), str(tmp_path / "b.yaml"))
    assert code == 1
    assert (
        f'{tmp_path}/b.yaml: document 0 (SchedulingProfile "other"): Ready=False '
        "SchedulerNameConflict: spec.schedulerName: 'kubesched' is already served by "
        f'{tmp_path}/a.yaml: document 0 (SchedulingProfile "bare")'
    ) in lines


def test_nothing_to_check_is_invalid(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty.yaml").write_text("# nothing\n")
    code, lines, _ = run(capsys, str(tmp_path / "empty.yaml"))
    assert code == 1
    assert lines[0] == f"{tmp_path}/empty.yaml: no documents in the file"


def test_a_kube_scheduler_configuration_is_imported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(KSC)
    code, lines, _ = run(capsys, str(path))
    assert code == 0
    where = f"{path}: document 0 (KubeSchedulerConfiguration)"
    assert lines == [
        f'{where} profiles[0] (SchedulingProfile "bin-packing"): Ready=True Compiled',
        f'{where} profiles[1] (SchedulingProfile "quick"): Ready=True Compiled',
    ]
    code, out, err = run(capsys, "--convert", str(path))
    assert (code, err) == (0, "")
    converted = list(yaml.safe_load_all("\n".join(out)))
    assert converted == [
        {
            "apiVersion": "kubesched.dev/v1alpha1",
            "kind": "SchedulingProfile",
            "metadata": {"name": "bin-packing"},
            "spec": {
                "schedulerName": "bin-packing",
                "plugins": {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}},
                "pluginConfig": [
                    {
                        "name": "NodeResourcesFit",
                        "args": {"scoringStrategy": {"type": "MostAllocated"}},
                    }
                ],
                "percentageOfNodesToScore": 30,
                "backoff": {"maxSeconds": 20},
            },
        },
        {
            "apiVersion": "kubesched.dev/v1alpha1",
            "kind": "SchedulingProfile",
            "metadata": {"name": "quick"},
            "spec": {
                "schedulerName": "quick",
                "percentageOfNodesToScore": 10,
                "backoff": {"maxSeconds": 20},
            },
        },
    ]
    # what --convert prints is valid as it stands
    (tmp_path / "converted.yaml").write_text("\n".join(out))
    assert main(["validate", str(tmp_path / "converted.yaml")]) == 0


def test_a_kube_scheduler_configuration_with_bad_args_is_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "config.yaml"
    path.write_text(
        KSC.replace("MostAllocated", "Most").replace("profiles:", "extenders: [{}]\nprofiles:")
    )
    code, lines, _ = run(capsys, str(path))
    assert code == 1
    where = f"{path}: document 0 (KubeSchedulerConfiguration)"
    assert (
        lines[0] == f"{where}: warning: extenders: kubesched calls no scheduler extenders; dropped"
    )
    assert lines[1].startswith(
        f'{where} profiles[0] (SchedulingProfile "bin-packing"): Ready=False InvalidArgs: '
        "spec.pluginConfig[0].args.scoringStrategy.type: Input should be"
    )
