"""``kubesched run``'s first LIST of the watched kinds (pods and nodes first), started
before anything else is imported (:mod:`kubesched.cluster.prefetch`).

The settings' parser needs pydantic, the scheduler needs numpy and the plugins: most
of a CPU second on a busy machine, while the API server, on the other core, could
already be encoding thousands of pods. :func:`start` reads the two settings
the listing depends on straight from the command line and the environment
(``--kubeconfig``, ``--watch-engine`` and their ``KUBESCHED_`` variables, read as
:mod:`kubesched.operator.environ` reads them, without pydantic) and starts the listing;
:func:`take` hands it to ``run`` only if the settings, once parsed, say the same (an
abbreviated flag, a value the parser refuses: it is dropped, and run lists as it would
have).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from kubesched.cluster.prefetch import Prefetch
from kubesched.operator.environ import ENV_PREFIX, variables

__all__ = ["FLAGS", "start", "take"]

FLAGS = {"kubeconfig": "--kubeconfig", "watch_engine": "--watch-engine"}
"""The settings read here and their flags (a unit test holds them to the Settings')."""


def peek(argv: Sequence[str], env: Mapping[str, str]) -> dict[str, str | None] | None:
    """The values of :data:`FLAGS` as the command line (last one wins) or else the
    environment (any case, as ``Settings.load`` reads it) gives them; None for ``--help``."""
    found: dict[str, str | None] = {}
    set_by = variables(env, ENV_PREFIX)
    for field, flag in FLAGS.items():
        found[field] = set_by[field][1] if field in set_by else None
        for i, word in enumerate(argv):
            if word == flag and i + 1 < len(argv):
                found[field] = argv[i + 1]
            elif word.startswith(flag + "="):
                found[field] = word.partition("=")[2]
    if any(word in ("-h", "--help") for word in argv):
        return None
    return found


def start(argv: Sequence[str], env: Mapping[str, str] | None = None) -> Prefetch | None:
    """Start listing, unless the settings peeked choose the Kopf watch engine."""
    found = peek(argv, os.environ if env is None else env)
    if found is None or (found["watch_engine"] or "direct") != "direct":
        return None
    return Prefetch(found["kubeconfig"] or None).start()


def take(early: Prefetch | None, kubeconfig: str | None, watch_engine: str) -> Prefetch | None:
    """``early`` (what :func:`start` began), if it is the listing these settings would
    make; else a new one (``direct``) or none (``kopf``)."""
    if watch_engine != "direct":
        return None
    if early is not None and early.kubeconfig == (kubeconfig or None):
        return early
    return Prefetch(kubeconfig).start()
