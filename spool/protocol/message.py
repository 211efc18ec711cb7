"""Base class and registry types shared by the generated message classes.

Every generated message (and every nested struct) subclasses
:class:`Message`. A subclass declares ``__slots__`` (its fields, snake_case,
in schema order) and the generator fills in two dicts mapping a version to a
straight-line function:

* ``_DECODERS[version](buf, pos) -> (obj, new_pos)``
* ``_ENCODERS[version](obj, out) -> None`` (appends chunks to ``out``)

Public API (identical for every generated class)::

    Cls(**fields)                                      # omitted fields = schema defaults
    Cls.decode(buf, pos, version) -> (obj, new_pos)   # raises ProtocolDecodeError
    obj.encode(version, out) -> None                   # out: list of chunks
    obj.to_bytes(version) -> bytes
    Cls.from_bytes(data, version) -> obj               # must consume all of data
    Cls.NAME, Cls.API_KEY, Cls.VALID_VERSIONS, Cls.FLEXIBLE_VERSIONS, Cls.is_flexible(v)
    Root.StructName              # nested classes, e.g. ProduceRequest.TopicProduceData

Value representation:

* int8..int64, uint16, uint32 -> ``int``; float64 -> ``float``; bool -> ``bool``.
* string -> ``str`` (``None`` where nullable); bytes -> ``bytes`` (decoded as a
  copy; any bytes-like value encodes).
* records -> decoded as a zero-copy ``memoryview`` slice of the input (or
  ``None``). To encode, give bytes/memoryview or any object with ``__len__``:
  the value is appended to ``out`` as its own chunk after a length prefix
  computed from ``len(value)``, so a sendfile region placeholder can travel
  in the chunk list (``to_bytes`` then fails; join the chunks yourself).
* uuid -> ``uuid.UUID``; the default is ``ZERO_UUID`` (all zero bits).
* arrays -> ``list`` (``None`` where nullable); structs -> the nested class
  (``None`` where nullable, with its int8 -1/1 presence prefix on the wire).
* Known tagged fields are plain attributes: they are written only when not
  equal to their default, in ascending tag order; unknown tags are skipped
  on decode and not kept.

Fields absent from the version being encoded are not written, whatever
their value (Kafka raises for a non-default non-ignorable field; Spool drops
silently). On decode they keep the schema default. Decoding never raises
anything but :class:`ProtocolDecodeError` for bad input;
:class:`UnsupportedVersionError` (a ``ValueError``) means the class has no
such version, a caller bug: check ``VALID_VERSIONS`` first.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

from spool.protocol.primitives import ProtocolDecodeError, UnsupportedVersionError

__all__ = ['Message', 'ApiEntry', 'UNSET']


class _Unset:
    """Sentinel for "use the schema default" in generated ``__init__``s."""

    __slots__ = ()

    def __repr__(self) -> str:
        return 'UNSET'


UNSET: Any = _Unset()

# What a straight-line decoder may raise on bad input besides ProtocolDecodeError.
_DECODE_FAILURES = (struct.error, IndexError, ValueError)


class Message:
    """A Kafka message or struct: slots, equality, repr, versioned codec."""

    __slots__ = ()
    __hash__ = None  # type: ignore[assignment]  # mutable value objects

    NAME: ClassVar[str] = ''
    API_KEY: ClassVar[int | None] = None
    VALID_VERSIONS: ClassVar[tuple[int, int]] = (0, -1)
    FLEXIBLE_VERSIONS: ClassVar[tuple[int, int] | None] = None
    _DECODERS: ClassVar[dict[int, Callable[[Any, int], tuple[Any, int]]]] = {}
    _ENCODERS: ClassVar[dict[int, Callable[[Any, list], None]]] = {}

    @classmethod
    def decode(cls, buf: memoryview | bytes, pos: int, version: int) -> tuple[Any, int]:
        """Decode one instance at ``buf[pos:]``; return it and the end offset."""
        dec = cls._DECODERS.get(version)
        if dec is None:
            raise UnsupportedVersionError(f'{cls.__name__} has no version {version}')
        if type(buf) is not memoryview:
            buf = memoryview(buf)
        try:
            return dec(buf, pos)
        except ProtocolDecodeError:
            raise
        except _DECODE_FAILURES as exc:
            raise ProtocolDecodeError(
                f'malformed {cls.__name__} v{version}: {type(exc).__name__}: {exc}'
            ) from exc

    def encode(self, version: int, out: list) -> None:
        """Append this message's encoding at ``version`` to ``out``."""
        enc = self._ENCODERS.get(version)
        if enc is None:
            raise UnsupportedVersionError(f'{type(self).__name__} has no version {version}')
        enc(self, out)

    def to_bytes(self, version: int) -> bytes:
        out: list = []
        self.encode(version, out)
        return b''.join(out)

    @classmethod
    def from_bytes(cls, data: bytes | bytearray | memoryview, version: int) -> Any:
        obj, pos = cls.decode(memoryview(data), 0, version)
        if pos != len(data):
            raise ProtocolDecodeError(
                f'{len(data) - pos} trailing bytes after {cls.__name__} v{version}'
            )
        return obj

    @classmethod
    def is_flexible(cls, version: int) -> bool:
        flex = cls.FLEXIBLE_VERSIONS
        return flex is not None and flex[0] <= version <= flex[1]

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        for name in self.__slots__:
            if getattr(self, name) != getattr(other, name):
                return False
        return True

    def __repr__(self) -> str:
        body = ', '.join(f'{name}={_short_repr(getattr(self, name))}' for name in self.__slots__)
        return f'{type(self).__name__}({body})'


