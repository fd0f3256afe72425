"""The HTTP endpoints' listening sockets, taken when ``kubesched run`` starts.

The server (aiohttp.web, the views, delegated auth) is imported only once the caches are
synced (``_serve`` in :mod:`kubesched.operator.run`), but its address is taken at once:
a port already in use, or an address that is not this host's, ends the start with one
line naming the flags before anything is listed or bound, as kube-scheduler's start
does. The server then serves on these sockets.

Like the event loop's own ``create_server``: every address the host resolves to gets a
socket (``localhost``: 127.0.0.1 and ::1), with ``SO_REUSEADDR`` (a restart does not
wait for the old connections' TIME_WAIT) and IPv6 sockets IPv6-only (so ``::`` and
``0.0.0.0`` can both be bound); port 0 takes the port the OS picks for the first
address on all of them.
"""

from __future__ import annotations

import socket

__all__ = ["BACKLOG", "ListenError", "listen"]

BACKLOG = 128
"""Pending connections per socket (probes and scrapes: a handful at a time)."""


class ListenError(Exception):
    """The endpoints' address cannot be listened on; the message names the flags."""


def listen(host: str, port: int) -> list[socket.socket]:
    """Bound, listening, non-blocking sockets for ``host``:``port``, or ListenError."""
    where = f"--bind-address {host} --port {port}"
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as e:
        raise ListenError(
            f"{where}: {host!r} is not an address of this host ({e.strerror})"
        ) from None
    sockets: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if port == 0 and len(sockets) > 1:
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            sock.bind(address)
            sock.listen(BACKLOG)
            sock.setblocking(False)
    except OSError as e:
        for sock in sockets:
            sock.close()
        reason = (e.strerror or str(e)).lower()
        ip = address[0] if isinstance(address[0], str) else host
        at = address[1] if isinstance(address[1], int) else port
        raise ListenError(f"{where}: cannot listen on {ip}:{at}: {reason}") from None
    return sockets
