"""kubesched: a Kubernetes scheduler in Python with kube-scheduler's plugin framework."""

import os

# Before anything imports numpy: numpy's OpenBLAS starts a worker thread per core as it
# loads, and each spins on its core for about 0.1 s waiting for work that never comes
# (kubesched calls no BLAS routine: its arrays are added, compared and reduced, never
# multiplied as matrices). On a 2-core node shared with the API server that is CPU taken
# from it at every start. A value the user set is kept. (The other library setting
# kubesched makes, PYDANTIC_DISABLE_PLUGINS, is `kubesched run`'s alone: kubesched.cli.main.)
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from kubesched import lazy_kube_client

__version__ = "0.1.0"

__all__ = ["__version__"]

# before Kopf or any kubesched module imports kubernetes_asyncio: its ~770 generated
# model modules (~50 MiB) load only if one is used (see kubesched.lazy_kube_client)
lazy_kube_client.install()
