"""Plugin discovery: the classes behind ``connector.class``, converters and transforms.

Plugins are registered as entry points of the group ``spool.connect.plugins`` (their
name is Kafka's or Debezium's fully qualified class name where Spool ships an
equivalent). ``Plugins.discover()`` reads the entry points without importing anything;
a plugin's module is imported the first time it is loaded or listed (a module that
fails to import is left out of the listings and its error reported when it is loaded).

``load(name, kind)`` accepts, as Kafka does:

- the entry-point name (``org.apache.kafka.connect.json.JsonConverter``);
- the simple name: the part after the last ``.`` (``JsonConverter``,
  ``InsertField$Value``), or the Python class's name (``InsertFieldValue``);
- the alias without the kind's suffix (``FileStreamSource`` for a connector,
  ``Json`` for a converter), when no other plugin claims the same alias;
- a Python path ``pkg.mod:Class`` or ``pkg.mod.Class`` (plugins defined outside the
  entry points, e.g. in tests).

``kind`` is one of ``KINDS``; the class must subclass the kind's base in ``api``
(a class may be of several kinds: StringConverter is a converter and a header
converter). Anything else raises ``api.ConfigError`` with Kafka's message: for a
connector ``Failed to find any class that implements Connector and which name matches
X, available connectors are: ...``; for the other kinds (CLASS-typed keys in Kafka)
``Class X could not be found.``

``connectors()`` and ``all()`` answer ``GET /connector-plugins`` (``connectorsOnly=true``
and ``false``): ``{"class", "type", "version"}`` sorted by class (then type).
Thread-safe: loading is idempotent and guarded by a lock.
"""

from __future__ import annotations

import importlib
import logging
import threading
from importlib.metadata import entry_points
from typing import Any

from spool.connect import api

log = logging.getLogger(__name__)

KINDS: dict[str, type] = {
    "connector": api.Connector,
    "converter": api.Converter,
    "header_converter": api.HeaderConverter,
    "transformation": api.Transformation,
    "predicate": api.Predicate,
}
# Kafka's interface names (the error message) and the suffix an alias drops.
_INTERFACE = {"connector": "Connector", "converter": "Converter",
              "header_converter": "HeaderConverter", "transformation": "Transformation",
              "predicate": "Predicate"}
_PLURAL = {"connector": "connectors", "converter": "converters",
           "header_converter": "header converters", "transformation": "transformations",
           "predicate": "predicates"}
GROUP = "spool.connect.plugins"


def spool_version() -> str:
    from importlib.metadata import PackageNotFoundError, version
    try:
        return version("spool")
    except PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "unknown"


class Plugins:
    """The plugins known to this process (module doc)."""

    def __init__(self, entries: dict[str, str] | None = None) -> None:
        # entry-point name -> "module:attr"; loaded classes cached by name
        self._entries: dict[str, str] = dict(entries or {})
        self._classes: dict[str, type] = {}
        self._failed: dict[str, str] = {}
        self._lock = threading.RLock()

    @classmethod
    def discover(cls) -> Plugins:
        return cls({ep.name: ep.value for ep in entry_points(group=GROUP)})

    def register(self, name: str, target: type | str) -> None:
        """Add a plugin under ``name`` (a class, or ``"module:attr"``)."""
        with self._lock:
            if isinstance(target, str):
                self._entries[name] = target
            else:
                self._entries[name] = f"{target.__module__}:{target.__qualname__}"
                self._classes[name] = target
            self._failed.pop(name, None)

    # ---- loading

    def _load_entry(self, name: str) -> type | None:
        with self._lock:
            if name in self._classes:
                return self._classes[name]
            if name in self._failed:
                return None
            try:
                klass = _import(self._entries[name])
            except Exception as e:  # noqa: BLE001 - a broken plugin must not hide the others
                log.warning("plugin %s (%s) failed to load: %s", name, self._entries[name], e)
                self._failed[name] = f"{type(e).__name__}: {e}"
                return None
            self._classes[name] = klass
            return klass

    def _loaded(self) -> dict[str, type]:
        for name in list(self._entries):
            self._load_entry(name)
        with self._lock:
            return dict(self._classes)

    def _names(self, name: str, klass: type | None, kind: str) -> set[str]:
        """Every name ``name`` answers to as a plugin of ``kind`` (aliases included)."""
        simple = name.rsplit(".", 1)[-1]
        out = {name, simple}
        if klass is not None:
            out.add(klass.__name__)
        suffix = _INTERFACE[kind]
        for s in list(out):
            if s.endswith(suffix) and len(s) > len(suffix):
                out.add(s[: -len(suffix)])
        return out

    def load(self, name: str, kind: str) -> type:
        """The class named ``name`` implementing ``kind`` (module doc); ConfigError."""
        if kind not in KINDS:
            raise ValueError(f"unknown plugin kind {kind!r}")
        base = KINDS[kind]
        name = (name or "").strip()
        if name in self._entries:
            klass = self._load_entry(name)
            if klass is not None and _is(klass, base):
                return klass
            if klass is None:
                raise api.ConfigError(f"Failed to load class {name}: {self._failed[name]}")
        else:
            for loading in (False, True):  # aliases from the names first, then class names
                matches: dict[str, type] = {}
                for ep_name in list(self._entries):
                    if not loading and name not in self._names(ep_name, None, kind):
                        continue
                    klass = self._load_entry(ep_name)
                    if klass is not None and _is(klass, base) \
                            and name in self._names(ep_name, klass, kind):
                        matches[ep_name] = klass
                distinct = set(matches.values())
                if len(distinct) == 1:
                    return distinct.pop()
                if len(distinct) > 1:
                    raise api.ConfigError(
                        f"More than one {_INTERFACE[kind]} matches {name}: "
                        f"{', '.join(sorted(matches))}; use the full class name")
                if "." in name or ":" in name:
                    klass = _try_import(name)
                    if klass is not None and _is(klass, base):
                        return klass
                    break
        if kind != "connector":  # a CLASS-typed key in Kafka: ConfigDef's message
            raise api.ConfigError(f"Class {name} could not be found.")
        available = ", ".join(sorted(n for n, k in self._loaded().items() if _is(k, base)))
        raise api.ConfigError(
            f"Failed to find any class that implements {_INTERFACE[kind]} and which name "
            f"matches {name}, available {_PLURAL[kind]} are: {available}")

    def kind_of(self, klass: type) -> list[str]:
        """The kinds ``klass`` implements, connectors as ``source``/``sink``."""
        out = []
        for kind, base in KINDS.items():
            if _is(klass, base):
                out.append((getattr(klass, "kind", "") or "connector")
                           if kind == "connector" else kind)
        return out

    # ---- listings

    def connectors(self) -> list[dict[str, Any]]:
        return [p for p in self.all() if p["type"] in ("source", "sink")]

    def all(self) -> list[dict[str, Any]]:
        out = []
        for name, klass in self._loaded().items():
            for t in self.kind_of(klass):
                out.append({"class": name, "type": t, "version": _version(klass)})
        return sorted(out, key=lambda p: (p["class"], p["type"]))


def _is(klass: Any, base: type) -> bool:
    return isinstance(klass, type) and issubclass(klass, base) and klass is not base \
        and klass not in (api.SourceConnector, api.SinkConnector)


def _import(target: str) -> type:
    module, _, attr = target.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def _try_import(name: str) -> type | None:
    if ":" in name:
        candidates = [name]
    else:
        module, _, attr = name.rpartition(".")
        candidates = [f"{module}:{attr}"] if module else []
    for c in candidates:
        try:
            return _import(c)
        except (ImportError, AttributeError, ValueError):
            return None
    return None


def _version(klass: type) -> str:
    try:
        v = klass().version() if hasattr(klass, "version") else None
    except Exception:  # noqa: BLE001 - a plugin that cannot be built has no version
        v = None
    return str(v) if v else spool_version()