def _short_repr(value: Any) -> str:
    """repr() that keeps record payloads out of logs."""
    if isinstance(value, memoryview | bytes | bytearray) and len(value) > 32:
        return f'<{type(value).__name__} of {len(value)} bytes>'
    return repr(value)


class ApiEntry(NamedTuple):
    """One API in the generated registry (``API_BY_KEY[api_key]``)."""

    request: type[Message]
    response: type[Message]
    valid_versions: tuple[int, int]
    flexible_versions: tuple[int, int] | None
    name: str
    listeners: tuple[str, ...] = ()  # Kafka's listener types for the API, sorted


class LazyMap(dict):  # type: ignore[type-arg]
    """A read-only registry dict (``API_BY_KEY``, ``DATA_SCHEMAS``, ...) whose values are
    built on first use: ``m[key]`` and ``m.get(key)`` build (import) only that key's value;
    iterating, ``keys()``, ``items()``, ``values()``, ``==`` build them all, and see them in
    ``specs``' order; ``key in m`` and ``len(m)`` build nothing. A value once built is a
    plain dict entry: reading it again is ``dict.__getitem__``."""

    __slots__ = ("_build", "_specs", "_ordered")

    def __init__(self, build: Callable[[Any], Any], specs: dict[Any, Any]) -> None:
        super().__init__()
        self._build, self._specs = build, specs
        self._ordered: dict[Any, Any] | None = None

    def __missing__(self, key: Any) -> Any:
        try:
            spec = self._specs[key]
        except (KeyError, TypeError):
            raise KeyError(key) from None
        value = self._build(spec)
        dict.__setitem__(self, key, value)
        return value

    def _all(self) -> dict[Any, Any]:
        if self._ordered is None:
            self._ordered = {k: self[k] for k in self._specs}
        return self._ordered

    def __contains__(self, key: object) -> bool:
        try:
            return key in self._specs
        except TypeError:
            return False

    def get(self, key: Any, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default

    def __len__(self) -> int:
        return len(self._specs)

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._all())

    def keys(self):  # type: ignore[no-untyped-def]
        return self._all().keys()

    def values(self):  # type: ignore[no-untyped-def]
        return self._all().values()

    def items(self):  # type: ignore[no-untyped-def]
        return self._all().items()

    def __eq__(self, other: object) -> bool:
        return self._all() == other

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return repr(self._all())

    def copy(self) -> dict:  # type: ignore[type-arg]
        return dict(self._all())

    def _readonly(self, *args: Any, **kwargs: Any) -> Any:
        raise TypeError("a generated registry is read-only")

    __setitem__ = __delitem__ = pop = popitem = setdefault = update = clear = _readonly  # type: ignore[assignment]
