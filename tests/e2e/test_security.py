"""Security (issue 9, item 6) on the real kube-apiserver, RBAC enforced, the chart's
ServiceAccount (test_helm_install proves each rule is needed; this proves what is *not*
granted and what never leaks):

- ``kubesched run`` at ``--log-level=debug`` with the ServiceAccount's bearer-token
  kubeconfig binds, fails a pod, refuses a bad SchedulingProfile and serves its HTTP
  endpoints, and neither the token nor any line of the kubeconfig appears in its output;
  a run with a wrong token (401 at start) does not print the token either;
- /metrics, /explain and /debug/cache show no env value, no Secret data, no token (a pod
  with a secret-looking env value and one that references a Secret);
- the ServiceAccount can read no Secret and cannot update or patch pods, nodes or
  itself into more rights (SubjectAccessReview), only bind pods and patch their status.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.controlplane import ControlPlane
from tests.e2e.helm_support import (
    POOL,
    Release,
    install,
    sa_kubeconfig,
    uid,
)
from tests.e2e.support import condition, events_for
from tests.helm.chart import Helm, helm

__all__ = ["helm"]

pytestmark = pytest.mark.timeout(180)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Run:
    """The Deployment's command (as test_helm_install's Replica starts it), at debug log
    level, on a known port, output captured to a file."""

    def __init__(self, cp: ControlPlane, release: Release, kubeconfig: Path) -> None:
        container = release.container
        env = {k: v for k, v in os.environ.items() if not k.startswith("KUBESCHED_")}
        fields = {"metadata.namespace": release.namespace, "metadata.name": f"sec-{uid()}"}
        for e in container["env"]:
            if "value" in e:
                env[e["name"]] = e["value"]
            else:
                env[e["name"]] = fields[e["valueFrom"]["fieldRef"]["fieldPath"]]
        self.port = free_port()
        # the chart runs with --delegate-auth: the endpoints want a token the API server
        # vouches for and allows (the admin's, here: what they serve is under test)
        self.token = cp.admin_token
        argv = [sys.executable, "-m", "kubesched", "run", *container["args"]]
        argv += [f"--port={self.port}", f"--kubeconfig={kubeconfig}", "--log-level=debug"]
        self.log = Path(cp.dir) / f"kubesched-security-{uid()}.log"
        with self.log.open("w") as out:
            self.proc = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log.read_text()

    def get(self, path: str) -> str:
        req = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            headers={"Authorization": f"Bearer {self.token}"},
        )
        try:
            with urllib.request.urlopen(req, timeout=10) as r:
                return str(r.read().decode())
        except urllib.error.HTTPError as e:
            e.close()  # its connection, now: not in a later test's garbage collection
            raise

    def ready(self) -> bool:
        """/readyz says 200: the caches synced and Kopf started (which can come after
        the first binds: scheduling waits for the caches only)."""
        try:
            self.get("/readyz")
        except (urllib.error.HTTPError, urllib.error.URLError):
            return False
        return True

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        return self.proc.wait(30)


def secret_lines(kubeconfig: Path) -> list[str]:
    """The token and every line of the kubeconfig that carries a credential."""
    out = []
    for line in kubeconfig.read_text().splitlines():
        key, _, value = line.strip().partition(":")
        value = value.strip()
        if key in ("token", "client-key-data", "client-certificate-data", "password"):
            out.append(value)
    assert out, "the kubeconfig holds no credential to look for"
    return out


@pytest.fixture(scope="module")
def release(helm: Helm, controlplane: ControlPlane) -> Iterator[Release]:
    tag = uid()
    rel = install(helm, controlplane, "sec", f"sec-{tag}", {"schedulerName": f"sec-{tag}"})
    controlplane.create_nodes(1, cpu="2", labels={POOL: tag}, prefix=f"sec-{tag}-")
    yield rel


def pod(
    cp: ControlPlane, release: Release, name: str, *, cpu: str = "100m", **extra: object
) -> None:
    container: dict[str, object] = {
        "name": "c",
        "image": "pause",
        "resources": {"requests": {"cpu": cpu}},
        **extra,
    }
    cp.api.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "namespace": release.namespace},
            "spec": {"schedulerName": release.scheduler_name, "containers": [container]},
        }
    )


def wait(what: str, check: object, run: Run, within: float = 90.0) -> None:
    deadline = time.monotonic() + within
    while not check():  # type: ignore[operator]
        assert run.proc.poll() is None, f"kubesched exited: {run.output()[-3000:]}"
        assert time.monotonic() < deadline, f"{what} not within {within} s: {run.output()[-3000:]}"
        time.sleep(0.3)


def test_no_credential_in_logs_or_endpoints(controlplane: ControlPlane, release: Release) -> None:
    cp, ns = controlplane, release.namespace
    kubeconfig = sa_kubeconfig(cp, release)
    creds = secret_lines(kubeconfig)
    env_value = f"hunter2-{uid()}{uid()}"
    secret_value = f"topsecret-{uid()}{uid()}"
    cp.api.create(
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "db", "namespace": ns},
            "stringData": {"password": secret_value},
        }
    )
    run = Run(cp, release, kubeconfig)
    try:
        fits, nofit, env_pod, ref_pod = (f"{p}-{uid()}" for p in ("fits", "nofit", "env", "ref"))
        pod(cp, release, fits)
        pod(cp, release, nofit, cpu="64")
        pod(cp, release, env_pod, env=[{"name": "DB_PASSWORD", "value": env_value}])
        pod(
            cp,
            release,
            ref_pod,
            cpu="64",
            env=[
                {
                    "name": "DB_PASSWORD",
                    "valueFrom": {"secretKeyRef": {"name": "db", "key": "password"}},
                }
            ],
        )
        # a SchedulingProfile of this release that does not compile: a status, and logs
        cp.api.create(
            {
                "apiVersion": "kubesched.dev/v1alpha1",
                "kind": "SchedulingProfile",
                "metadata": {"name": f"sec-bad-{uid()}", "labels": release.profile_labels},
                "spec": {
                    "schedulerName": f"{release.scheduler_name}-x",
                    "plugins": {"score": {"enabled": [{"name": "NoSuchPlugin"}]}},
                },
            }
        )

        def bound(name: str) -> bool:
            return bool(cp.api.get(f"/api/v1/namespaces/{ns}/pods/{name}")["spec"].get("nodeName"))

        wait("binds", lambda: bound(fits) and bound(env_pod), run)
        wait(
            "FailedScheduling",
            lambda: (
                condition(cp.api.get(f"/api/v1/namespaces/{ns}/pods/{ref_pod}"), "PodScheduled")
                and any(e["reason"] == "FailedScheduling" for e in events_for(cp, ns, nofit))
            ),
            run,
        )
        wait("/readyz", run.ready, run)
        pages = {
            path: run.get(path)
            for path in (
                "/metrics",
                f"/explain/{ns}/{nofit}",
                f"/explain/{ns}/{ref_pod}",
                f"/explain/{ns}/{env_pod}",
                "/debug/cache",
                "/healthz",
                "/readyz",
            )
        }
        assert ref_pod in pages[f"/explain/{ns}/{ref_pod}"]  # the page is about the pod
        assert env_pod in pages["/debug/cache"]
    finally:
        code = run.stop()
    out = run.output()
    assert code == 0, out[-3000:]
    assert "DEBUG" in out, "the run did not log at debug level"
    for path, page in pages.items():
        for secret in (*creds, env_value, secret_value):
            assert secret not in page, f"{path} shows a secret"
        assert "hunter2" not in page and "topsecret" not in page, path
    for secret in (*creds, env_value, secret_value):
        assert secret not in out, "the log shows a secret"
    assert "Bearer" not in out and "authorization" not in out.lower()


def test_a_wrong_token_is_refused_without_printing_it(
    controlplane: ControlPlane, release: Release
) -> None:
    wrong = f"wrongtoken{uid()}{uid()}"
    kubeconfig = controlplane.kubeconfig_for(token=wrong)
    run = Run(controlplane, release, kubeconfig)
    try:
        code = run.proc.wait(120)
    finally:
        run.stop()
    out = run.output()
    assert code != 0, out[-3000:]
    assert "401" in out or "Unauthorized" in out, out[-3000:]
    assert wrong not in out, "the log shows the token"
    assert "Bearer" not in out


def can(cp: ControlPlane, release: Release, verb: str, resource: str, namespace: str) -> bool:
    plural, _, sub = resource.partition("/")
    group = ""
    if "." in plural:
        plural, _, group = plural.partition(".")
    review = cp.api.post(
        "/apis/authorization.k8s.io/v1/subjectaccessreviews",
        {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": release.user,
                "groups": [
                    "system:serviceaccounts",
                    f"system:serviceaccounts:{release.namespace}",
                    "system:authenticated",
                ],
                "resourceAttributes": {
                    "namespace": namespace,
                    "verb": verb,
                    "group": group,
                    "resource": plural,
                    "subresource": sub,
                },
            },
        },
    )
    return bool(review["status"].get("allowed"))


DENIED = [
    ("get", "secrets"),
    ("list", "secrets"),
    ("watch", "secrets"),
    ("update", "pods"),
    ("patch", "pods"),
    ("delete", "nodes"),
    ("update", "nodes"),
    ("patch", "nodes"),
    ("create", "pods/exec"),
    ("get", "pods/log"),
    ("create", "serviceaccounts/token"),
    ("impersonate", "serviceaccounts"),
    ("escalate", "clusterroles.rbac.authorization.k8s.io"),
    ("bind", "clusterroles.rbac.authorization.k8s.io"),
    ("update", "clusterroles.rbac.authorization.k8s.io"),
    ("create", "rolebindings.rbac.authorization.k8s.io"),
    ("get", "configmaps"),
]
ALLOWED = [("create", "pods/binding"), ("patch", "pods/status")]


@pytest.mark.parametrize(("verb", "resource"), DENIED, ids=[f"{v}-{r}" for v, r in DENIED])
def test_the_service_account_is_denied(
    controlplane: ControlPlane, release: Release, verb: str, resource: str
) -> None:
    for namespace in (release.namespace, "default", ""):
        assert not can(controlplane, release, verb, resource, namespace), (namespace, verb)


@pytest.mark.parametrize(("verb", "resource"), ALLOWED, ids=[f"{v}-{r}" for v, r in ALLOWED])
def test_the_service_account_may_bind_and_report(
    controlplane: ControlPlane, release: Release, verb: str, resource: str
) -> None:
    assert can(controlplane, release, verb, resource, "default")
