"""Scraping an actor's ``/metrics`` in tests: fetch, parse, read one sample."""

from __future__ import annotations

import asyncio
import time
import urllib.error
import urllib.request
from collections.abc import Callable

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import Collector

# name (with _total/_bucket/... suffix) -> list of (labels, value)
Samples = dict[str, list[tuple[dict[str, str], float]]]


def scrape(port: int) -> Samples:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        return parse(response.read().decode("utf-8"))


def collected(*collectors: Collector) -> Samples:
    """The samples of ``collectors`` as a scrape would read them (no server: pure)."""
    registry = CollectorRegistry(auto_describe=False)
    for collector in collectors:
        registry.register(collector)
    return parse(generate_latest(registry).decode("utf-8"))


def parse(text: str) -> Samples:
    """The samples of Prometheus exposition ``text``."""
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((dict(sample.labels), sample.value))
    return samples


def total(samples: Samples, name: str, **labels: str) -> float:
    """Sum of ``name``'s samples whose labels include ``labels`` (0 when none)."""
    return sum(
        value
        for sample_labels, value in samples.get(name, [])
        if all(sample_labels.get(k) == v for k, v in labels.items())
    )


async def scrape_until(
    port: int, ready: Callable[[Samples], bool], timeout_s: float, alive: Callable[[], None]
) -> Samples:
    """Scrape until ``ready`` holds; the last scrape on timeout (for the assertion)."""
    deadline = time.monotonic() + timeout_s
    samples: Samples = {}
    while time.monotonic() < deadline:
        alive()
        try:
            samples = await asyncio.to_thread(scrape, port)
        except (urllib.error.URLError, ConnectionError):
            samples = {}  # not listening yet
        if samples and ready(samples):
            return samples
        await asyncio.sleep(0.3)
    return samples
