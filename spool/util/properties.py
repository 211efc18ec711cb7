"""Java ``.properties`` text, read as ``java.util.Properties.load`` reads it.

``parse_properties(text)`` answers ``{key: value}``: ``key=value``, ``key: value`` or
``key value``; ``#``/``!`` comment lines; a line ending in an odd number of ``\\``
continues on the next (its leading white space dropped); ``\\t \\n \\r \\f
\\uXXXX`` and ``\\<any>`` escapes in keys and values; a key without a value is ``""``;
the later of two equal keys wins. Values keep their trailing white space, as Java's do
(Kafka's ConfigDef trims a config's value when it parses it: the broker's config does
too). The one reader of properties files: the broker's ``server.properties``,
``--command-config``, ``--add-config-file``, the perf tools' ``--producer.config``.

``format_properties(props)`` writes them back as ``Properties.store`` escapes them
(``\\``, ``\\n``, ``\\r``, ``\\t``, ``\\f``; a leading blank of a value; ``=``, ``:``,
``#``, ``!`` and blanks in a key), so that ``parse_properties`` reads every value as it
was given (``spool cluster up`` writes its nodes' files with it).
"""

from __future__ import annotations


def parse_properties(text: str) -> dict[str, str]:
    """Java ``Properties.load`` rules: the later of two equal keys wins."""
    out: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip(" \t\f")
        i += 1
        if not line or line[0] in "#!":
            continue
        while _continues(line) and i < len(lines):
            line = line[:-1] + lines[i].lstrip(" \t\f")
            i += 1
        if _continues(line):
            line = line[:-1]
        key, value = _split_entry(line)
        out[_unescape(key)] = _unescape(value)
    return out


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_entry(line: str) -> tuple[str, str]:
    j = 0
    while j < len(line):
        ch = line[j]
        if ch == "\\":
            j += 2
            continue
        if ch in "=: \t\f":
            break
        j += 1
    key, rest = line[:j], line[j:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    if "\\" not in text:
        return text
    out, j = [], 0
    while j < len(text):
        ch = text[j]
        if ch == "\\" and j + 1 < len(text):
            nxt = text[j + 1]
            if nxt == "u" and j + 6 <= len(text):
                try:
                    out.append(chr(int(text[j + 2:j + 6], 16)))
                    j += 6
                    continue
                except ValueError:
                    pass
            out.append(_ESCAPES.get(nxt, nxt))
            j += 2
        else:
            out.append(ch)
            j += 1
    return "".join(out)


_STORE_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\f": "\\f"}


def _escape(text: str, key: bool) -> str:
    out = []
    for i, ch in enumerate(text):
        if ch in _STORE_ESCAPES:
            out.append(_STORE_ESCAPES[ch])
        elif ch == " " and (key or i == 0):
            out.append("\\ ")
        elif key and ch in "=:#!":
            out.append("\\" + ch)
        else:
            out.append(ch)
    return "".join(out)


def format_properties(props: dict[str, str]) -> str:
    """``key=value`` lines that :func:`parse_properties` reads back to ``props``."""
    return "".join(f"{_escape(k, True)}={_escape(v, False)}\n" for k, v in props.items())
