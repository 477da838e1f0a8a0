"""Where this server may send requests: one policy for every outbound call — webhooks, budget bots, the LLM
extractor's and the embedder's endpoints, and any upstream to come.

Only public (globally routed) unicast addresses are called by default. Refused: private, loopback, link-local
(cloud metadata), carrier-grade NAT, benchmarking, documentation, reserved, multicast and unspecified
addresses, and the IPv6 forms that carry an IPv4 address (IPv4-mapped, IPv4-compatible, IPv4-translated,
NAT64, 6to4, Teredo). The operator lists their own hosts and networks in ACE_OUTBOUND_ALLOW (comma-separated
host names, `*.suffix` names, IP addresses and CIDR networks); it is read at every call.

The policy is checked twice:
- when a URL is saved (`url_refusal`): the host as written, without DNS — IP literals in every form a resolver
  accepts (`2130706433`, `0x7f.1`, `0177.0.0.1`, `127.1`, `[::ffff:a9fe:a9fe]`) and the names that are loopback
  by definition (`localhost`, `*.localhost`);
- when connecting (`connect`, and `HTTPConnection`, `HTTPSConnection` and `urlopen` built on it): the name is
  resolved once, each address is checked, and the socket connects to a checked address, never to the name again,
  so a name that resolves elsewhere the second time (DNS rebinding) gains nothing. TLS still verifies the
  certificate for the name and sends it as SNI, and the Host header is the name.
`urlopen` follows no redirect and opens only http(s) URLs.

Behind an egress proxy (`HTTPS_PROXY`, `HTTP_PROXY`, `NO_PROXY` in the environment, as urllib reads them),
`urlopen` goes through it: the target is checked here first — the host as written, then every address it resolves
to here, all of which must be allowed, since the proxy connects by name — and the proxy itself, the operator's
own, is connected to without the policy. A name this host cannot resolve is left to the proxy, whose own rules then
apply. `NO_PROXY` hosts are connected to directly, through the policy. (Webhooks are sent directly, never through
a proxy: `webhooks_app/services/transport.py`.)

A new caller (a gateway's upstream, say) does the same two things: `url_refusal(url)` where the URL is saved
(a 400 naming the field), and `urlopen` or `HTTPConnection`/`HTTPSConnection` to send, telling a tenant no more
than the callers here do (`webhooks_app/services/transport.py`).

The standard library's http.client is what the callers use; the guard sits where it opens its socket — the seam
the SSRF libraries for requests and httpx (Advocate, ssrfguard, drawbridge) guard in the same way.
"""

from __future__ import annotations

import functools
import http.client
import ipaddress
import re
import socket
import ssl
import urllib.error
import urllib.request
from dataclasses import dataclass
from urllib.parse import urlsplit

from django.conf import settings

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
ALLOW_SETTING = "ACE_OUTBOUND_ALLOW"
# What the deprecated ACE_WEBHOOKS_ALLOW_PRIVATE=true adds to the allow-list (not link-local: cloud metadata).
PRIVATE_AND_LOOPBACK = "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,127.0.0.0/8,fc00::/7,::1"

# (network, what it is), the first match wins. IANA's special-purpose registries, less the few "globally
# reachable" entries nobody sends a webhook to.
_IPV4_REFUSED = [
    ("0.0.0.0/8", "an unspecified address (“this network”)"),
    ("10.0.0.0/8", "a private address"),
    ("100.64.0.0/10", "a carrier-grade NAT (shared) address"),
    ("127.0.0.0/8", "a loopback address"),
    ("169.254.0.0/16", "a link-local address, where cloud metadata services answer"),
    ("172.16.0.0/12", "a private address"),
    ("192.0.0.0/24", "an IETF protocol address"),
    ("192.0.2.0/24", "a documentation address"),
    ("192.88.99.0/24", "a 6to4 relay address"),
    ("192.168.0.0/16", "a private address"),
    ("198.18.0.0/15", "a benchmarking address"),
    ("198.51.100.0/24", "a documentation address"),
    ("203.0.113.0/24", "a documentation address"),
    ("224.0.0.0/4", "a multicast address"),
    ("240.0.0.0/4", "a reserved address"),  # 255.255.255.255 (broadcast) included
]
_IPV6_REFUSED = [
    ("::/128", "the unspecified address"),
    ("::1/128", "the loopback address"),
    ("100::/64", "a discard-only address"),
    ("2001:2::/48", "a benchmarking address"),
    ("2001::/23", "an IETF protocol address"),
    ("2001:db8::/32", "a documentation address"),
    ("3fff::/20", "a documentation address"),
    ("fc00::/7", "a private (unique local) address"),
    ("fe80::/10", "a link-local address"),
    ("fec0::/10", "a site-local address"),
    ("ff00::/8", "a multicast address"),
]


