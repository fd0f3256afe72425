"""A throw-away etcd + kube-apiserver on loopback, and schedulers run as child processes.

``kubesched bench --target cluster`` without ``--kubeconfig`` starts one of these for each
scheduler it measures, so both see an identical, empty cluster. The binaries come from an
envtest-style directory (``etcd``, ``kube-apiserver``, ``kube-scheduler``): what
``tests/controlplane/build`` prints, given as ``--controlplane-dir``,
``KUBESCHED_CONTROLPLANE_DIR`` or ``KUBEBUILDER_ASSETS``.

The API server runs with RBAC and one static admin token, and without the admission
plugins that only work with controllers (ServiceAccount, TaintNodesByCondition,
StorageObjectInUseProtection) and without priority and fairness (which would rate-limit
the benchmark's own clients). Nodes are bare Node objects, as in scheduler_perf.
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import IO

import yaml

__all__ = [
    "BINARIES_ENV",
    "ControlPlane",
    "ControlPlaneError",
    "Process",
    "binaries_dir",
    "free_port",
    "http_ready",
    "write_kubeconfig",
]

BINARIES_ENV = ("KUBESCHED_CONTROLPLANE_DIR", "KUBEBUILDER_ASSETS")
"""Where the binaries are looked for when no directory is given, in this order."""

DISABLED_ADMISSION_PLUGINS = "ServiceAccount,TaintNodesByCondition,StorageObjectInUseProtection"


class ControlPlaneError(RuntimeError):
    """A component failed to start; the message ends with the tail of its log."""


def binaries_dir(directory: str | None = None) -> Path:
    """The directory holding etcd, kube-apiserver and kube-scheduler."""
    candidates = [directory] if directory else [os.environ.get(e) for e in BINARIES_ENV]
    for candidate in candidates:
        if not candidate:
            continue
        root = Path(candidate)
        missing = [
            b
            for b in ("etcd", "kube-apiserver", "kube-scheduler")
            if not os.access(root / b, os.X_OK)
        ]
        if missing:
            raise ControlPlaneError(f"{root} lacks executable {', '.join(missing)}")
        return root
    raise ControlPlaneError(
        "no control plane binaries: run tests/controlplane/build and pass the directory it "
        "prints as --controlplane-dir (or set KUBESCHED_CONTROLPLANE_DIR)"
    )


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Process:
    """A child process logging to a file; stopped with SIGTERM, then SIGKILL."""

    def __init__(
        self, name: str, argv: Sequence[str], log_path: Path, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.log_path = log_path
        self._log: IO[bytes] = log_path.open("ab")
        self.popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def check_running(self) -> None:
        if self.popen.poll() is not None:
            raise ControlPlaneError(
                f"{self.name} exited with {self.popen.returncode}:\n{self.log_tail()}"
            )

    def stop(self, timeout: float = 15.0) -> None:
        if self.popen.poll() is None:
            self.popen.terminate()
            try:
                self.popen.wait(timeout)
            except subprocess.TimeoutExpired:
                self.popen.kill()
                self.popen.wait()
        self._log.close()


def wait_until(probe: Callable[[], bool], *, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def http_ready(url: str, *, token: str | None = None, timeout: float = 2.0) -> bool:
    """GET ``url`` (TLS not verified: probes of loopback servers) answers 200."""
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, context=ctx, timeout=timeout) as resp:
            return int(resp.status) == 200
    except (OSError, urllib.error.HTTPError):
        return False


def write_kubeconfig(path: Path, server: str, token: str, ca_file: Path) -> Path:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": "bench", "cluster": {"server": server, "certificate-authority": str(ca_file)}}
        ],
        "users": [{"name": "admin", "user": {"token": token}}],
        "contexts": [{"name": "bench", "context": {"cluster": "bench", "user": "admin"}}],
        "current-context": "bench",
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def _service_account_key(path: Path) -> None:
    openssl = shutil.which("openssl")
    if openssl is None:
        raise ControlPlaneError("openssl is needed to make the service-account signing key")
    subprocess.run(
        [openssl, "genrsa", "-out", str(path), "2048"],
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


class ControlPlane:
    """etcd + kube-apiserver in a temporary directory; a context manager."""

    def __init__(
        self, binaries: Path, *, keep: bool = False, extra_args: Sequence[str] = ()
    ) -> None:
        self.binaries = binaries
        self.keep = keep
        self.extra_args = list(extra_args)
        """More kube-apiserver flags (a gang workload's feature gates and runtime config)."""
        self.dir = Path(tempfile.mkdtemp(prefix="kubesched-bench-"))
        self.token = secrets.token_urlsafe(24)
        self.server = ""
        self.ca_file = self.dir / "apiserver-certs" / "apiserver.crt"
        self.kubeconfig = self.dir / "kubeconfig.yaml"
        self._procs: list[Process] = []

    def __enter__(self) -> ControlPlane:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self, timeout: float = 90.0) -> None:
        (self.dir / "tokens.csv").write_text(
            f'{self.token},kubesched-bench-admin,uid-0,"system:masters"\n'
        )
        key = self.dir / "service-account.key"
        _service_account_key(key)
        etcd_url = f"http://127.0.0.1:{free_port()}"
        peer = f"http://127.0.0.1:{free_port()}"
        etcd = self._spawn(
            "etcd",
            [
                str(self.binaries / "etcd"),
                f"--data-dir={self.dir / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=default={peer}",
                "--unsafe-no-fsync",
                "--log-level=warn",
            ],
        )

        def etcd_healthy() -> bool:
            etcd.check_running()
            try:
                with urllib.request.urlopen(f"{etcd_url}/health", timeout=2) as resp:
                    return b'"health":"true"' in resp.read()
            except OSError:
                return False

        wait_until(etcd_healthy, timeout=timeout, what="etcd")
        self.server = f"https://127.0.0.1:{free_port()}"
        apiserver = self._spawn(
            "kube-apiserver",
            [
                str(self.binaries / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.server.rsplit(':', 1)[1]}",
                f"--cert-dir={self.dir / 'apiserver-certs'}",
                "--authorization-mode=RBAC",
                f"--token-auth-file={self.dir / 'tokens.csv'}",
                "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
                f"--service-account-key-file={key}",
                f"--service-account-signing-key-file={key}",
                "--service-cluster-ip-range=10.0.0.0/24",
                "--endpoint-reconciler-type=none",
                f"--disable-admission-plugins={DISABLED_ADMISSION_PLUGINS}",
                "--enable-priority-and-fairness=false",
                "--profiling=false",
                *self.extra_args,
            ],
        )

        def apiserver_ready() -> bool:
            apiserver.check_running()
            return http_ready(f"{self.server}/readyz", token=self.token)

        wait_until(apiserver_ready, timeout=timeout, what="kube-apiserver /readyz")
        wait_until(
            lambda: http_ready(f"{self.server}/api/v1/namespaces/default", token=self.token),
            timeout=timeout,
            what="namespace default",
        )
        write_kubeconfig(self.kubeconfig, self.server, self.token, self.ca_file)

    def _spawn(self, name: str, argv: Sequence[str]) -> Process:
        proc = Process(name, argv, self.dir / f"{name}.log")
        self._procs.append(proc)
        return proc

    def pids(self) -> dict[str, int]:
        """The running processes (etcd, kube-apiserver) by name."""
        return {proc.name: proc.pid for proc in self._procs}

    def stop(self) -> None:
        for proc in reversed(self._procs):
            proc.stop()
        self._procs.clear()
        if not self.keep:
            shutil.rmtree(self.dir, ignore_errors=True)
