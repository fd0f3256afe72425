"""The Dockerfile, read as text (no Docker engine here to build it): multi-stage, a slim
non-root runtime without build tools, ``kubesched run`` as the entrypoint, and a user
that matches the chart's securityContext."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

import yaml

from tests.helm.chart import CHART, REPO

BUILD_TOOLS = re.compile(
    r"\b(apt-get|apt|apk|yum|dnf|gcc|g\+\+|cc|make|build-essential|git|curl|wget)\b"
)


@dataclass
class Stage:
    base: str
    name: str | None
    instructions: list[tuple[str, str]] = field(default_factory=list)

    def all(self, keyword: str) -> list[str]:
        return [arg for kw, arg in self.instructions if kw == keyword]


def parse(text: str) -> list[Stage]:
    """Instructions per stage; continuation lines joined, comments dropped."""
    stages: list[Stage] = []
    logical, current = [], ""
    for line in text.splitlines():
        if line.lstrip().startswith("#") or not line.strip():
            continue
        if line.rstrip().endswith("\\"):
            current += line.rstrip()[:-1] + " "
            continue
        logical.append(current + line)
        current = ""
    for line in logical:
        keyword, _, arg = line.strip().partition(" ")
        keyword, arg = keyword.upper(), arg.strip()
        if keyword == "FROM":
            m = re.fullmatch(r"(\S+)(?:\s+AS\s+(\S+))?", arg, re.IGNORECASE)
            assert m, arg
            stages.append(Stage(m.group(1), m.group(2)))
        else:
            assert stages, f"{keyword} before FROM"
            stages[-1].instructions.append((keyword, arg))
    return stages


STAGES = parse((REPO / "Dockerfile").read_text())
FINAL = STAGES[-1]


def test_multi_stage_on_python_311_slim() -> None:
    assert len(STAGES) >= 2
    assert all(s.base == "python:3.11-slim" for s in STAGES)
    build = STAGES[0]
    assert any("pip wheel" in r for r in build.all("RUN")), "the first stage builds wheels"


def test_final_stage_is_non_root() -> None:
    (user,) = FINAL.all("USER")
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0, "a numeric non-root UID (runAsNonRoot checks it)"
    # USER comes after the last RUN: nothing runs as root afterwards but the entrypoint
    kinds = [kw for kw, _ in FINAL.instructions]
    assert kinds.index("USER") > max(i for i, kw in enumerate(kinds) if kw == "RUN")
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert values["podSecurityContext"]["runAsUser"] == int(uid)


def test_final_stage_has_no_build_tools() -> None:
    for run in FINAL.all("RUN"):
        assert not BUILD_TOOLS.search(run), f"the runtime stage installs a build tool: {run}"
    # wheels come from the build stage; pip itself is removed once they are installed
    (run,) = FINAL.all("RUN")
    assert "--no-index" in run and "from=build" in run
    assert re.search(r"pip uninstall --yes pip setuptools wheel", run)
    assert not FINAL.all("COPY"), "the runtime copies nothing in: the wheels are bind-mounted"


def test_entrypoint_is_kubesched_run() -> None:
    (entrypoint,) = FINAL.all("ENTRYPOINT")
    assert json.loads(entrypoint) == ["kubesched", "run"]
    assert FINAL.all("EXPOSE") == ["10251"]


def test_runtime_needs_no_writable_root() -> None:
    (env,) = FINAL.all("ENV")
    assert "PYTHONDONTWRITEBYTECODE=1" in env  # no .pyc writes on a read-only root
    assert "HOME=/tmp" in env  # the chart's emptyDir


def test_build_context_is_only_the_package() -> None:
    ignore = (REPO / ".dockerignore").read_text().split()
    assert ignore[ignore.index("*") :][:5] == [
        "*",
        "!pyproject.toml",
        "!README.md",
        "!constraints.txt",
        "!operator/",
    ]
    copied = " ".join(STAGES[0].all("COPY"))
    assert "pyproject.toml" in copied and "operator" in copied


def test_the_image_installs_the_tested_dependency_set() -> None:
    """The wheels are built under constraints.txt, the set CI installs and tests."""
    copied = " ".join(STAGES[0].all("COPY"))
    assert "constraints.txt" in copied
    (wheel,) = [r for r in STAGES[0].all("RUN") if "pip wheel" in r]
    assert "--constraint constraints.txt" in wheel