def _low32(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address:
    return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)


# IPv6 forms that carry an IPv4 address: (network, name, the IPv4 address carried or None).
_IPV6_TRANSITION = [
    ("::ffff:0:0:0/96", "IPv4-translated", _low32),
    ("64:ff9b::/96", "NAT64", _low32),
    ("64:ff9b:1::/48", "local-use NAT64", lambda ip: None),
    ("2002::/16", "6to4", lambda ip: ip.sixtofour),
    ("2001::/32", "Teredo", lambda ip: ip.teredo[1]),
    ("::/96", "IPv4-compatible", _low32),  # after ::/128 and ::1/128 above
]
_IPV4_TABLE = [(ipaddress.ip_network(n), why) for n, why in _IPV4_REFUSED]
_IPV6_TABLE = [(ipaddress.ip_network(n), why) for n, why in _IPV6_REFUSED]
_IPV6_TRANSITION_TABLE = [(ipaddress.ip_network(n), name, carried) for n, name, carried in _IPV6_TRANSITION]
_GLOBAL_UNICAST_V6 = ipaddress.ip_network("2000::/3")

# Names that are loopback by definition (RFC 6761), and the ones Debian and Red Hat put in /etc/hosts.
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"}
_LABEL = r"[a-z0-9_](?:[a-z0-9_-]{0,61}[a-z0-9_])?"
_HOST_NAME = re.compile(rf"^(?=.{{1,253}}$){_LABEL}(?:\.{_LABEL})*$")
_NUMERIC_LABEL = re.compile(r"^(?:[0-9]+|0x[0-9a-f]*)$")


class OutboundRefused(ConnectionError):
    """The policy refuses the host or every address it resolves to. The message says why, and how an operator
    allows it."""


# -- the allow-list -----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Allowed:
    """What ACE_OUTBOUND_ALLOW lets through besides public addresses."""

    networks: tuple = ()
    names: frozenset = frozenset()
    suffixes: tuple = ()  # from `*.example.internal`: ".example.internal"

    def covers_address(self, ip: IPAddress) -> bool:
        return any(ip.version == network.version and ip in network for network in self.networks)

    def covers_name(self, host: str) -> bool:
        return host in self.names or any(host.endswith(suffix) for suffix in self.suffixes)


def allow_parse(value) -> Allowed:
    """ACE_OUTBOUND_ALLOW's value (a comma-separated text, or a list) as an Allowed; ValueError names a bad entry."""
    entries = value.split(",") if isinstance(value, str) else list(value or ())
    networks, names, suffixes = [], set(), []
    for raw in entries:
        entry = str(raw).strip().lower()
        if not entry:
            continue
        bare = entry[1:-1] if entry.startswith("[") and entry.endswith("]") else entry
        try:
            networks.append(ipaddress.ip_network(bare))
            continue
        except ValueError as error:
            if "/" in bare:
                raise ValueError(f"{ALLOW_SETTING}: {raw.strip()!r} is not a CIDR network ({error})") from None
        if entry.startswith("*.") and _HOST_NAME.match(entry[2:].rstrip(".")):
            suffixes.append("." + entry[2:].rstrip("."))
        elif _HOST_NAME.match(entry.rstrip(".")) and not _NUMERIC_LABEL.match(entry.rstrip(".").rsplit(".", 1)[-1]):
            names.add(entry.rstrip("."))
        else:
            raise ValueError(
                f"{ALLOW_SETTING}: {raw.strip()!r} is not a host name, an IP address or a CIDR network "
                "(e.g. 127.0.0.1,10.0.0.0/8,vllm.internal,*.corp.example)"
            )
    return Allowed(networks=tuple(networks), names=frozenset(names), suffixes=tuple(suffixes))


@functools.lru_cache(maxsize=8)
def _allowed_cached(value: str) -> Allowed:
    return allow_parse(value)


def allowed() -> Allowed:
    """The allow-list in force (settings are read at each call, so a test or a reload changes it)."""
    value = getattr(settings, ALLOW_SETTING, "") or ""
    return _allowed_cached(value if isinstance(value, str) else ",".join(value))


