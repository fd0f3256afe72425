"""What e2e tests do with a running control plane through its API: the identities and
their tokens, REST clients, kubeconfigs, kubectl, and the objects tests create
(namespaces, bare nodes, pause pods).

:class:`ApiAccess` is the part of :class:`~tests.controlplane.cluster.ControlPlane` that
reads only the server's address, credentials and directory, which the control plane
sets when it starts; it starts and stops no process.
"""

from __future__ import annotations

import contextlib
import copy
import os
import secrets
import ssl
import subprocess
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kubesched.bench.controlplane import write_kubeconfig
from tests.controlplane.nodes import bare_node
from tests.controlplane.rest import JSON, ApiError, RestClient
from tests.controlplane.waiting import wait_for

if TYPE_CHECKING:
    from tests.controlplane.cluster import Binaries

__all__ = ["DEFAULT_IDENTITIES", "ApiAccess"]

#: Identities with a static token: name -> (user name, groups). ``token_for(name)``.
#: kube-apiserver adds ``system:authenticated`` to every authenticated user itself.
DEFAULT_IDENTITIES: dict[str, tuple[str, tuple[str, ...]]] = {
    # cluster-admin through the system:masters group
    "admin": ("kubesched-admin", ("system:masters",)),
    # what kubesched runs as in-cluster (the chart's service account kubesched/kubesched);
    # RBAC rules for it must be created by the test (e.g. from the chart's ClusterRole)
    "kubesched-sa": (
        "system:serviceaccount:kubesched:kubesched",
        ("system:serviceaccounts", "system:serviceaccounts:kubesched"),
    ),
    # the real kube-scheduler's identity: bootstrap RBAC binds system:kube-scheduler and
    # system:volume-scheduler to it
    "kube-scheduler": ("system:kube-scheduler", ()),
    # authenticated, no rights at all
    "nobody": ("nobody", ()),
}


