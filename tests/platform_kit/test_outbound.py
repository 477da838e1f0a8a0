"""The outbound policy (platform_kit/outbound.py): which addresses and hosts are refused, as written (when a URL is
saved) and as resolved (when connecting), what ACE_OUTBOUND_ALLOW lets through, and that a connection goes to the
address that was checked, never to a second lookup, and never follows a redirect."""

import ssl
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from platform_kit import outbound
from tests.platform_kit.conftest import LocalServer

ROOT = Path(__file__).resolve().parents[2]

REFUSED_ADDRESSES = [
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("169.254.169.254", "link-local"),
    ("100.64.0.1", "carrier-grade NAT"),
    ("100.127.255.254", "carrier-grade NAT"),
    ("0.0.0.0", "unspecified"),
    ("198.18.0.1", "benchmarking"),
    ("198.19.255.1", "benchmarking"),
    ("192.0.2.1", "documentation"),
    ("198.51.100.7", "documentation"),
    ("203.0.113.9", "documentation"),
    ("192.0.0.170", "IETF protocol"),
    ("192.88.99.1", "6to4 relay"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),
    ("::1", "loopback"),
    ("::", "unspecified"),
    ("fe80::1", "link-local"),
    ("fe80::1%eth0", "link-local"),
    ("fc00::1", "unique local"),
    ("fd12:3456::1", "unique local"),
    ("fec0::1", "site-local"),
    ("ff02::1", "multicast"),
    ("2001:db8::1", "documentation"),
    ("3fff::1", "documentation"),
    ("2001:2::1", "benchmarking"),
    ("100::1", "discard-only"),
    ("5f00::1", "reserved"),
    ("4000::1", "reserved"),
    # IPv6 forms of an IPv4 address
    ("::ffff:a9fe:a9fe", "169.254.169.254 written as IPv6 (IPv4-mapped)"),
    ("::ffff:127.0.0.1", "IPv4-mapped"),
    ("::a9fe:a9fe", "IPv4-compatible address carrying 169.254.169.254"),
    ("::ffff:0:a9fe:a9fe", "IPv4-translated address carrying 169.254.169.254"),
    ("64:ff9b::a9fe:a9fe", "NAT64 address carrying 169.254.169.254"),
    ("64:ff9b::808:808", "NAT64 address carrying 8.8.8.8"),  # transition forms are refused whatever they carry
    ("64:ff9b:1::1", "local-use NAT64"),
    ("2002:a9fe:a9fe::1", "6to4 address carrying 169.254.169.254"),
    ("2002:808:808::1", "6to4 address carrying 8.8.8.8"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "Teredo address carrying 192.0.2.45"),
    ("2001::1", "Teredo"),
]
PUBLIC_ADDRESSES = ["8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "2a00:1450:4001:80b::200e"]


@pytest.mark.parametrize(("address", "why"), REFUSED_ADDRESSES)
def test_non_public_addresses_are_refused_by_default(address, why, settings):
    settings.ACE_OUTBOUND_ALLOW = ""
    refusal = outbound.address_refusal(address)
    assert refusal is not None and why in refusal, refusal


@pytest.mark.parametrize("address", [*PUBLIC_ADDRESSES, "::ffff:8.8.8.8"])
def test_public_addresses_are_allowed(address, settings):
    settings.ACE_OUTBOUND_ALLOW = ""
    assert outbound.address_refusal(address) is None


REFUSED_URLS = [
    ("http://127.0.0.1:8080/x", "loopback"),
    ("http://2130706433/", "127.0.0.1 written another way"),
    ("http://0x7f.1/", "127.0.0.1 written another way"),
    ("http://0x7f000001/", "127.0.0.1 written another way"),
    ("http://0177.0.0.1/", "127.0.0.1 written another way"),
    ("http://127.1/", "127.0.0.1 written another way"),
    ("http://127.0.0.1./", "loopback"),
    ("http://0/", "unspecified"),
    ("http://1.2.3.4.5/", "not a valid IPv4 address"),
    ("http://08.1.2.3/", "not a valid IPv4 address"),
    ("http://localhost/", "loopback name"),
    ("http://LOCALHOST:8000/", "loopback name"),
    ("http://localhost./", "loopback name"),
    ("http://app.localhost/", "loopback name"),
    ("http://localhost.localdomain/", "loopback name"),
    ("http://ⓛocalhost/", "loopback name"),  # IDNA maps it to localhost, as the resolver would
    ("http://１２７.０.０.１/", "loopback"),
    ("http://[::1]/", "loopback"),
    ("http://[::]/", "unspecified"),
    ("http://[64:ff9b::a9fe:a9fe]/latest/meta-data/", "NAT64"),
    ("http://[::ffff:a9fe:a9fe]/", "IPv4-mapped"),
    ("http://[::ffff:169.254.169.254]/", "IPv4-mapped"),
    ("http://[::a9fe:a9fe]/", "IPv4-compatible"),
    ("http://[2002:a9fe:a9fe::]/", "6to4"),
    ("http://[2001::a9fe:a9fe]/", "Teredo"),
    ("http://[fe80::1%25eth0]/", "link-local"),
    ("http://169.254.169.254/latest/meta-data/", "link-local"),
    ("http://100.100.100.200/", "carrier-grade NAT"),  # a cloud's metadata address
]


@pytest.mark.parametrize(("url", "why"), REFUSED_URLS)
def test_urls_are_refused_as_written_with_how_an_operator_allows_them(url, why, settings):
    settings.ACE_OUTBOUND_ALLOW = ""
    refusal = outbound.url_refusal(url)
    assert refusal is not None and why in refusal, refusal
    assert ("ACE_OUTBOUND_ALLOW" in refusal) == ("not a valid" not in refusal)  # how to allow what can be allowed


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/hooks",
        "https://hooks.slack.com/services/T0/B0/x",
        "http://8.8.8.8:8080/x",
        "https://[2606:4700:4700::1111]/x",
        "https://open.feishu.cn/open-apis/bot/v2/hook/t",
        "https://xn--fiqs8s.example/",
        "https://例子.example/",
    ],
)
def test_public_urls_are_allowed(url, settings):
    settings.ACE_OUTBOUND_ALLOW = ""
    assert outbound.url_refusal(url) is None


