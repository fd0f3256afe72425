"""Credentials out of the logs: a filter on the process's log handlers that masks bearer
tokens, ``Authorization`` header values, kubeconfig credential fields and PEM private keys
in every record (message, arguments and traceback) before it is written.

kubesched itself never logs a request's headers or its kubeconfig (the e2e test
tests/e2e/test_security.py runs ``kubesched run --log-level=debug`` and looks); this is
the second line: an exception from aiohttp or kubernetes_asyncio whose ``repr`` carries
the request (``RequestInfo(... headers=<... 'Authorization': 'Bearer ...'>)``), or a
library's debug line, is masked rather than trusted.
"""

from __future__ import annotations

import logging
import re

__all__ = ["MASK", "RedactCredentials", "install", "redact"]

MASK = "<redacted>"

_PATTERNS = (
    # "Authorization: Bearer x", "'Authorization': 'Basic x'", authorization=x
    re.compile(r"(?i)(\bauthorization['\"]?\s*[:=]\s*['\"]?)(?:(bearer|basic)\s+)?[^'\"\s,>)}]+"),
    re.compile(r"(?i)(\bbearer\s+)[A-Za-z0-9._~+/=-]+"),
    # kubeconfig / Kopf ConnectionInfo fields
    re.compile(
        r"(?i)(\b(?:token|client-key-data|client-certificate-data|password)['\"]?\s*[:=]\s*['\"]?)"
        r"[^'\"\s,>)}]+"
    ),
    re.compile(r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?-----END [A-Z ]*PRIVATE KEY-----", re.S),
)


def _mask(m: re.Match[str]) -> str:
    if m.re is _PATTERNS[-1]:
        return MASK
    scheme = m.group(2) + " " if m.lastindex and m.lastindex >= 2 and m.group(2) else ""
    return f"{m.group(1)}{scheme}{MASK}"


def redact(text: str) -> str:
    """``text`` with every credential the patterns know masked."""
    for p in _PATTERNS:
        text = p.sub(_mask, text)
    return text


class RedactCredentials(logging.Filter):
    """Rewrites a record's message (arguments merged) and traceback text, masked."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        masked = redact(message)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        return True


def install(logger: logging.Logger | None = None) -> None:
    """Add the filter to every handler of ``logger`` (the root logger) that lacks it."""
    for handler in (logger or logging.getLogger()).handlers:
        if not any(isinstance(f, RedactCredentials) for f in handler.filters):
            handler.addFilter(RedactCredentials())
