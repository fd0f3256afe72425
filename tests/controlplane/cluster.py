"""etcd + kube-apiserver (+ optionally kube-scheduler and kube-controller-manager) on
loopback, for the e2e tests.

Every instance lives in its own temporary directory with its own free ports, so several
control planes can run at once. Nodes are bare Node objects with a status (no kubelet), as
kwok and scheduler_perf do.

Authentication is by static bearer tokens (``--token-auth-file``, read once at start, so the
identities are fixed when the control plane starts) and by real service-account tokens
minted through the TokenRequest API (``service_account_token``), which works for any
service account at any time. Authorization is RBAC only, with the bootstrap roles.

This module starts and stops the processes; the identities, clients, kubectl and the
objects tests create are in :mod:`tests.controlplane.access`.
"""

from __future__ import annotations

import os
import secrets
import shutil
import ssl
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from kubesched.bench.controlplane import (
    ControlPlaneError,
    Process,
    apiserver_argv,
    controller_manager_argv,
    etcd_argv,
    etcd_healthy,
    free_port,
    write_service_account_key,
)
from tests.controlplane.access import DEFAULT_IDENTITIES, ApiAccess
from tests.controlplane.kube_scheduler import KubeScheduler, scheduler_config
from tests.controlplane.rest import RestClient
from tests.controlplane.waiting import wait_for

__all__ = ["DEFAULT_IDENTITIES", "Binaries", "ControlPlane"]

BINARIES = ("etcd", "kube-apiserver", "kube-scheduler", "kubectl", "kube-controller-manager")


@dataclass(frozen=True)
class Binaries:
    """Paths of the five binaries in an envtest-style directory."""

    etcd: Path
    kube_apiserver: Path
    kube_scheduler: Path
    kubectl: Path
    kube_controller_manager: Path

    @classmethod
    def from_dir(cls, directory: str | os.PathLike[str]) -> Binaries:
        root = Path(directory)
        missing = [b for b in BINARIES if not os.access(root / b, os.X_OK)]
        if missing:
            raise FileNotFoundError(
                f"{root} lacks executable {', '.join(missing)} "
                "(tests/controlplane/build completes a cache: it builds only what is missing)"
            )
        return cls(*(root / b for b in BINARIES))


