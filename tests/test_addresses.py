"""The live-mode address policy (topiccrawl.crawl.addresses): every address that is not global
unicast is refused, IPv6 forms carrying an IPv4 address are judged by that address, and the
allow-list lets chosen hosts, addresses and networks through."""

from __future__ import annotations

import random
import subprocess
import sys
from ipaddress import IPv4Address, IPv6Address, ip_address

import pytest

from topiccrawl.crawl.addresses import (
    allow_listed,
    embedded_ipv4,
    host_refusal,
    is_allowed_ip,
    parse_allow_hosts,
    refusal,
)
from topiccrawl.crawl.settings import ConfigError

# a Teredo address (RFC 4380): server 65.54.227.120, client 10.0.0.1 stored bit-inverted
TEREDO_PRIVATE_CLIENT = "2001:0:4136:e378:8000:63bf:f5ff:fffe"
TEREDO_GLOBAL_CLIENT = "2001:0:4136:e378:8000:63bf:f7f7:f7f7"  # client 8.8.8.8


@pytest.mark.parametrize("address,reason", [
    ("100.64.0.1", "shared address space"),
    ("100.100.100.200", "shared address space"),  # a cloud metadata endpoint
    ("100.127.255.255", "shared address space"),
    ("224.0.0.1", "multicast"),
    ("239.255.255.250", "multicast"),  # SSDP
    ("2002:a9fe:a9fe::1", "6to4 169.254.169.254: link-local"),
    ("2002:a00:1::1", "6to4 10.0.0.1: private"),
    ("64:ff9b::a9fe:a9fe", "NAT64 169.254.169.254: link-local"),
    ("64:ff9b::7f00:1", "NAT64 127.0.0.1: loopback"),
    ("64:ff9b:1::a9fe:a9fe", "NAT64 local-use prefix"),
    ("64:ff9b:1::808:808", "NAT64 local-use prefix"),
    ("::ffff:10.0.0.1", "IPv4-mapped 10.0.0.1: private"),
    ("::ffff:100.100.100.200", "IPv4-mapped 100.100.100.200: shared address space"),
    (TEREDO_PRIVATE_CLIENT, "Teredo client 10.0.0.1: private"),
    (TEREDO_GLOBAL_CLIENT, "Teredo"),
    ("0.0.0.0", "unspecified"),
    ("0.1.2.3", "this network"),
    ("::", "unspecified"),
    ("::1", "loopback"),
    ("::127.0.0.1", "reserved"),  # IPv4-compatible (deprecated)
    ("127.0.0.1", "loopback"),
    ("10.1.2.3", "private"),
    ("172.16.0.1", "private"),
    ("192.168.0.9", "private"),
    ("169.254.169.254", "link-local"),
    ("fe80::1", "link-local"),
    ("fc00::1", "unique local"),
    ("fd12:3456::1", "unique local"),
    ("fec0::1", "site-local"),
    ("ff02::1", "multicast"),
    ("ff0e::1", "multicast"),
    ("192.0.0.8", "IETF protocol assignments"),
    ("192.0.2.1", "documentation"),
    ("198.51.100.7", "documentation"),
    ("203.0.113.7", "documentation"),
    ("2001:db8::1", "documentation"),
    ("3fff::1", "documentation"),
    ("198.18.0.1", "benchmarking"),
    ("198.19.255.254", "benchmarking"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "broadcast"),
    ("100::1", "discard-only"),
    ("5f00::1", "segment routing"),
])
def test_non_global_addresses_are_refused(address, reason):
    ip = ip_address(address)
    assert not is_allowed_ip(ip)
    assert reason in refusal(ip)
    assert host_refusal(f"[{address}]" if ":" in address else address) == refusal(ip)


@pytest.mark.parametrize("address", [
    "8.8.8.8", "1.1.1.1", "93.184.216.34", "100.63.255.255", "100.128.0.0", "223.255.255.255",
    "2606:4700:4700::1111", "2001:4860:4860::8888",
    "2002:808:808::1",  # 6to4 of 8.8.8.8
    "64:ff9b::808:808",  # NAT64 of 8.8.8.8
    "::ffff:1.1.1.1",  # IPv4-mapped 1.1.1.1
])
def test_global_addresses_are_allowed(address):
    assert is_allowed_ip(ip_address(address)), refusal(ip_address(address))
    assert host_refusal(address) is None


