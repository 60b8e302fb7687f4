"""Address policy of live crawls: which destinations a request may reach (docs/resilience.md).

Only global unicast addresses are allowed. An address is refused when Python does not call it
global (``not ip.is_global``), when it is multicast or reserved, or when it lies in one of the
not-globally-reachable blocks of the IANA special-purpose registries listed in ``_REFUSED``
(spelled out so that the policy does not change with the Python release). IPv6 forms that carry
an IPv4 address are judged by that address: IPv4-mapped (``::ffff:a.b.c.d``), 6to4
(``2002::/16``) and the NAT64 well-known prefix (``64:ff9b::/96``); a Teredo address
(``2001::/32``) is refused, and its reason names the client when that is not global.

Pure: no Scrapy or Twisted; the middleware in :mod:`topiccrawl.crawl.middlewares` applies it.
"""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address, ip_address, ip_network

from topiccrawl.crawl.errors import ConfigError

IPAddress = IPv4Address | IPv6Address

LOCAL_NAMES = frozenset({"localhost", "localhost.localdomain", "ip6-localhost", "ip6-loopback"})

_NAT64 = ip_network("64:ff9b::/96")  # RFC 6052 well-known prefix: the IPv4 is the last 32 bits

# most specific first: the first match names the reason
_REFUSED = tuple((ip_network(net), why) for net, why in (
    ("0.0.0.0/32", "unspecified"),
    ("0.0.0.0/8", "this network"),
    ("10.0.0.0/8", "private"),
    ("100.64.0.0/10", "shared address space (RFC 6598)"),
    ("127.0.0.0/8", "loopback"),
    ("169.254.0.0/16", "link-local"),
    ("172.16.0.0/12", "private"),
    ("192.0.0.0/24", "IETF protocol assignments"),
    ("192.0.2.0/24", "documentation"),
    ("192.168.0.0/16", "private"),
    ("198.18.0.0/15", "benchmarking"),
    ("198.51.100.0/24", "documentation"),
    ("203.0.113.0/24", "documentation"),
    ("224.0.0.0/4", "multicast"),
    ("255.255.255.255/32", "broadcast"),
    ("240.0.0.0/4", "reserved"),
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("64:ff9b:1::/48", "NAT64 local-use prefix"),
    ("::/8", "reserved"),
    ("100::/64", "discard-only"),
    ("2001::/32", "Teredo"),
    ("2001::/23", "IETF protocol assignments"),
    ("2001:db8::/32", "documentation"),
    ("3fff::/20", "documentation"),
    ("5f00::/16", "segment routing"),
    ("fc00::/7", "unique local (private)"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
))


def embedded_ipv4(ip: IPAddress) -> tuple[str, IPv4Address] | None:
    """The IPv4 address an IPv6 address carries, with the form's name, or ``None``.

    IPv4-mapped, 6to4 and NAT64 (well-known prefix) reach that IPv4 host; for Teredo it is the
    client address (stored bit-inverted in the last 32 bits, RFC 4380 §4)."""
    if not isinstance(ip, IPv6Address):
        return None
    if ip.ipv4_mapped is not None:
        return "IPv4-mapped", ip.ipv4_mapped
    if ip.sixtofour is not None:
        return "6to4", ip.sixtofour
    if ip in _NAT64:
        return "NAT64", IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.teredo is not None:
        return "Teredo client", ip.teredo[1]
    return None


def refusal(ip: IPAddress) -> str | None:
    """Why a live crawl must not connect to ``ip`` (a short phrase), or ``None`` when it may."""
    embedded = embedded_ipv4(ip)
    if embedded is not None:
        form, v4 = embedded
        why = refusal(v4)
        if why is not None:
            return f"{form} {v4}: {why}"
        if form != "Teredo client":  # the IPv6 address stands for a global IPv4 host
            return None
    for net, why in _REFUSED:
        if ip in net:
            return why
    if ip.is_multicast:
        return "multicast"
    if ip.is_reserved:
        return "reserved"
    if not ip.is_global:
        return "not globally reachable"
    return None


def is_allowed_ip(ip: IPAddress) -> bool:
    """True when a live crawl may connect to ``ip``: a global unicast address (module docstring)."""
    return refusal(ip) is None


def host_refusal(host: str) -> str | None:
    """Why the host part of a URL is refused without a DNS lookup: a literal address that is not
    allowed or a local name (``localhost``, ``*.localhost``, …); ``None`` for anything else."""
    host = host.strip("[]").lower().rstrip(".")
    if host in LOCAL_NAMES or host.endswith(".localhost"):
        return "local name"
    try:
        ip = ip_address(host)
    except ValueError:
        return None
    return refusal(ip)


def parse_allow_hosts(text: str) -> tuple[frozenset[str], tuple]:
    """``TOPICCRAWL_LIVE_ALLOW_HOSTS``: comma-separated host names (exact, case-insensitive), IP
    addresses and CIDR networks -> (names, networks); a bad network raises ``ConfigError``."""
    names, nets = set(), []
    for entry in filter(None, (e.strip().lower().strip("[]") for e in text.split(","))):
        if "/" in entry:
            try:
                nets.append(ip_network(entry, strict=False))
            except ValueError:
                raise ConfigError(f"TOPICCRAWL_LIVE_ALLOW_HOSTS: {entry!r} is not an IP network like 10.0.0.0/8") from None
        else:
            try:
                nets.append(ip_network(entry))
            except ValueError:
                names.add(entry.rstrip("."))
    return frozenset(names), tuple(nets)


def allow_listed(host: str, ip: IPAddress | None, names: frozenset[str], nets: tuple) -> bool:
    """True when ``TOPICCRAWL_LIVE_ALLOW_HOSTS`` (parsed: ``names``, ``nets``) allows the host
    name, or the address ``ip`` (or the IPv4 address it embeds) lies in one of the networks."""
    if host in names:
        return True
    if ip is None:
        return False
    embedded = embedded_ipv4(ip)
    candidates = (ip,) if embedded is None else (ip, embedded[1])
    return any(a in net for a in candidates for net in nets)