def test_the_allow_list_takes_hosts_names_and_networks(settings):
    settings.ACE_OUTBOUND_ALLOW = " 127.0.0.1 , 10.0.0.0/8,[fd00::1], vllm.internal, *.corp.example, 64:ff9b::/96"
    for url in (
        "http://127.0.0.1:8000/v1",
        "http://localhost:8000/v1",  # a loopback name, when the operator allows loopback
        "http://10.200.3.4/x",
        "http://[fd00::1]/x",
        "http://VLLM.internal./v1",
        "http://a.b.corp.example/x",
        "http://[64:ff9b::808:808]/",  # NAT64 allowed: for what it carries, the rest of the policy still holds
    ):
        assert outbound.url_refusal(url) is None, url
    for url in (
        "http://127.0.0.2/",
        "http://192.168.1.1/",
        "http://[fd00::2]/",
        "http://[64:ff9b::a9fe:a9fe]/",
        "http://169.254.169.254/",
    ):
        assert outbound.url_refusal(url) is not None, url
    allowed = outbound.allowed()
    assert allowed.covers_name("x.corp.example") and not allowed.covers_name("corp.example")  # resolved: checked


@pytest.mark.parametrize("entry", ["10.0.0.1/8", "10.0.0.0/33", "not a host", "http://x", "1.2.3", "*."])
def test_a_bad_allow_list_entry_is_named(entry):
    with pytest.raises(ValueError, match="ACE_OUTBOUND_ALLOW"):
        outbound.allow_parse(f"127.0.0.1,{entry}")