def test_python_calls_some_of_these_global():
    """Why ``not ip.is_global`` alone is not enough (on this Python at least): multicast and the
    6to4/NAT64 forms of link-local addresses pass it, and they are refused all the same."""
    for address in ("224.0.0.1", "ff02::1", "2002:a9fe:a9fe::1", "64:ff9b::a9fe:a9fe"):
        ip = ip_address(address)
        if ip.is_global:
            assert refusal(ip) is not None, address


def test_embedded_ipv4_forms():
    assert embedded_ipv4(ip_address("::ffff:10.0.0.1")) == ("IPv4-mapped", IPv4Address("10.0.0.1"))
    assert embedded_ipv4(ip_address("2002:a9fe:a9fe::1")) == ("6to4", IPv4Address("169.254.169.254"))
    assert embedded_ipv4(ip_address("64:ff9b::a9fe:a9fe")) == ("NAT64", IPv4Address("169.254.169.254"))
    assert embedded_ipv4(ip_address(TEREDO_PRIVATE_CLIENT)) == ("Teredo client", IPv4Address("10.0.0.1"))
    assert embedded_ipv4(ip_address("64:ff9b:1::a9fe:a9fe")) is None  # local-use: layout is the operator's
    assert embedded_ipv4(ip_address("2606:4700:4700::1111")) is None
    assert embedded_ipv4(ip_address("8.8.8.8")) is None


def test_every_address_python_calls_non_global_or_multicast_is_refused():
    """A sweep over random IPv4 addresses and IPv6 addresses in the special blocks."""
    rng = random.Random(16)
    v4 = [IPv4Address(rng.getrandbits(32)) for _ in range(20000)]
    prefixes = ["::", "::ffff:0:0", "64:ff9b::", "64:ff9b:1::", "100::", "2001::", "2001:db8::",
                "2002::", "3fff::", "5f00::", "fc00::", "fe80::", "fec0::", "ff00::", "2606:4700::"]
    bits = {"::": 96, "::ffff:0:0": 32, "64:ff9b::": 32}
    v6 = [IPv6Address(int(IPv6Address(p)) | rng.getrandbits(bits.get(p, 64))) for p in prefixes for _ in range(300)]
    checked = 0
    for ip in v4 + v6:
        if not ip.is_global or ip.is_multicast:
            assert refusal(ip) is not None, ip
            checked += 1
    assert checked > 2000


@pytest.mark.parametrize("host,reason", [
    ("localhost", "local name"), ("LOCALHOST.", "local name"), ("foo.localhost", "local name"),
    ("ip6-localhost", "local name"), ("[::ffff:127.0.0.1]", "IPv4-mapped 127.0.0.1: loopback"),
    ("example.com", None), ("news.sina.com.cn", None), ("100.64.0.1.example.com", None),
])
def test_host_refusal_of_names(host, reason):
    assert host_refusal(host) == reason


def test_allow_list():
    names, nets = parse_allow_hosts(" Intranet.Example.com., 10.0.0.0/8,100.64.0.0/10 ,[::1]")
    assert names == {"intranet.example.com"}
    assert allow_listed("intranet.example.com", None, names, nets)
    assert allow_listed("x", ip_address("100.100.100.200"), names, nets)
    assert allow_listed("x", ip_address("::1"), names, nets)
    # the same destination written as an IPv6 form carrying an allowed IPv4 address
    assert allow_listed("x", ip_address("::ffff:10.0.0.1"), names, nets)
    assert allow_listed("x", ip_address("2002:a00:1::1"), names, nets)
    assert not allow_listed("x", ip_address("192.168.0.1"), names, nets)
    assert not allow_listed("example.com", None, names, nets)
    with pytest.raises(ConfigError, match="'10.0.0.0/33' is not an IP network"):
        parse_allow_hosts("10.0.0.0/33")


def test_policy_module_is_pure():
    """The policy imports neither Scrapy nor Twisted (the settings module imports it)."""
    code = ("import sys, topiccrawl.crawl.addresses, topiccrawl.crawl.settings; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('scrapy', 'twisted')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
