"""The chart under test and the ``helm`` binary that renders and installs it.

``KUBESCHED_HELM`` names the binary (``tests/helm/build`` prints its directory; ``.ci/run``
sets the variable). Without it the tests that need helm skip, saying how to get one;
under CI (``CI`` set) or with ``KUBESCHED_E2E=1``, the session builds it first (or finds
it in the build's cache) as tests/e2e does the control plane, so the README's test
command alone runs them; a build that fails stops the session.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "helm" / "kubesched"
BUILD = Path(__file__).resolve().parent / "build"
HELM_ENV = "KUBESCHED_HELM"
HOW_TO_GET_HELM = (
    f"chart tests need a helm v3 binary: run tests/helm/build and set {HELM_ENV}=<dir>/helm "
    "(the directory is the last line it prints)"
)

JSON = dict[str, Any]


class HelmError(RuntimeError):
    """helm exited non-zero; the message is its stderr."""

    def __init__(self, args: Sequence[str], stderr: str) -> None:
        super().__init__(f"helm {' '.join(args)}: {stderr.strip()}")
        self.stderr = stderr


@dataclass(frozen=True)
class Helm:
    binary: Path

    def __call__(self, *args: str, kubeconfig: Path | None = None, timeout: float = 120) -> str:
        argv = [str(self.binary), *args]
        if kubeconfig is not None:
            argv += ["--kubeconfig", str(kubeconfig)]
        with tempfile.TemporaryDirectory(prefix="kubesched-helm-") as home:
            # a throw-away helm home: no user repositories, caches or plugins leak in
            env = {
                "PATH": os.environ.get("PATH", ""),
                "HOME": home,
                "HELM_CACHE_HOME": f"{home}/cache",
                "HELM_CONFIG_HOME": f"{home}/config",
                "HELM_DATA_HOME": f"{home}/data",
            }
            done = subprocess.run(
                argv, capture_output=True, text=True, env=env, timeout=timeout, check=False
            )
        if done.returncode != 0:
            raise HelmError(args, done.stderr)
        return done.stdout

    def template(
        self,
        release: str = "ks",
        namespace: str = "kubesched",
        values: Mapping[str, Any] | None = None,
        *,
        api_versions: Iterable[str] = (),
    ) -> list[JSON]:
        """``helm template`` of the chart: the rendered objects (CRDs not included)."""
        with values_file(values) as path:
            args = ["template", release, str(CHART), "--namespace", namespace, "-f", str(path)]
            for v in api_versions:
                args += ["--api-versions", v]
            out = self(*args)
        return [d for d in yaml.safe_load_all(out) if d]

    def install(
        self,
        release: str,
        namespace: str,
        values: Mapping[str, Any] | None,
        *,
        kubeconfig: Path,
    ) -> str:
        with values_file(values) as path:
            return self(
                "install",
                release,
                str(CHART),
                "--namespace",
                namespace,
                "--create-namespace",
                "-f",
                str(path),
                kubeconfig=kubeconfig,
            )


@contextlib.contextmanager
def values_file(values: Mapping[str, Any] | None) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="kubesched-values-") as tmp:
        path = Path(tmp) / "values.yaml"
        path.write_text(yaml.safe_dump(dict(values or {})))
        yield path


def find_helm() -> Helm:
    """The helm binary, or skip (fail under CI) with how to get one."""
    binary = os.environ.get(HELM_ENV)
    if not binary:
        if os.environ.get("CI"):
            pytest.fail(f"{HELM_ENV} is not set under CI: {HOW_TO_GET_HELM}")
        pytest.skip(HOW_TO_GET_HELM)
    path = Path(binary)
    if path.is_dir():
        path = path / "helm"
    if not os.access(path, os.X_OK):
        pytest.fail(f"{HELM_ENV}={binary}: not an executable helm binary")
    return Helm(path)


@pytest.fixture(scope="session")
def helm() -> Helm:
    return find_helm()


def of_kind(objects: Iterable[JSON], kind: str) -> list[JSON]:
    return [o for o in objects if o.get("kind") == kind]


def one(objects: Iterable[JSON], kind: str) -> JSON:
    found = of_kind(objects, kind)
    assert len(found) == 1, f"expected one {kind}, got {len(found)}"
    return found[0]


def deployment_container(objects: Iterable[JSON]) -> JSON:
    """The scheduler's container in the rendered Deployment."""
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    return dict(container)


AUTH_DELEGATOR = "system:auth-delegator"


def scheduler_binding(objects: Iterable[JSON]) -> JSON:
    """The ClusterRoleBinding of the scheduler's own ClusterRole (the other one binds
    system:auth-delegator, for its TokenReviews and SubjectAccessReviews)."""
    found = [
        b for b in of_kind(objects, "ClusterRoleBinding") if b["roleRef"]["name"] != AUTH_DELEGATOR
    ]
    assert len(found) == 1, f"expected one binding of the scheduler's role, got {len(found)}"
    return found[0]


def scheduler_role(objects: Iterable[JSON]) -> JSON:
    """The scheduler's own ClusterRole (not the readers' or the aggregated ones)."""
    objects = list(objects)
    name = scheduler_binding(objects)["roleRef"]["name"]
    (role,) = [r for r in of_kind(objects, "ClusterRole") if r["metadata"]["name"] == name]
    return role


OLD_HELM_VERSION = "v3.17.4"
OLD_HELM_ENV = "KUBESCHED_HELM_OLD"


def find_old_helm() -> Helm:
    """The oldest helm 3 the chart supports (``KUBESCHED_HELM_OLD``, else the cache
    ``tests/helm/build`` fills), or skip saying how to build it."""
    binary = os.environ.get(OLD_HELM_ENV) or str(
        Path.home() / ".cache" / "kubesched" / "helm" / OLD_HELM_VERSION / "helm"
    )
    path = Path(binary)
    if path.is_dir():
        path = path / "helm"
    if not os.access(path, os.X_OK):
        pytest.skip(
            f"no helm {OLD_HELM_VERSION} at {path}: build it with "
            f"KUBESCHED_HELM_VERSION={OLD_HELM_VERSION} tests/helm/build and set "
            f"{OLD_HELM_ENV}=<dir>/helm (the directory is the last line it prints)"
        )
    return Helm(path)


def _build_helm(version: str | None) -> str:
    """``tests/helm/build`` (which reuses its cache): the helm binary it prints."""
    env = dict(os.environ)
    if version:
        env["KUBESCHED_HELM_VERSION"] = version
    log = (
        Path(tempfile.gettempdir()) / f"kubesched-helm-build{'-' + version if version else ''}.log"
    )
    with log.open("w") as stderr:
        result = subprocess.run(
            [str(BUILD)], stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, check=False
        )
    lines = result.stdout.strip().splitlines()
    if result.returncode != 0 or not lines:
        raise pytest.UsageError(f"{BUILD} failed ({result.returncode}); see {log}")
    return str(Path(lines[-1]) / "helm")


def prepare_helms() -> None:
    """Under CI (or ``KUBESCHED_E2E=1``), build the helms the chart tests use when their
    variables are unset, as ``.ci/run`` does, and set the variables for this session.
    Called once, after collection, when a collected test needs helm: a cold build takes
    about a minute, longer than a test may."""
    if not (os.environ.get("CI") or os.environ.get("KUBESCHED_E2E") == "1"):
        return
    if not os.environ.get(HELM_ENV):
        os.environ[HELM_ENV] = _build_helm(None)
    if not os.environ.get(OLD_HELM_ENV):
        os.environ[OLD_HELM_ENV] = _build_helm(OLD_HELM_VERSION)
