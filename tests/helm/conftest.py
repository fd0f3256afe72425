"""Chart tests: ``helm lint`` / ``helm template`` with a real helm (see chart.py)."""

from tests.helm.chart import helm

__all__ = ["helm"]
