"""The worker's egress rule for HTTP targets: every refused range, what --http-allow
lifts (an address, a CIDR, a host name), IPv6 and IPv6 forms of IPv4 addresses."""

from __future__ import annotations

import ipaddress

import pytest

from actors.worker.egress import REFUSED, EgressRefused, EgressRule, Network, parse_allow

DEFAULT = EgressRule()

# One address inside each refused range, with a word its reason must contain.
REFUSED_SAMPLES = [
    ("0.0.0.0", "this network"),
    ("0.1.2.3", "this network"),
    ("10.20.30.40", "private"),
    ("100.64.0.1", "carrier-grade NAT"),
    ("127.0.0.1", "loopback"),
    ("127.255.255.254", "loopback"),
    ("169.254.169.254", "metadata"),
    ("169.254.1.1", "link-local"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.0.0.8", "IETF"),
    ("192.168.1.1", "private"),
    ("198.18.0.1", "benchmarking"),
    ("224.0.0.251", "multicast"),
    ("239.255.255.250", "multicast"),
    ("240.0.0.1", "reserved"),
    ("255.255.255.255", "reserved"),
    ("::", "unspecified"),
    ("::1", "loopback"),
    ("fc00::1", "unique local"),
    ("fd12:3456::1", "unique local"),
    ("fe80::1", "link-local"),
    ("febf::1", "link-local"),
    ("ff02::1", "multicast"),
    ("::ffff:127.0.0.1", "loopback"),
    ("::ffff:169.254.169.254", "metadata"),
    ("64:ff9b::a00:1", "private"),
]
PUBLIC = [
    "8.8.8.8",
    "1.1.1.1",
    "93.184.215.14",
    "172.32.0.1",
    "100.128.0.1",
    "2606:4700:4700::1111",
    "2a00:1450:4001::200e",
    "::ffff:8.8.8.8",
]


@pytest.mark.parametrize(("address", "word"), REFUSED_SAMPLES)
def test_every_refused_range_is_refused_with_its_reason(address: str, word: str) -> None:
    why = DEFAULT.why_refused(address, "api.example")
    assert why is not None and word in why
    assert "--http-allow" in why
    with pytest.raises(EgressRefused):
        DEFAULT.check(address)


def test_every_range_of_the_table_has_a_sample() -> None:
    for network, _ in REFUSED:
        assert any(
            EgressRule().why_refused(a) and _inside(a, network) for a, _ in REFUSED_SAMPLES
        ), network


def _inside(address: str, network: Network) -> bool:
    ip = ipaddress.ip_address(address)
    return ip.version == network.version and ip in network


@pytest.mark.parametrize("address", PUBLIC)
def test_public_addresses_are_allowed(address: str) -> None:
    assert DEFAULT.why_refused(address) is None


def test_an_allowed_address_or_cidr_lifts_the_refusal_for_it_only() -> None:
    rule = EgressRule.of(["127.0.0.1", "10.1.2.0/24", "fd00::/8"])
    assert rule.why_refused("127.0.0.1") is None
    assert rule.why_refused("::ffff:127.0.0.1") is None  # the same address, as IPv6
    assert rule.why_refused("127.0.0.2") is not None
    assert rule.why_refused("10.1.2.200") is None
    assert rule.why_refused("10.1.3.1") is not None
    assert rule.why_refused("fd12::1") is None
    assert rule.why_refused("fc00::1") is not None
    assert rule.why_refused("169.254.169.254") is not None


def test_an_allowed_host_name_is_matched_exactly() -> None:
    rule = EgressRule.of(["Billing.Internal."])
    assert rule.allows_host("billing.internal") and rule.allows_host("BILLING.internal.")
    assert not rule.allows_host("x.billing.internal")
    assert not rule.allows_host("billing.internal.evil.example")
    # A name allows URLs naming it, not the addresses it happens to resolve to.
    assert rule.why_refused("10.0.0.1") is not None


def test_the_reason_names_the_host_and_the_address() -> None:
    why = DEFAULT.why_refused("127.0.0.1", "localhost")
    assert why is not None and why.startswith("egress refused: localhost resolves to 127.0.0.1")


@pytest.mark.parametrize("entry", ["", "not a host!", "a..b", "x" * 300, "10.0.0.0/33"])
def test_bad_allow_entries_are_refused(entry: str) -> None:
    with pytest.raises(ValueError, match="--http-allow"):
        parse_allow(entry)