# -- addresses ----------------------------------------------------------------------------------------------------
def _what_address(ip: IPAddress) -> str | None:
    """What kind of non-public address `ip` is (None for a public unicast address); transition forms excluded."""
    table = _IPV4_TABLE if ip.version == 4 else _IPV6_TABLE
    for network, why in table:
        if ip in network:
            return why
    if ip.version == 6 and ip not in _GLOBAL_UNICAST_V6:
        return "a reserved address (outside IPv6 global unicast, 2000::/3)"
    return None


def address_refusal(address, *, allow: Allowed | None = None) -> str | None:
    """Why the policy refuses to connect to this IP address (None when it may be connected to)."""
    allow = allowed() if allow is None else allow
    ip = address if isinstance(address, IPAddress) else ipaddress.ip_address(str(address).split("%")[0])
    if ip.version == 6 and ip.ipv4_mapped is not None:  # the same socket as the IPv4 address: judged as it
        why = address_refusal(ip.ipv4_mapped, allow=allow)
        return f"{ip} is {ip.ipv4_mapped} written as IPv6 (IPv4-mapped): {why}" if why else None
    if ip.version == 6 and not (ip.is_unspecified or ip.is_loopback):
        for network, name, carried_by in _IPV6_TRANSITION_TABLE:
            if ip in network:
                carried = carried_by(ip)
                carried_why = carried and address_refusal(carried, allow=allow)
                if allow.covers_address(ip) and not carried_why:
                    return None
                what = f"{ip} is an IPv6 {name} address" + (f" carrying {carried}" if carried else "")
                return f"{what} ({carried_why or 'a transition form, refused whatever it carries'})"
    if allow.covers_address(ip):
        return None
    why = _what_address(ip)
    return f"{ip} is {why}" if why else None


# -- hosts and URLs (no DNS) --------------------------------------------------------------------------------------
class _NotAHost(ValueError):
    """The host is neither a valid name nor an IP address (no allow-list would change that)."""


def _ipv4_legacy(host: str) -> ipaddress.IPv4Address | None:
    """The IPv4 address a resolver reads in `host` (inet_aton's forms: 1 to 4 parts, decimal, 0-octal or 0x-hex,
    the last part filling the remaining bytes), or None."""
    parts = host.split(".")
    if not 1 <= len(parts) <= 4:
        return None
    numbers = []
    for part in parts:
        if re.fullmatch(r"0x[0-9a-f]*", part):
            numbers.append(int(part[2:] or "0", 16))
        elif re.fullmatch(r"0[0-7]*", part):
            numbers.append(int(part, 8))
        elif re.fullmatch(r"[1-9][0-9]*", part):
            numbers.append(int(part))
        else:
            return None
    *head, last = numbers
    if any(n > 255 for n in head) or last >= 256 ** (4 - len(head)):
        return None
    value = last
    for index, number in enumerate(head):
        value += number << (8 * (3 - index))
    return ipaddress.IPv4Address(value)


def _host_normalised(host: str) -> str:
    """The host as DNS sees it: lower case, IDNA-encoded (so `ⓛocalhost` is `localhost`), no trailing dot."""
    host = host.strip().lower()
    if host.endswith(".") and not host.endswith(".."):
        host = host[:-1]
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError:
        raise _NotAHost(f"{host} is not a valid host name: write it in its xn-- (IDNA) form") from None


def _literal(host: str) -> IPAddress | None:
    """The IP address `host` is written as (IPv6 with its zone, or IPv4 in any form a resolver accepts)."""
    try:
        return ipaddress.ip_address(host.split("%")[0] if ":" in host else host)
    except ValueError:
        pass
    if _NUMERIC_LABEL.match(host.rsplit(".", 1)[-1]):
        ip = _ipv4_legacy(host)
        if ip is None:
            raise _NotAHost(f"{host} is not a valid IPv4 address (nor a host name)")
        return ip
    return None


def _host_judgement(host: str, allow: Allowed) -> tuple[str | None, str]:
    """(why the policy refuses `host` as written or None, what ACE_OUTBOUND_ALLOW would list to allow it)."""
    name = _host_normalised(host)
    if allow.covers_name(name):
        return None, name
    ip = _literal(name)
    if ip is not None:
        why = address_refusal(ip, allow=allow)
        if why and ip.version == 4 and str(ip) != name:
            why = f"{host} is {ip} written another way: {why}"
        return why, _allow_example(ip)
    if name in _LOOPBACK_NAMES or name.endswith(".localhost"):
        if allow.covers_address(ipaddress.ip_address("127.0.0.1")):
            return None, name
        return f"{host} is a loopback name (it means this server itself)", "127.0.0.1"
    if not _HOST_NAME.match(name):
        raise _NotAHost(f"{host} is not a valid host name")
    return None, name


