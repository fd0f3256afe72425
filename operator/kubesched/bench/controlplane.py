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
    "DISABLED_ADMISSION_PLUGINS",
    "SERVICE_ACCOUNT_ISSUER",
    "ControlPlane",
    "ControlPlaneError",
    "Process",
    "apiserver_argv",
    "binaries_dir",
    "controller_manager_argv",
    "etcd_argv",
    "etcd_healthy",
    "free_port",
    "http_ready",
    "write_kubeconfig",
    "write_service_account_key",
]

BINARIES_ENV = ("KUBESCHED_CONTROLPLANE_DIR", "KUBEBUILDER_ASSETS")
"""Where the binaries are looked for when no directory is given, in this order."""

DISABLED_ADMISSION_PLUGINS = (
    "ServiceAccount",
    "TaintNodesByCondition",
    "StorageObjectInUseProtection",
)
"""Admission plugins that only work with controllers these control planes do not run.
ServiceAccount rejects pods until the token controller made the namespace's default SA;
TaintNodesByCondition taints every new node not-ready until the node lifecycle controller
clears it; StorageObjectInUseProtection adds finalizers only the protection controllers
remove (PVC/PV deletion would hang)."""
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"


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
    """A loopback TCP port nobody listens on right now (callers retry if it gets taken)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class Process:
    """A child process with its output in a log file; stopped with SIGTERM, then SIGKILL."""

    def __init__(
        self, name: str, argv: Sequence[str], log_path: Path, env: dict[str, str] | None = None
    ) -> None:
        self.name = name
        self.argv = list(argv)
        self.log_path = log_path
        self._log: IO[bytes] = log_path.open("ab")
        self.popen = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            env=env,
        )

    @property
    def pid(self) -> int:
        return self.popen.pid

    def running(self) -> bool:
        return self.popen.poll() is None

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def check_running(self) -> None:
        """Raise :class:`ControlPlaneError`, with the tail of the log, if it exited."""
        if not self.running():
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


def write_kubeconfig(
    path: Path,
    server: str,
    token: str,
    ca_file: Path,
    *,
    cluster: str = "bench",
    user: str = "admin",
    context: str | None = None,
    namespace: str | None = None,
) -> Path:
    """A kubeconfig (mode 0600) for ``server`` trusting ``ca_file``, as bearer ``token``;
    its one context (named ``context``, else ``cluster``) is the current one."""
    ctx: dict[str, str] = {"cluster": cluster, "user": user}
    if namespace:
        ctx["namespace"] = namespace
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": cluster, "cluster": {"server": server, "certificate-authority": str(ca_file)}}
        ],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": context or cluster, "context": ctx}],
        "current-context": context or cluster,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def write_service_account_key(path: Path) -> None:
    """An RSA key for signing service-account tokens (openssl, else cryptography)."""
    openssl = shutil.which("openssl")
    if openssl:
        subprocess.run(
            [openssl, "genrsa", "-out", str(path), "2048"],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return
    try:
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import rsa
    except ImportError as err:  # pragma: no cover - depends on the machine
        raise ControlPlaneError("need openssl or the cryptography package for a key") from err
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )


# -- the components' command lines ---------------------------------------------------------------
def etcd_argv(binary: Path, data_dir: Path, client_url: str, peer_url: str) -> list[str]:
    """A single-member etcd on loopback, without fsync (throw-away data)."""
    return [
        str(binary),
        "--name=default",
        f"--data-dir={data_dir}",
        f"--listen-client-urls={client_url}",
        f"--advertise-client-urls={client_url}",
        f"--listen-peer-urls={peer_url}",
        f"--initial-advertise-peer-urls={peer_url}",
        f"--initial-cluster=default={peer_url}",
        "--unsafe-no-fsync",
        "--log-level=warn",
    ]


def etcd_healthy(process: Process, client_url: str) -> bool:
    """etcd answers its /health as healthy (raises if the process exited)."""
    process.check_running()
    try:
        with urllib.request.urlopen(f"{client_url}/health", timeout=2) as resp:
            return b'"health":"true"' in resp.read()
    except OSError:
        return False


def apiserver_argv(
    binary: Path,
    *,
    etcd_url: str,
    port: int,
    cert_dir: Path,
    token_file: Path,
    service_account_key: Path,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """kube-apiserver on loopback: RBAC, static tokens from ``token_file``, its own
    serving certificate in ``cert_dir``, no admission plugin that needs a controller, no
    priority and fairness (which would rate-limit the tests' and the bench's clients)."""
    return [
        str(binary),
        f"--etcd-servers={etcd_url}",
        "--bind-address=127.0.0.1",
        "--advertise-address=127.0.0.1",
        f"--secure-port={port}",
        f"--cert-dir={cert_dir}",
        "--authorization-mode=RBAC",
        f"--token-auth-file={token_file}",
        f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
        f"--service-account-key-file={service_account_key}",
        f"--service-account-signing-key-file={service_account_key}",
        "--service-cluster-ip-range=10.0.0.0/24",
        # the kubernetes Service's endpoints cannot be a loopback address
        "--endpoint-reconciler-type=none",
        f"--disable-admission-plugins={','.join(DISABLED_ADMISSION_PLUGINS)}",
        "--enable-priority-and-fairness=false",
        "--profiling=false",
        *extra_args,
    ]


def controller_manager_argv(
    binary: Path,
    *,
    kubeconfig: Path,
    controllers: Sequence[str],
    service_account_key: Path,
    extra_args: Sequence[str] = (),
) -> list[str]:
    """kube-controller-manager running only ``controllers`` (its ``--controllers``
    names), as the kubeconfig's identity, no leader election, no serving port."""
    if not controllers:
        raise ValueError(
            "name the controllers to run: kube-controller-manager runs most by default"
        )
    return [
        str(binary),
        f"--kubeconfig={kubeconfig}",
        f"--controllers={','.join(controllers)}",
        "--leader-elect=false",
        "--use-service-account-credentials=false",
        "--secure-port=0",
        f"--service-account-private-key-file={service_account_key}",
        *extra_args,
    ]


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
        write_service_account_key(key)
        etcd_url = f"http://127.0.0.1:{free_port()}"
        peer = f"http://127.0.0.1:{free_port()}"
        etcd = self._spawn(
            "etcd", etcd_argv(self.binaries / "etcd", self.dir / "etcd", etcd_url, peer)
        )
        wait_until(lambda: etcd_healthy(etcd, etcd_url), timeout=timeout, what="etcd")
        port = free_port()
        self.server = f"https://127.0.0.1:{port}"
        argv = apiserver_argv(
            self.binaries / "kube-apiserver",
            etcd_url=etcd_url,
            port=port,
            cert_dir=self.dir / "apiserver-certs",
            token_file=self.dir / "tokens.csv",
            service_account_key=key,
            extra_args=self.extra_args,
        )
        apiserver = self._spawn("kube-apiserver", argv)

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
