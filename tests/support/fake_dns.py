"""DNS as a table for the tests of the outbound policy: socket.getaddrinfo is the system's, not our stack, so a test
may answer it (a public-looking name resolving to a loopback address, as a rebinding attacker's DNS would)."""

from __future__ import annotations

import socket


class FakeDNS:
    """DNS as a table (name -> addresses), counting the lookups; other names go to the system's resolver."""

    def __init__(self, real):
        self.real = real
        self.names: dict[str, list[str]] = {}
        self.lookups: list[str] = []

    def __setitem__(self, name: str, addresses: list[str] | None):
        self.names[name] = addresses  # None: the name does not resolve here (a network where only a proxy resolves)

    def getaddrinfo(self, host, port, family=0, type=0, proto=0, flags=0):  # noqa: A002 - socket's names
        if host not in self.names:
            return self.real(host, port, family, type, proto, flags)
        self.lookups.append(host)
        if self.names[host] is None:
            raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
        return [
            (socket.AF_INET6, socket.SOCK_STREAM, 6, "", (address, port, 0, 0))
            if ":" in address
            else (socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, port))
            for address in self.names[host]
        ]
