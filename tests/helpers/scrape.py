"""Scrape a Prometheus endpoint (``GET /metrics``) the way Prometheus does, for tests."""

from __future__ import annotations

import urllib.request
from dataclasses import dataclass

from prometheus_client.parser import text_string_to_metric_families


@dataclass(frozen=True)
class Scrape:
    """One scrape: every sample by (sample name, sorted labels); the family names."""

    samples: dict[tuple[str, tuple[tuple[str, str], ...]], float]
    families: frozenset[str]

    def value(self, name: str, **labels: str) -> float | None:
        """The sample ``name{labels}`` exactly (None when absent)."""
        return self.samples.get((name, tuple(sorted(labels.items()))))

    def series(self, name: str) -> dict[tuple[tuple[str, str], ...], float]:
        """Every sample called ``name``: labels -> value."""
        return {labels: v for (n, labels), v in self.samples.items() if n == name}

    def sample_names(self) -> set[str]:
        return {n for n, _ in self.samples} | set(self.families)


def parse(text: str) -> Scrape:
    samples = {}
    families = set()
    for fam in text_string_to_metric_families(text):
        families.add(fam.name)
        for s in fam.samples:
            samples[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return Scrape(samples, frozenset(families))


def scrape(url: str, timeout: float = 10.0) -> Scrape:
    """GET ``url`` (``http://host:port/metrics``) and parse the text exposition format."""
    with urllib.request.urlopen(url, timeout=timeout) as r:
        assert r.status == 200, r.status
        return parse(r.read().decode())
