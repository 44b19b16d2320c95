"""Reading ``/metrics``: scrape over HTTP, parse the text format, read docs' table."""

from __future__ import annotations

import asyncio
import re
import urllib.request
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

DOC = Path(__file__).resolve().parents[2] / "docs" / "observability.md"
_ROW = re.compile(r"^\| `(tickwheel_[a-z0-9_]+)` \| (counter|gauge|histogram) \| ([^|]*) \|")


def documented() -> dict[str, tuple[str, tuple[str, ...]]]:
    """Every metric of the table in docs/observability.md: name -> (type, labels)."""
    out: dict[str, tuple[str, tuple[str, ...]]] = {}
    for line in DOC.read_text(encoding="utf-8").splitlines():
        m = _ROW.match(line)
        if m:
            labels = tuple(re.findall(r"`([a-z_]+)`", m.group(3)))
            out[m.group(1)] = (m.group(2), labels)
    return out


def parse(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """Sample name -> {sorted labels: value}."""
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, {})[tuple(sorted(s.labels.items()))] = s.value
    return out


async def scrape(url: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """GET ``url`` (off the loop) and parse it."""

    def get() -> str:
        with urllib.request.urlopen(url, timeout=10) as resp:
            assert resp.headers["Content-Type"].startswith("text/plain")
            return str(resp.read().decode())

    return parse(await asyncio.to_thread(get))


def total(
    samples: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str, kind: str
) -> float:
    """A metric's value summed over its label sets (a histogram: its ``_count``)."""
    key = f"{name}_count" if kind == "histogram" else name
    return sum(samples.get(key, {}).values())