def _allow_example(ip: IPAddress) -> str:
    """What ACE_OUTBOUND_ALLOW would list to allow `ip`: an IPv6 form of an IPv4 address needs that too."""
    if ip.version == 4:
        return str(ip)
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    for network, _, carried_by in _IPV6_TRANSITION_TABLE:
        if ip in network and not (ip.is_unspecified or ip.is_loopback):
            carried = carried_by(ip)
            return f"{ip},{carried}" if carried and _what_address(carried) else str(ip)
    return str(ip)


def host_refusal(host: str, *, allow: Allowed | None = None) -> str | None:
    """Why the policy refuses `host` as written, and how an operator would allow it (None when it may be called:
    its addresses are checked again when connecting). No DNS: a name is refused here only when it is loopback by
    definition, or not a host name at all."""
    try:
        why, example = _host_judgement(host, allowed() if allow is None else allow)
    except ValueError as error:
        return str(error)
    return f"{why}; {how_to_allow(example)}" if why else None


def how_to_allow(example: str) -> str:
    return (
        f"this server calls only public addresses unless its operator allows others in {ALLOW_SETTING} "
        f"(e.g. {ALLOW_SETTING}={example})"
    )


def url_refusal(url: str) -> str | None:
    """Why the policy refuses an http(s) URL's host, with how an operator would allow it (None when it may be
    called). For the checks made when a URL is saved; the URL's shape is the caller's to check."""
    try:
        host = urlsplit(url.strip()).hostname
    except ValueError as error:
        return f"Not a URL: {error}."
    if not host:
        return "The URL names no host."
    why = host_refusal(host)
    return f"{why}." if why else None


# -- connecting ---------------------------------------------------------------------------------------------------
def connect(host: str, port: int, timeout=socket._GLOBAL_DEFAULT_TIMEOUT) -> socket.socket:
    """A socket connected to one of `host`'s addresses that the policy allows (the first that answers).
    Raises OutboundRefused when the host or each of its addresses is refused, OSError when none answers."""
    allow = allowed()
    why = host_refusal(host, allow=allow)
    if why:
        raise OutboundRefused(why)
    checked = not allow.covers_name(_host_normalised(host))
    refusals: list[str] = []
    last_error: OSError | None = None
    for family, kind, proto, _, sockaddr in socket.getaddrinfo(host, port, type=socket.SOCK_STREAM):
        why = address_refusal(sockaddr[0], allow=allow) if checked else None
        if why:
            refusals.append(why)
            continue
        sock = socket.socket(family, kind, proto)
        try:
            if timeout is not socket._GLOBAL_DEFAULT_TIMEOUT:
                sock.settimeout(timeout)
            sock.connect(sockaddr)  # the address just checked, not the name: no second lookup
        except OSError as error:
            sock.close()
            last_error = error
            continue
        return sock
    if last_error is not None:
        raise last_error
    if refusals:
        raise OutboundRefused(f"{host} resolves only to refused addresses ({refusals[0]}); {how_to_allow(host)}")
    raise OSError(f"{host} has no address")


def _proxies() -> tuple[tuple[str, str], ...]:
    """The environment's proxies as urllib reads them (`https`, `http`, `no`, …), as a key for the caches."""
    return tuple(sorted(urllib.request.getproxies().items()))


@functools.lru_cache(maxsize=8)
def _proxy_endpoints(proxies: tuple[tuple[str, str], ...]) -> frozenset[tuple[str, int]]:
    endpoints = set()
    for scheme, url in proxies:
        if scheme == "no":
            continue
        parts = urlsplit(url if "://" in url else f"http://{url}")
        if parts.hostname:
            endpoints.add((parts.hostname.lower(), parts.port or (443 if parts.scheme == "https" else 80)))
    return frozenset(endpoints)


def _is_proxy(host: str, port: int) -> bool:
    """The operator's own egress proxy (HTTP(S)_PROXY): connected to without the policy."""
    return (host.lower(), port) in _proxy_endpoints(_proxies())


def proxied_target_check(host: str, port: int) -> None:
    """Before a request goes to a proxy (which connects to `host` by name): raise OutboundRefused when the host as
    written, or any address it resolves to here, is refused. A name this host cannot resolve is left to the proxy."""
    allow = allowed()
    why = host_refusal(host, allow=allow)
    if why:
        raise OutboundRefused(why)
    if allow.covers_name(_host_normalised(host)) or _literal(_host_normalised(host)) is not None:
        return
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return  # only the proxy resolves names (a closed network): its own rules apply
    for *_, sockaddr in found:
        why = address_refusal(sockaddr[0], allow=allow)
        if why:
            raise OutboundRefused(
                f"{host} resolves to a refused address ({why}); through a proxy every address a name resolves to "
                f"must be allowed; {how_to_allow(host)}"
            )


class _Checked:
    """http.client's connection, its socket opened through the policy (`connect`), or straight to the operator's
    proxy; http.client then sets up a proxy's tunnel and TLS, with the certificate checked for the name asked for
    (the tunnel's host through a proxy) and that name sent as SNI."""

    def __init__(self, *args, via_proxy: bool = False, **kwargs):
        super().__init__(*args, **kwargs)
        # Only urlopen's handlers say so, for a request the proxy handler let through (its target checked): a
        # connection made for a tenant's URL goes through the policy even when the URL names the proxy.
        self._via_proxy = via_proxy
        self._create_connection = self._open

    def _open(self, address, timeout=socket._GLOBAL_DEFAULT_TIMEOUT, source_address=None):
        host, port = address
        if self._via_proxy and _is_proxy(host, port):
            return socket.create_connection(address, timeout, source_address)
        return connect(host, port, timeout)


class HTTPConnection(_Checked, http.client.HTTPConnection):
    """http.client's connection, through the policy."""


class HTTPSConnection(_Checked, http.client.HTTPSConnection):
    """http.client's TLS connection, through the policy; the certificate is checked for the name."""


def _via_proxy(req: urllib.request.Request) -> bool:
    """urllib set the request up for a proxy: an absolute URI to send (http), or a tunnel to open (https)."""
    return req.has_proxy() or bool(getattr(req, "_tunnel_host", None))


class _HTTPHandler(urllib.request.HTTPHandler):
    def http_open(self, req):
        return self.do_open(functools.partial(HTTPConnection, via_proxy=_via_proxy(req)), req)


class _HTTPSHandler(urllib.request.HTTPSHandler):
    def https_open(self, req):
        return self.do_open(functools.partial(HTTPSConnection, via_proxy=_via_proxy(req)), req, context=self._context)


class _CheckedProxyHandler(urllib.request.ProxyHandler):
    """The environment's proxies, for a request whose target the policy allows (`proxied_target_check`)."""

    def proxy_open(self, req, proxy, type):  # noqa: A002 - urllib's name
        if req.host and urllib.request.proxy_bypass(req.host):
            return None  # NO_PROXY: straight there, through the policy's connect
        target = urlsplit(f"//{req.host}")
        try:
            proxied_target_check(target.hostname or "", target.port or (443 if req.type == "https" else 80))
        except OutboundRefused as refused:
            raise urllib.error.URLError(refused) from None
        return super().proxy_open(req, proxy, type)


class _NoRedirects(urllib.request.HTTPRedirectHandler):
    """A 3xx is the answer (an HTTPError): the next hop is not called."""

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        return None


def _opener() -> urllib.request.OpenerDirector:
    return _opener_for(_proxies())


@functools.lru_cache(maxsize=8)
def _opener_for(proxies: tuple[tuple[str, str], ...]) -> urllib.request.OpenerDirector:
    opener = urllib.request.OpenerDirector()
    handlers = [
        _HTTPHandler(),
        _HTTPSHandler(context=ssl.create_default_context()),
        urllib.request.HTTPDefaultErrorHandler(),
        _NoRedirects(),
        urllib.request.HTTPErrorProcessor(),
        urllib.request.UnknownHandler(),
    ]
    proxied = {scheme: url for scheme, url in proxies if scheme in ("http", "https")}
    if proxied:
        handlers.append(_CheckedProxyHandler(proxied))
    for handler in handlers:
        opener.add_handler(handler)
    return opener


def urlopen(request: urllib.request.Request | str, *, timeout: float):
    """urllib.request.urlopen through the policy: http(s) only, no redirects followed, through the environment's
    proxy (HTTP(S)_PROXY, NO_PROXY) for a target the policy allows. Raises what urlopen raises (HTTPError,
    URLError); a refusal is a URLError whose `reason` is an OutboundRefused."""
    return _opener().open(request, timeout=timeout)


def refusal_of(error: BaseException) -> OutboundRefused | None:
    """The policy's refusal inside an error urlopen raised (None when it is another failure)."""
    reason = getattr(error, "reason", error)
    return reason if isinstance(reason, OutboundRefused) else None
