"""``kubesched run``'s first LIST of the watched kinds (pods and nodes first), started
before anything else is imported (:mod:`kubesched.cluster.prefetch`).

The settings' parser needs pydantic, the scheduler needs numpy, aiohttp and the
plugins: most of a CPU second on a busy machine, while the API server, on the other
core, could already be encoding thousands of pods. :func:`start` reads the two settings
the listing depends on straight from the command line and the environment
(``--kubeconfig``, ``--watch-engine`` and their ``KUBESCHED_`` variables, read as
:mod:`kubesched.operator.environ` reads them, without pydantic) and starts the listing;
:func:`take` hands it to ``run`` only if the settings, once parsed, say the same (an
abbreviated flag, a value the parser refuses: it is dropped, and run lists as it would
have).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence

from kubesched.cluster.prefetch import Prefetch
from kubesched.operator.environ import ENV_PREFIX, variables

__all__ = ["FLAGS", "import_aiohttp", "start", "take"]

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


CA_FILE = "SSL_CERT_FILE"
"""OpenSSL's variable for the CA bundle a default TLS context loads (its directory of
hashed certificates, ``SSL_CERT_DIR``, is read lazily, one certificate when needed)."""


def import_aiohttp() -> None:
    """Import aiohttp without reading the system's CA bundle twice.

    Importing ``aiohttp.connector`` makes two default TLS contexts, each of which loads
    every CA certificate of the bundle OpenSSL is configured with: about 25 ms apiece on
    a Debian bundle, most of the time aiohttp's import takes, on the way to the first
    bind. ``kubesched run`` never uses them: every connection it makes has a context of
    its own, with the kubeconfig's CA (:func:`kubesched.cluster.sessions.session_for`,
    Kopf through those sessions, the Lease client's). So for that import :data:`CA_FILE`
    names no file; the directory lookup stays, so the defaults still verify where the
    system has one. Called before the early listing's thread starts: the variable is
    set back while this process has a single thread (``setenv`` is not thread-safe)."""
    if "aiohttp" in sys.modules:
        return
    before = os.environ.get(CA_FILE)
    os.environ[CA_FILE] = os.devnull  # an empty bundle
    try:
        import aiohttp  # noqa: F401
    finally:
        if before is None:
            del os.environ[CA_FILE]
        else:
            os.environ[CA_FILE] = before


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