class ControlPlane(ApiAccess):
    """etcd + kube-apiserver on loopback in a temporary directory; its processes start
    and stop here, and what tests do through its API (identities, clients, kubectl,
    nodes and pods) comes from :class:`~tests.controlplane.access.ApiAccess`.

    Use as a context manager, or call ``start()`` and ``stop()``::

        with ControlPlane(Binaries.from_dir(d)) as cp:
            cp.create_nodes(3)
            cp.api.create(pod)            # RestClient as admin
            cp.kubeconfig                 # admin kubeconfig file, for kubernetes_asyncio / kopf
    """

    def __init__(
        self,
        binaries: Binaries,
        *,
        identities: Mapping[str, tuple[str, Sequence[str]]] | None = None,
        apiserver_args: Sequence[str] = (),
        feature_gates: Mapping[str, bool] | None = None,
        runtime_config: Mapping[str, bool] | None = None,
        keep: bool | None = None,
    ) -> None:
        """``feature_gates`` (e.g. ``{"GenericWorkload": True}``) go to kube-apiserver and, by
        default, to every kube-scheduler and kube-controller-manager started here, so a
        differential test runs both sides with the same gates; ``runtime_config`` (e.g.
        ``{"scheduling.k8s.io/v1beta1": True}``) turns API versions on or off in
        kube-apiserver (beta APIs are off by default since Kubernetes 1.24)."""
        self.binaries = binaries
        self.feature_gates = dict(feature_gates or {})
        self.runtime_config = dict(runtime_config or {})
        self.identities = dict(DEFAULT_IDENTITIES)
        for name, (user, groups) in (identities or {}).items():
            self.identities[name] = (user, tuple(groups))
        self.apiserver_args = list(apiserver_args)
        self.keep = os.environ.get("KUBESCHED_E2E_KEEP") == "1" if keep is None else keep
        self.dir = Path(tempfile.mkdtemp(prefix="kubesched-controlplane-"))
        self.tokens = {name: secrets.token_urlsafe(24) for name in self.identities}
        self.server = ""
        self.etcd_url = ""
        self.etcd: Process | None = None
        self.apiserver: Process | None = None
        self._apiserver_argv: list[str] = []
        self.schedulers: list[KubeScheduler] = []
        self.controller_managers: list[Process] = []
        self._clients: dict[str, RestClient] = {}
        self._kubeconfigs: dict[str, Path] = {}
        self._ssl: ssl.SSLContext | None = None
        self._node_count = 0
        #: the serving certificate + CA kube-apiserver generates in its --cert-dir
        self.ca_file = self.dir / "apiserver-certs" / "apiserver.crt"
        #: the admin kubeconfig (written once the API server is ready)
        self.kubeconfig = self.dir / "kubeconfig-admin.yaml"

    # -- lifecycle ---------------------------------------------------------------------------

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
        """Start etcd and kube-apiserver; return once /readyz is ok and `default` exists."""
        self._write_files()
        for attempt in range(3):
            try:
                self._start_once(timeout)
                return
            except ControlPlaneError as err:
                # a free port taken between choosing and binding it: choose again
                self._stop_processes()
                if "address already in use" not in str(err) or attempt == 2:
                    raise

    def stop(self) -> None:
        """Stop every process, close clients, remove the directory (unless keep)."""
        self._stop_processes()
        if self.keep:
            print(f"kept control plane directory {self.dir}")
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def _stop_processes(self) -> None:
        for client in self._clients.values():
            client.close()
        self._clients.clear()
        for proc in [*self.controller_managers, *self.schedulers, self.apiserver, self.etcd]:
            if proc is not None:
                proc.stop()
        self.controller_managers.clear()
        self.schedulers.clear()
        self.apiserver = self.etcd = None

    def _write_files(self) -> None:
        lines = []
        for index, (name, (user, groups)) in enumerate(self.identities.items()):
            lines.append(f'{self.tokens[name]},{user},uid-{index},"{",".join(groups)}"')
        (self.dir / "tokens.csv").write_text("\n".join(lines) + "\n")
        key = self.dir / "service-account.key"
        if not key.exists():
            write_service_account_key(key)

    def _start_once(self, timeout: float) -> None:
        client_port, peer_port, api_port = free_port(), free_port(), free_port()
        self.etcd_url = f"http://127.0.0.1:{client_port}"
        peer = f"http://127.0.0.1:{peer_port}"
        data_dir = self.dir / "etcd"
        shutil.rmtree(data_dir, ignore_errors=True)
        self.etcd = etcd = Process(
            "etcd",
            etcd_argv(self.binaries.etcd, data_dir, self.etcd_url, peer),
            self.dir / "etcd.log",
        )
        wait_for(lambda: etcd_healthy(etcd, self.etcd_url), timeout=timeout, what="etcd /health")

        cert_dir = self.dir / "apiserver-certs"
        key = self.dir / "service-account.key"
        self.server = f"https://127.0.0.1:{api_port}"
        self._apiserver_argv = apiserver_argv(
            self.binaries.kube_apiserver,
            etcd_url=self.etcd_url,
            port=api_port,
            cert_dir=cert_dir,
            token_file=self.dir / "tokens.csv",
            service_account_key=key,
            extra_args=[
                "--allow-privileged=true",
                *self._gate_args(),
                *(
                    [f"--runtime-config={_flag_map(self.runtime_config)}"]
                    if self.runtime_config
                    else []
                ),
                *self.apiserver_args,
            ],
        )
        self._start_apiserver(timeout)
        # The serving certificate kube-apiserver generated (self-signed, 127.0.0.1 among its
        # addresses) followed by its CA: trust that file, verify hostnames as usual.
        self._ssl = ssl.create_default_context(cafile=str(self.ca_file))
        self._kubeconfigs.clear()  # a new server address: kubectl kubeconfigs are rewritten
        self.kubeconfig = self.kubeconfig_for("admin")
        wait_for(
            lambda: self._exists("/api/v1/namespaces/default"),
            timeout=timeout,
            what="namespace default",
        )

    def _start_apiserver(self, timeout: float) -> None:
        """kube-apiserver with the argv chosen at start; return once /readyz is ok."""
        self.apiserver = Process(
            "kube-apiserver", self._apiserver_argv, self.dir / "kube-apiserver.log"
        )
        insecure = ssl.create_default_context()
        insecure.check_hostname = False
        insecure.verify_mode = ssl.CERT_NONE

        def apiserver_ready() -> bool:
            assert self.apiserver is not None
            self.apiserver.check_running()
            request = urllib.request.Request(
                f"{self.server}/readyz",
                headers={"Authorization": f"Bearer {self.tokens['admin']}"},
            )
            try:
                with urllib.request.urlopen(request, context=insecure, timeout=5) as resp:
                    return int(resp.status) == 200
            except OSError:
                return False

        wait_for(apiserver_ready, timeout=timeout, interval=0.2, what="kube-apiserver /readyz")

    def stop_apiserver(self, *, kill: bool = False, grace: float = 5.0) -> None:
        """Stop kube-apiserver only; etcd and its data stay. SIGTERM, then SIGKILL after
        ``grace`` seconds (a graceful stop refuses new connections at once but keeps the
        open watches without events for 15 s and more); ``kill``: SIGKILL at once, as a
        crash. Every connection to it breaks; ``start_apiserver`` brings it back."""
        if self.apiserver is None:
            return
        if kill:
            self.apiserver.popen.kill()
        self.apiserver.stop(grace)
        self.apiserver = None

    def start_apiserver(self, timeout: float = 90.0) -> None:
        """Start kube-apiserver again after ``stop_apiserver``: the same port, certificates
        (its --cert-dir keeps them), tokens and etcd, so clients reconnect to the same URL
        with the same credentials and find the same objects. Returns once /readyz is ok.
        The port stays free while the server is down (nothing else binds loopback ports
        we chose); a loaded machine may make the start take a while."""
        assert self._apiserver_argv, "control plane not started"
        if self.apiserver is not None:
            return
        for client in self._clients.values():
            client.close()  # their kept-alive connections died with the old process
        self._start_apiserver(timeout)

    def restart_apiserver(self, down: float = 3.0, *, kill: bool = False) -> float:
        """Stop kube-apiserver (``stop_apiserver``), stay down ``down`` seconds, start it
        again (``start_apiserver``); return how long it was unreachable, in seconds."""
        t0 = time.monotonic()
        self.stop_apiserver(kill=kill)
        time.sleep(down)
        self.start_apiserver()
        return time.monotonic() - t0

    # -- kube-scheduler ----------------------------------------------------------------------

    def start_kube_scheduler(
        self,
        config: str | os.PathLike[str] | Mapping[str, Any] | None = None,
        extra_args: Iterable[str] = (),
        *,
        identity: str = "kube-scheduler",
        qps: float = 5000,
        burst: int = 5000,
        wait: bool = True,
    ) -> KubeScheduler:
        """Run the real kube-scheduler against this control plane.

        ``config`` is a KubeSchedulerConfiguration (a file or a dict); missing
        ``clientConnection.kubeconfig`` / ``qps`` / ``burst`` and ``leaderElection`` are
        filled in (kubeconfig of ``identity``, the given rate limits, no leader election).
        It serves HTTPS on a free loopback port; /healthz, /readyz, /livez and /metrics need
        no credentials. Stopped with the control plane, or earlier with ``.stop()``.
        """
        kubeconfig = self.kubeconfig_for(identity)
        cfg = scheduler_config(config, kubeconfig, qps=qps, burst=burst)
        index = len(self.schedulers)
        config_path = self.dir / f"kube-scheduler-{index}.yaml"
        config_path.write_text(yaml.safe_dump(cfg, sort_keys=False))
        for attempt in range(3):
            port = free_port()
            argv = [
                str(self.binaries.kube_scheduler),
                f"--config={config_path}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={self.dir / f'kube-scheduler-{index}-certs'}",
                f"--authentication-kubeconfig={kubeconfig}",
                f"--authorization-kubeconfig={kubeconfig}",
                "--authentication-skip-lookup=true",
                "--authorization-always-allow-paths=/healthz,/readyz,/livez,/metrics",
                *self._gate_args(),
                *extra_args,
            ]
            sched = KubeScheduler(argv, self.dir / f"kube-scheduler-{index}.log", port, cfg)
            self.schedulers.append(sched)
            if not wait:
                return sched
            try:
                sched.wait_ready()
                return sched
            except ControlPlaneError as err:
                sched.stop()
                self.schedulers.remove(sched)
                if "address already in use" not in str(err) or attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def _gate_args(self) -> list[str]:
        return [f"--feature-gates={_flag_map(self.feature_gates)}"] if self.feature_gates else []

    # -- kube-controller-manager -------------------------------------------------------------

    def start_controller_manager(
        self, controllers: Sequence[str], extra_args: Iterable[str] = ()
    ) -> Process:
        """Run the real kube-controller-manager with only ``controllers`` (its
        ``--controllers`` names, e.g. ``["resourceclaim-controller"]``), as admin, no leader
        election, no serving port; with this control plane's feature gates. Stopped with
        the control plane, or earlier with ``.stop()``; ``.check_running()`` raises with the
        log's tail if it exited (an unknown controller name makes it exit at once)."""
        index = len(self.controller_managers)
        argv = controller_manager_argv(
            self.binaries.kube_controller_manager,
            kubeconfig=self.kubeconfig_for("admin"),
            controllers=controllers,
            service_account_key=self.dir / "service-account.key",
            extra_args=["--cluster-signing-duration=1h", *self._gate_args(), *extra_args],
        )
        proc = Process(
            "kube-controller-manager", argv, self.dir / f"kube-controller-manager-{index}.log"
        )
        self.controller_managers.append(proc)
        time.sleep(0.5)
        proc.check_running()
        return proc


def _flag_map(values: Mapping[str, bool]) -> str:
    """``{"A": True, "b/v1": False}`` -> ``A=true,b/v1=false`` (Kubernetes map flags)."""
    return ",".join(f"{key}={'true' if on else 'false'}" for key, on in values.items())
