"""kubesched: a Kubernetes scheduler in Python with kube-scheduler's plugin framework."""

from kubesched import lazy_kube_client

__version__ = "0.1.0"

__all__ = ["__version__"]

# before Kopf or any kubesched module imports kubernetes_asyncio: its ~770 generated
# model modules (~50 MiB) load only if one is used (see kubesched.lazy_kube_client)
lazy_kube_client.install()
