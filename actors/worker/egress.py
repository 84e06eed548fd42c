"""Where an HTTP target may connect: the worker's egress rule (server-side request
forgery).

Anyone who may write a schedule may name any URL, and the worker calls it from
inside the network it runs in. So by default the worker refuses every address that
reaches into that network rather than out of it: loopback, link-local (with the
cloud metadata address 169.254.169.254), the private ranges, "this network",
multicast, broadcast and the unspecified address, in IPv4 and IPv6, and IPv6
addresses that embed a refused IPv4 one. An operator lifts a refusal with
``--http-allow``: an address or CIDR (``10.1.2.0/24``) allows the addresses in it;
a host name (``billing.internal``) allows the URLs naming exactly that host,
wherever it resolves.

The rule judges addresses, not names: the connector resolves a name through
`actors.worker.http_target`'s resolver, which checks every address of the answer
and hands the connector exactly those, so the address connected to is the one
checked (a second DNS answer, a rebinding, never reaches the socket).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Network = ipaddress.IPv4Network | ipaddress.IPv6Network

REFUSED: tuple[tuple[Network, str], ...] = tuple(
    (ipaddress.ip_network(cidr), why)
    for cidr, why in (
        ("0.0.0.0/8", "'this network' (0.0.0.0/8)"),
        ("10.0.0.0/8", "a private address (10.0.0.0/8)"),
        ("100.64.0.0/10", "a carrier-grade NAT address (100.64.0.0/10)"),
        ("127.0.0.0/8", "a loopback address (127.0.0.0/8)"),
        ("169.254.0.0/16", "a link-local address (169.254.0.0/16, the cloud metadata range)"),
        ("172.16.0.0/12", "a private address (172.16.0.0/12)"),
        ("192.0.0.0/24", "an IETF protocol address (192.0.0.0/24)"),
        ("192.168.0.0/16", "a private address (192.168.0.0/16)"),
        ("198.18.0.0/15", "a benchmarking address (198.18.0.0/15)"),
        ("224.0.0.0/4", "a multicast address (224.0.0.0/4)"),
        ("240.0.0.0/4", "a reserved address (240.0.0.0/4, broadcast included)"),
        ("::/128", "the unspecified address (::)"),
        ("::1/128", "the loopback address (::1)"),
        ("fc00::/7", "a unique local address (fc00::/7)"),
        ("fe80::/10", "a link-local address (fe80::/10)"),
        ("ff00::/8", "a multicast address (ff00::/8)"),
    )
)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


class EgressRefused(Exception):
    """The egress rule refuses a target's address; the message says which and how to
    allow it."""


def parse_allow(entry: str) -> Network | str:
    """One ``--http-allow`` entry: a network (an address is a /32 or /128) or a host
    name, lower case without a trailing dot; ValueError saying what it expects."""
    text = entry.strip()
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError:
        pass
    name = text.lower().rstrip(".")
    labels = name.split(".")
    if (
        not name
        or len(name) > 253
        or any(not label or len(label) > 63 for label in labels)
        or not all(c.isalnum() or c in "-." for c in name)
    ):
        raise ValueError(
            f"--http-allow {entry!r}: an address, a CIDR (10.1.2.0/24, fd00::/8) or a host name"
        )
    return name


@dataclass(frozen=True, slots=True)
class EgressRule:
    """The refused ranges, minus what ``--http-allow`` allows."""

    networks: tuple[Network, ...] = ()
    hosts: frozenset[str] = frozenset()

    @classmethod
    def of(cls, entries: Iterable[str]) -> EgressRule:
        """From ``--http-allow`` entries; ValueError naming a bad one."""
        networks: list[Network] = []
        hosts: set[str] = set()
        for entry in entries:
            allowed = parse_allow(entry)
            if isinstance(allowed, str):
                hosts.add(allowed)
            else:
                networks.append(allowed)
        return cls(tuple(networks), frozenset(hosts))

    def allows_host(self, host: str) -> bool:
        """Whether ``host`` (a URL's host) is allowed by name, whatever it resolves to."""
        return host.lower().rstrip(".") in self.hosts

    def why_refused(self, address: str | Address, host: str | None = None) -> str | None:
        """None if the worker may connect to ``address`` (reached for ``host``), else
        the reason, naming the address, its range and the flag that would allow it."""
        given = ipaddress.ip_address(address) if isinstance(address, str) else address
        ip = _unwrapped(given)  # an IPv6 form of an IPv4 address reaches that address
        if any(ip in network for network in self.networks if network.version == ip.version):
            return None
        why = next((w for n, w in REFUSED if n.version == ip.version and ip in n), None)
        if why is None:
            return None
        if ip != given:
            why = f"{why}, written as IPv6"
        named = f"{host} resolves to {given}" if host and host != str(given) else str(given)
        return (
            f"egress refused: {named}, {why}; a worker calls only public addresses unless"
            f" started with --http-allow {ip} (or a CIDR or host name covering it)"
        )

    def check(self, address: str | Address, host: str | None = None) -> None:
        """`EgressRefused` unless the worker may connect to ``address``."""
        why = self.why_refused(address, host)
        if why is not None:
            raise EgressRefused(why)


def _unwrapped(ip: Address) -> Address:
    """The IPv4 address an IPv4-mapped (::ffff:a.b.c.d) or NAT64 (64:ff9b::a.b.c.d)
    IPv6 address stands for; any other address as it is."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip in _NAT64:
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip
