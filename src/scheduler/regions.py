"""Regions: the directory every node and SDK reads, and the region an API key names.

A region is a whole Tickwheel stack (PostgreSQL, Redis, etcd, nodes, workers); nothing
on the hot path crosses regions. A tenant has one home region where all its rows live
and run (``tenants.home_region``). Any node can tell a call's home without a global
look-up because the API key names it in a visible prefix (:func:`key_region`), and the
:class:`RegionDirectory` says where each region answers.

The directory is configuration, read by nodes (``serve --regions``), SDKs
(``Client(regions=...)``) and the operator commands (``dr``, ``tenants move``). Two
spellings, documented in docs/regions.md:

- inline (a flag or ``TICKWHEEL_REGIONS``): ``us=10.0.0.1:50051|10.1.0.9:50061,eu=10.2.0.1:50051``
  -- each region's endpoints in the order to try them, ``|`` between endpoints;
- a JSON file (``--regions-file`` or ``TICKWHEEL_REGIONS_FILE``)::

      {"regions": {
         "us": {"endpoints": ["10.0.0.1:50051", "10.1.0.9:50061"],
                "postgres_dsn": "postgresql://..."},
         "eu": {"endpoints": ["10.2.0.1:50051"]}}}

  ``postgres_dsn`` is optional and read only by operator commands (never by a node).

A leaf module: imports only the error tree.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

from scheduler._errors import InvalidArgument

DEFAULT_REGION = "local"
"""The region of a node started without ``--region`` (and the schema's default home)."""

REGION_NAME = re.compile(r"^[a-z][a-z0-9-]{0,31}\Z")
"""A region name: lower-case letters, digits and ``-``, starting with a letter, at most
32 characters (no ``.`` or ``_``, so it can stand in an API key's prefix)."""

KEY_PREFIX = "tw_"
"""Every API key secret starts with this."""


def check_region_name(name: str, field_name: str = "region") -> str:
    """``name`` if it is a valid region name, else InvalidArgument naming ``field_name``."""
    if not REGION_NAME.match(name):
        raise InvalidArgument(
            field_name,
            f"{name!r} is not a region name (lower-case letters, digits and '-', "
            "starting with a letter, at most 32 characters)",
        )
    return name


def key_secret(region: str, token: str) -> str:
    """An API key secret that names its home region: ``tw_<region>.<token>``.

    ``token`` is URL-safe base64 (no ``.``), so the first ``.`` ends the region."""
    check_region_name(region)
    return f"{KEY_PREFIX}{region}.{token}"


def key_region(secret: str) -> str | None:
    """The home region an API key secret names, read without verifying it: the part
    between ``tw_`` and the first ``.``. None for a key that names none (keys made
    before regions, ``tw_<token>``; they belong to the region that issued them) or for
    text that is no key at all; verification happens at home."""
    if not secret.startswith(KEY_PREFIX):
        return None
    region, dot, _ = secret[len(KEY_PREFIX) :].partition(".")
    if not dot or not REGION_NAME.match(region):
        return None
    return region


@dataclass(frozen=True)
class Region:
    """One region of the directory."""

    name: str
    endpoints: tuple[str, ...]
    """``host:port`` of its public gRPC service, in the order to try them (a standby
    region's nodes for this region's data, when there is one, come after the primary's)."""
    postgres_dsn: str | None = None
    """The region's database, for operator commands only (``dr``, ``tenants move``)."""

    def __post_init__(self) -> None:
        check_region_name(self.name, "regions")
        if not self.endpoints:
            raise InvalidArgument("regions", f"region {self.name!r} lists no endpoint")
        for endpoint in self.endpoints:
            host, colon, port = endpoint.rpartition(":")
            if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
                raise InvalidArgument(
                    "regions", f"region {self.name!r}: {endpoint!r} is not HOST:PORT"
                )


@dataclass(frozen=True)
class RegionDirectory:
    """The set of regions and where each answers; empty means a single-region setup."""

    regions: Mapping[str, Region] = field(default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "regions", MappingProxyType(dict(self.regions)))

    def __contains__(self, name: object) -> bool:
        return name in self.regions

    def __iter__(self) -> Iterator[Region]:
        return iter(self.regions.values())

    def __len__(self) -> int:
        return len(self.regions)

    @property
    def names(self) -> tuple[str, ...]:
        """Region names, sorted."""
        return tuple(sorted(self.regions))

    def get(self, name: str) -> Region:
        """The region called ``name``; InvalidArgument naming the known ones otherwise."""
        region = self.regions.get(name)
        if region is None:
            known = ", ".join(self.names) or "none"
            raise InvalidArgument("region", f"unknown region {name!r} (known: {known})")
        return region

    def endpoints(self, name: str) -> tuple[str, ...]:
        """Where region ``name`` answers, in order."""
        return self.get(name).endpoints

    # -- reading it ---------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> RegionDirectory:
        """The inline form ``us=h:p|h:p,eu=h:p`` (or a JSON document, when ``text``
        starts with ``{``)."""
        text = text.strip()
        if not text:
            return cls()
        if text.startswith("{"):
            return cls.from_json(text)
        regions: dict[str, Region] = {}
        for part in text.split(","):
            name, eq, rest = part.strip().partition("=")
            if not eq:
                raise InvalidArgument("regions", f"{part.strip()!r} is not NAME=HOST:PORT")
            name = name.strip()
            if name in regions:
                raise InvalidArgument("regions", f"region {name!r} is listed twice")
            endpoints = tuple(e.strip() for e in rest.split("|") if e.strip())
            regions[name] = Region(name, endpoints)
        return cls(regions)

    @classmethod
    def from_json(cls, text: str) -> RegionDirectory:
        """The JSON form (see the module docstring)."""
        try:
            doc = json.loads(text)
        except ValueError as exc:
            raise InvalidArgument("regions", f"not valid JSON: {exc}") from None
        raw = doc.get("regions") if isinstance(doc, dict) else None
        if not isinstance(raw, dict):
            raise InvalidArgument("regions", 'the JSON must be {"regions": {NAME: {...}}}')
        regions: dict[str, Region] = {}
        for name, entry in raw.items():
            if not isinstance(entry, dict):
                raise InvalidArgument("regions", f"region {name!r} must be an object")
            endpoints = entry.get("endpoints")
            if not isinstance(endpoints, list) or not all(isinstance(e, str) for e in endpoints):
                raise InvalidArgument(
                    "regions", f"region {name!r}: endpoints must be a list of HOST:PORT"
                )
            dsn = entry.get("postgres_dsn")
            if dsn is not None and not isinstance(dsn, str):
                raise InvalidArgument("regions", f"region {name!r}: postgres_dsn must be text")
            regions[str(name)] = Region(str(name), tuple(endpoints), dsn)
        return cls(regions)

    @classmethod
    def load(cls, path: str | Path) -> RegionDirectory:
        """The directory in the JSON file at ``path``."""
        try:
            text = Path(path).read_text()
        except OSError as exc:
            raise InvalidArgument("regions_file", f"cannot read {path}: {exc.strerror}") from None
        return cls.from_json(text)

    def to_json(self) -> str:
        """The JSON form, loadable by :meth:`load`."""
        doc = {
            "regions": {
                r.name: {
                    "endpoints": list(r.endpoints),
                    **({"postgres_dsn": r.postgres_dsn} if r.postgres_dsn else {}),
                }
                for r in self
            }
        }
        return json.dumps(doc, indent=2)