def test_a_bad_allow_list_stops_the_server_at_start_and_the_old_setting_is_a_deprecated_alias(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "ACE_DATA_DIR": str(tmp_path), "ACE_OUTBOUND_ALLOW": "10.0.0.1/8"}
    code = "import django; django.setup(); from django.conf import settings; print(settings.ACE_OUTBOUND_ALLOW)"
    bad = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env={**env, "DJANGO_SETTINGS_MODULE": "aceproject.settings"},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert bad.returncode != 0 and "ACE_OUTBOUND_ALLOW: '10.0.0.1/8' is not a CIDR network" in bad.stderr
    alias = subprocess.run(
        [sys.executable, "-c", code],
        cwd=ROOT,
        env={**env, "DJANGO_SETTINGS_MODULE": "aceproject.settings", "ACE_OUTBOUND_ALLOW": "vllm.internal",
             "ACE_WEBHOOKS_ALLOW_PRIVATE": "true"},
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert alias.returncode == 0, alias.stderr
    allowed = outbound.allow_parse(alias.stdout.strip())
    assert "vllm.internal" in allowed.names
    assert outbound.address_refusal("10.1.2.3", allow=allowed) is None
    assert outbound.address_refusal("127.0.0.1", allow=allowed) is None
    assert "link-local" in outbound.address_refusal("169.254.169.254", allow=allowed)  # never metadata


# -- connecting: the addresses a name resolves to -----------------------------------------------------------------
def test_a_public_looking_name_that_resolves_to_loopback_is_refused_at_connect_time(resolver, server, settings):
    settings.ACE_OUTBOUND_ALLOW = ""
    resolver["hooks.example.com"] = ["127.0.0.1"]
    assert outbound.url_refusal(f"http://hooks.example.com:{server.port}/x") is None  # nothing to see when saved
    with pytest.raises(urllib.error.URLError) as raised:
        outbound.urlopen(f"http://hooks.example.com:{server.port}/x", timeout=5)
    refusal = outbound.refusal_of(raised.value)
    assert refusal is not None and "resolves only to refused addresses (127.0.0.1 is a loopback" in str(refusal)
    with pytest.raises(outbound.OutboundRefused):
        outbound.connect("hooks.example.com", server.port, 5)
    assert server.requests == []


def test_the_allow_list_lets_127_0_0_1_through_and_the_connection_goes_to_the_address_checked(
    resolver, server, settings
):
    settings.ACE_OUTBOUND_ALLOW = "127.0.0.1"
    # a private address first: refused, so never tried; the allowed one is connected to, from one lookup
    resolver["hooks.example.com"] = ["10.255.255.1", "127.0.0.1"]
    with outbound.urlopen(f"http://hooks.example.com:{server.port}/x", timeout=5) as response:
        assert response.status == 200 and response.read() == b"ok"
    assert server.requests == [("/x", f"hooks.example.com:{server.port}")]  # the Host header is the name
    assert resolver.lookups == ["hooks.example.com"]
    with outbound.urlopen(f"http://127.0.0.1:{server.port}/y", timeout=5) as response:
        assert response.status == 200


def test_a_name_the_operator_allows_is_trusted_to_resolve_where_it_will(resolver, server, settings):
    settings.ACE_OUTBOUND_ALLOW = "vllm.internal"
    resolver["vllm.internal"] = ["127.0.0.1"]
    with outbound.urlopen(f"http://vllm.internal:{server.port}/v1", timeout=5) as response:
        assert response.status == 200
    resolver["other.internal"] = ["127.0.0.1"]
    with pytest.raises(urllib.error.URLError):
        outbound.urlopen(f"http://other.internal:{server.port}/v1", timeout=5)


def test_redirects_are_not_followed(settings):
    settings.ACE_OUTBOUND_ALLOW = "127.0.0.1"
    target = LocalServer()
    redirecting = LocalServer(status=302, location=f"http://127.0.0.1:{target.port}/secret")
    try:
        with pytest.raises(urllib.error.HTTPError) as raised:
            outbound.urlopen(f"http://127.0.0.1:{redirecting.port}/", timeout=5)
        assert raised.value.code == 302
        assert len(redirecting.requests) == 1 and target.requests == []
    finally:
        target.close()
        redirecting.close()


@pytest.mark.parametrize("url", ["file:///etc/passwd", "ftp://example.com/x", "data:text/plain,hi"])
def test_only_http_urls_are_opened(url, settings):
    settings.ACE_OUTBOUND_ALLOW = ""
    with pytest.raises(urllib.error.URLError, match="unknown url type"):
        outbound.urlopen(urllib.request.Request(url), timeout=5)


def test_tls_is_checked_for_the_name_while_the_connection_goes_to_the_checked_address(tls_server, resolver, settings):
    settings.ACE_OUTBOUND_ALLOW = "127.0.0.1"
    resolver["hooks.example.com"] = ["127.0.0.1"]
    resolver["other.example.com"] = ["127.0.0.1"]
    connection = outbound.HTTPSConnection(
        "hooks.example.com", tls_server.port, timeout=5, context=tls_server.client_context
    )
    try:
        connection.request("GET", "/tls")
        assert connection.getresponse().status == 200
    finally:
        connection.close()
    assert tls_server.sni_names == ["hooks.example.com"]
    assert tls_server.requests == [("/tls", f"hooks.example.com:{tls_server.port}")]
    mismatched = outbound.HTTPSConnection(
        "other.example.com", tls_server.port, timeout=5, context=tls_server.client_context
    )
    with pytest.raises(ssl.SSLCertVerificationError, match="other.example.com"):
        mismatched.request("GET", "/")
    mismatched.close()
