"""kubesched: a Kubernetes scheduler in Python with kube-scheduler's plugin framework."""

__version__ = "0.1.0"

__all__ = ["__version__"]
