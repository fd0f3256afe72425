"""E2E tests: a real etcd + kube-apiserver on loopback (see tests/controlplane).

Binaries come from ``KUBESCHED_CONTROLPLANE_DIR`` (what ``tests/controlplane/build``
prints; ``.ci/run`` sets it). Without it, the build runs here when ``CI`` is set or
``KUBESCHED_E2E=1`` (before the tests, outside their timeout); otherwise e2e tests skip.

Fixtures:

- ``controlplane`` (session): one shared ControlPlane. Shared means: use your own
  namespace (``namespace`` fixture), and do not assume you are alone with the nodes.
- ``controlplane_factory`` (function): ``start(**kwargs) -> ControlPlane`` for an isolated
  control plane of your own (own nodes, own identities), stopped after the test.
- ``namespace`` (function): a fresh namespace in the shared control plane.
- ``controlplane_binaries`` (session): the Binaries.
- ``crds`` (session): kubesched's CRDs installed in the shared control plane.
- ``kubesched`` (function): ``kubesched run`` on the shared control plane, its Runtime.
"""

from __future__ import annotations

import gc
import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from kubesched.operator.run import Runtime
from tests.controlplane import Binaries, ControlPlane
from tests.e2e.support import install_crds, local_settings, running

E2E_DIR = Path(__file__).parent
BUILD = E2E_DIR.parent / "controlplane" / "build"
HOW_TO_ENABLE = (
    "e2e tests need the real control plane: run tests/controlplane/build and set "
    "KUBESCHED_CONTROLPLANE_DIR=<dir> (the last line it prints), or set KUBESCHED_E2E=1"
)

_binaries_key = pytest.StashKey[Binaries | str]()


def _is_e2e(item: pytest.Item) -> bool:
    return E2E_DIR in item.path.parents


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _is_e2e(item):
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="module", autouse=True)
def _collected_at_the_module_end() -> Iterator[None]:
    """What a module's tests left unclosed (a connection, a socket) is collected at the
    module's end, so that its ResourceWarning (an error) fails the module's last test:
    not the next test that happens to run the collector (``KubeschedThread`` does), in
    another module, as an unclosed socket of a closed event loop did."""
    yield
    gc.collect()


def _find_binaries() -> Binaries | str:
    """The binaries, or why there are none (the skip message)."""
    directory = os.environ.get("KUBESCHED_CONTROLPLANE_DIR")
    if not directory:
        if not (os.environ.get("CI") or os.environ.get("KUBESCHED_E2E") == "1"):
            return HOW_TO_ENABLE
        log = Path(os.environ.get("TMPDIR", "/tmp")) / "kubesched-controlplane-build.log"
        with log.open("w") as stderr:
            result = subprocess.run(
                [str(BUILD)], stdout=subprocess.PIPE, stderr=stderr, text=True, check=False
            )
        lines = result.stdout.strip().splitlines()
        if result.returncode != 0 or not lines:
            # under CI a broken build must fail loudly, not skip
            raise pytest.UsageError(f"{BUILD} failed ({result.returncode}); see {log}")
        directory = lines[-1]
    try:
        return Binaries.from_dir(directory)
    except FileNotFoundError as err:
        raise pytest.UsageError(f"KUBESCHED_CONTROLPLANE_DIR: {err}") from None


def pytest_collection_finish(session: pytest.Session) -> None:
    # Resolve (maybe build) once, before any test runs: a cold build takes far longer than
    # the per-test timeout, so it cannot happen inside a fixture.
    if any(_is_e2e(item) for item in session.items):
        session.config.stash[_binaries_key] = _find_binaries()


@pytest.fixture(scope="session")
def controlplane_binaries(request: pytest.FixtureRequest) -> Binaries:
    found = request.config.stash.get(_binaries_key, None)
    if found is None:
        found = request.config.stash[_binaries_key] = _find_binaries()
    if isinstance(found, str):
        pytest.skip(found)
    return found


@pytest.fixture(scope="session")
def controlplane(controlplane_binaries: Binaries) -> Iterator[ControlPlane]:
    with ControlPlane(controlplane_binaries) as cp:
        yield cp


@pytest.fixture
def controlplane_factory(
    controlplane_binaries: Binaries,
) -> Iterator[Callable[..., ControlPlane]]:
    started: list[ControlPlane] = []

    def start(**kwargs: Any) -> ControlPlane:
        cp = ControlPlane(controlplane_binaries, **kwargs)
        started.append(cp)
        cp.start()
        return cp

    yield start
    for cp in reversed(started):
        cp.stop()


@pytest.fixture
def namespace(controlplane: ControlPlane) -> Iterator[str]:
    name = f"e2e-{uuid.uuid4().hex[:8]}"
    controlplane.ensure_namespace(name)
    yield name
    # no namespace controller runs: deleting would leave it Terminating with its objects;
    # delete the pods so they stop counting on the shared nodes
    for pod in controlplane.api.list("v1", "Pod", name):
        controlplane.api.remove("v1", "Pod", pod["metadata"]["name"], name, grace_period_seconds=0)


@pytest.fixture(scope="session")
def crds(controlplane: ControlPlane) -> None:
    """kubesched's CRDs in the shared control plane (before ``kubesched`` starts)."""
    install_crds(controlplane)


@pytest.fixture
async def kubesched(controlplane: ControlPlane, crds: None) -> AsyncIterator[Runtime]:
    """``kubesched run`` on the shared control plane (admin identity, no leader
    election, the default scheduler name), ready, for one test."""
    async with running(local_settings(controlplane.kubeconfig)) as started:
        yield started.runtime