class ApiAccess:
    """Identities, clients, kubectl and objects of a control plane (a base of
    :class:`~tests.controlplane.cluster.ControlPlane`, which sets these attributes)."""

    binaries: Binaries
    dir: Path
    server: str
    """``https://127.0.0.1:<port>`` once started."""
    identities: dict[str, tuple[str, tuple[str, ...]]]
    tokens: dict[str, str]
    """Static identity name -> its bearer token."""
    ca_file: Path
    _clients: dict[str, RestClient]
    _kubeconfigs: dict[str, Path]
    _ssl: ssl.SSLContext | None
    _node_count: int

    def _exists(self, path: str) -> bool:
        try:
            self.api.get(path)
        except ApiError as err:
            if err.status == 404:
                return False
            raise
        return True

    # -- identities --------------------------------------------------------------------------

    @property
    def admin_token(self) -> str:
        return self.tokens["admin"]

    def token_for(self, name: str) -> str:
        """The static token of a pre-declared identity (see DEFAULT_IDENTITIES).

        kube-apiserver reads its token file only at start: declare more identities with
        ``ControlPlane(identities={name: (user, groups)})``, or use
        ``service_account_token()`` for service accounts, which works at any time.
        """
        try:
            return self.tokens[name]
        except KeyError:
            raise KeyError(
                f"no static token for {name!r} (known: {', '.join(self.tokens)}); declare it "
                "when starting the control plane, or use service_account_token()"
            ) from None

    def user_for(self, name: str) -> str:
        """The user name a static identity authenticates as."""
        return self.identities[name][0]

    def service_account_token(
        self, namespace: str, name: str, *, expiration_seconds: int = 3600
    ) -> str:
        """A real service-account token (TokenRequest API); creates namespace and SA."""
        self.ensure_namespace(namespace)
        with contextlib.suppress(ApiError):
            self.api.create(
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": name, "namespace": namespace},
                }
            )
        review = self.api.post(
            f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token",
            {
                "apiVersion": "authentication.k8s.io/v1",
                "kind": "TokenRequest",
                "spec": {"expirationSeconds": expiration_seconds},
            },
        )
        token: str = review["status"]["token"]
        return token

    def client(self, name: str = "admin") -> RestClient:
        """A RestClient authenticated as a static identity."""
        if name not in self._clients:
            assert self._ssl is not None, "control plane not started"
            self._clients[name] = RestClient(self.server, self.token_for(name), self._ssl)
        return self._clients[name]

    def client_with_token(self, token: str) -> RestClient:
        """A RestClient for any bearer token (the caller closes it)."""
        assert self._ssl is not None, "control plane not started"
        return RestClient(self.server, token, self._ssl)

    @property
    def api(self) -> RestClient:
        """The admin RestClient."""
        return self.client("admin")

    def kubeconfig_for(self, name: str | None = None, *, token: str | None = None) -> Path:
        """Write a kubeconfig for a static identity (or a raw token); return its path."""
        if token is None:
            token = self.token_for(name or "admin")
        label = name or f"token-{secrets.token_hex(4)}"
        return write_kubeconfig(
            self.dir / f"kubeconfig-{label}.yaml",
            self.server,
            token,
            self.ca_file,
            cluster="kubesched-e2e",
            user=label,
            context=label,
            namespace="default",
        )

    def kubectl(
        self,
        *args: str | os.PathLike[str],
        input: str | None = None,
        identity: str = "admin",
        check: bool = False,
        timeout: float = 60.0,
    ) -> subprocess.CompletedProcess[str]:
        """Run the built kubectl as a static identity; return the finished process.

        Text in and out (``.stdout``, ``.stderr``, ``.returncode``): a failing command is
        something tests assert on (admission messages), so it raises only with ``check``.
        ``input`` goes to stdin (``kubectl("apply", "-f", "-", input=yaml_text)``). The
        namespace is ``default`` unless ``-n`` is given; no user kubeconfig or cache is read
        (``KUBECONFIG`` and ``HOME`` point into the control plane's directory).
        """
        if identity not in self._kubeconfigs:
            self._kubeconfigs[identity] = self.kubeconfig_for(identity)
        home = self.dir / "kubectl-home"
        home.mkdir(exist_ok=True)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(home),  # kubectl's discovery cache lives under $HOME/.kube/cache
            "KUBECONFIG": str(self._kubeconfigs[identity]),
        }
        return subprocess.run(
            [str(self.binaries.kubectl), *map(str, args)],
            input=input,
            capture_output=True,
            text=True,
            env=env,
            check=check,
            timeout=timeout,
        )

    # -- objects -----------------------------------------------------------------------------

    def ensure_namespace(self, name: str) -> None:
        try:
            self.api.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        except ApiError as err:
            if err.status != 409:
                raise

    def create_nodes(
        self,
        n: int,
        *,
        cpu: str = "4",
        memory: str = "32Gi",
        pods: str = "110",
        zones: int = 3,
        prefix: str = "node-",
        labels: Mapping[str, str] | None = None,
        taints: Sequence[Mapping[str, str]] = (),
        extra_resources: Mapping[str, str] | None = None,
        workers: int = 16,
    ) -> list[str]:
        """Create ``n`` ready Nodes with capacity = allocatable; return their names.

        Labels: kubernetes.io/hostname, os/arch, and (zones > 0) topology zone
        ``zone-<i % zones>`` and region ``region-0``. Names continue across calls.
        """
        start = self._node_count
        self._node_count += n
        resources = {"cpu": cpu, "memory": memory, "pods": pods, "ephemeral-storage": "100Gi"}
        resources.update(extra_resources or {})

        def one(index: int) -> str:
            name = f"{prefix}{index}"
            node = bare_node(name, resources, zone=index % zones if zones > 0 else None)
            node["metadata"]["labels"].update(labels or {})
            if taints:
                node["spec"]["taints"] = [dict(t) for t in taints]
            status = node["status"]
            created = self.api.create(node)
            if created.get("status", {}).get("allocatable") != status["allocatable"]:
                # status dropped on create: set it through the status subresource
                self.api.patch(f"/api/v1/nodes/{name}/status", {"status": status})
            return name

        indices = range(start, start + n)
        if n <= 1 or workers <= 1:
            return [one(i) for i in indices]
        with ThreadPoolExecutor(max_workers=min(workers, n)) as pool:
            return list(pool.map(one, indices))

    def create_pod(
        self,
        name: str,
        *,
        namespace: str = "default",
        scheduler_name: str = "default-scheduler",
        cpu: str | None = "100m",
        memory: str | None = "128Mi",
        labels: Mapping[str, str] | None = None,
        spec: Mapping[str, Any] | None = None,
    ) -> JSON:
        """Create a pause pod (never run: there is no kubelet) and return it."""
        requests = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v is not None}
        container: JSON = {"name": "pause", "image": "registry.k8s.io/pause:3.10"}
        if requests:
            container["resources"] = {"requests": requests}
        pod_spec: JSON = {"schedulerName": scheduler_name, "containers": [container]}
        pod_spec.update(copy.deepcopy(dict(spec or {})))
        return self.api.create(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": name, "namespace": namespace, "labels": dict(labels or {})},
                "spec": pod_spec,
            }
        )

    def wait_bound(self, name: str, namespace: str = "default", timeout: float = 30.0) -> str:
        """Wait until the pod has spec.nodeName; return it."""

        def node() -> str | None:
            pod = self.api.read("v1", "Pod", name, namespace)
            bound: str | None = pod["spec"].get("nodeName")
            return bound

        return wait_for(node, timeout=timeout, interval=0.1, what=f"pod {namespace}/{name} bound")
