"""KIP-848 regular-expression subscriptions: Kafka's RE2/J syntax, matched in linear time.

A consumer-protocol member may subscribe with ``SubscribedTopicRegex``; the
coordinator resolves it against the topic names, as Kafka's
``TopicRegexResolver``: RE2/J's ``Pattern.compile(regex).matcher(name).matches()``,
a *full* match. Kafka validates the regex when a member sends it and answers
``INVALID_REGULAR_EXPRESSION`` with the parser's description; RE2 refuses
what it cannot run in linear time (backreferences, lookarounds, atomic groups,
possessive quantifiers, conditionals).

- ``validate(pattern)`` -> ``None`` or Kafka's message:
  "SubscribedTopicRegex `<re>` is not a valid regular expression: <description>."
- ``compile(pattern)`` -> a ``Regex`` (cached) whose ``fullmatch(text)`` says
  whether RE2 would match all of ``text``; raises ``InvalidRegex``
  (``.description``: RE2/J's error text).
- ``resolve(pattern, topic_names)`` -> the names the pattern fully matches
  (an invalid pattern matches nothing, as Kafka ignores it). Like Kafka's
  resolver, it does not skip internal topics (``__consumer_offsets`` matches
  ``.*``); only DESCRIBE ACLs filter the result, which is the caller's business
  (``spool.broker.handlers.consumer_groups``).

Why not Python's ``re``: it backtracks, so a member's ``(a*)*b`` against a
topic named ``aaa...a`` (24 a's: 2.4 s, each more doubles it) would stall the
coordinator's event loop; RE2 is linear, and so is this module. The parser
reads the whole RE2 syntax into a tree: literals, ``.``, ``^``/``$`` (text
anchors unless ``m``), ``\\A`` ``\\z``, ``\\b`` ``\\B``, classes with ranges,
negation, ``[:alpha:]``-style POSIX classes, ``\\d \\s \\w`` (ASCII, as RE2) and
``\\pX``/``\\p{Name}``, escapes (``\\x41 \\x{263a} \\101 \\Q..\\E``), groups
``(..)``, ``(?:..)``, ``(?P<n>..)``, ``(?<n>..)``, flags ``i m s U`` (``(?i)`` to
the end of the group, ``(?i:..)``), repetitions ``* + ? {n} {n,} {n,m}`` (at
most 1000, nested ones multiplied too) with ``?`` for non-greedy (which a
yes/no match does not need). The tree becomes a Thompson NFA simulated as a
set of states (Pike's way, without captures): O(len(text) x states), with the
steps already taken memoized per pattern, so scanning many topic names costs
about one dictionary lookup per character.

Limits: case folding (``i``) and the ``\\p`` and POSIX classes are exact for
ASCII text (topic names are ``[a-zA-Z0-9._-]``); ``\\p{Script}`` knows Latin,
Common and the scripts without ASCII letters listed in ``_SCRIPTS``; another
name is refused.
"""

from __future__ import annotations

import bisect
import functools
import re
import unicodedata
from collections.abc import Iterable
from typing import Any

__all__ = ["InvalidRegex", "Regex", "compile", "resolve", "validate"]

MAX_REPEAT = 1000
MAX_RUNE = 0x10FFFF
MAX_STATES = 20000  # RE2's memory budget stands in as a bound on the program

Ranges = list[tuple[int, int]]


class InvalidRegex(ValueError):
    """A pattern RE2/J refuses; ``description`` is RE2/J's error text."""

    def __init__(self, description: str, arg: str = "") -> None:
        self.description = description
        super().__init__(f"error parsing regexp: {description}: `{arg}`")


def validate(pattern: str) -> str | None:
    """None if RE2/J accepts ``pattern``, else Kafka's INVALID_REGULAR_EXPRESSION message."""
    try:
        compile(pattern)
    except InvalidRegex as e:
        return (
            f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {e.description}."
        )
    return None


def resolve(pattern: str, topic_names: Iterable[str]) -> set[str]:
    """The topic names ``pattern`` fully matches (none when it is invalid)."""
    try:
        rx = compile(pattern)
    except InvalidRegex:
        return set()
    return {n for n in topic_names if rx.fullmatch(n)}


@functools.lru_cache(maxsize=128)
def compile(pattern: str) -> Regex:  # noqa: A001 - the module's verb
    """``pattern`` (RE2 syntax) ready to match; raises ``InvalidRegex``."""
    return Regex(_Parser(pattern).parse())


# ---- character sets as code point ranges --------------------------------------------------


def _norm(ranges: Ranges) -> Ranges:
    out: Ranges = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _negate(ranges: Ranges) -> Ranges:
    out: Ranges = []
    nxt = 0
    for lo, hi in _norm(ranges):
        if lo > nxt:
            out.append((nxt, lo - 1))
        nxt = hi + 1
    if nxt <= MAX_RUNE:
        out.append((nxt, MAX_RUNE))
    return out


def _ascii(pred) -> Ranges:
    return _norm([(c, c) for c in range(128) if pred(chr(c))])


_PERL = {
    "d": _ascii(lambda c: c.isdigit()),
    "s": _norm([(9, 10), (12, 13), (32, 32)]),
    "w": _ascii(lambda c: c.isalnum() or c == "_"),
}
_POSIX = {
    "alnum": _ascii(str.isalnum),
    "alpha": _ascii(str.isalpha),
    "ascii": [(0, 127)],
    "blank": _norm([(9, 9), (32, 32)]),
    "cntrl": _norm([(0, 31), (127, 127)]),
    "digit": _PERL["d"],
    "graph": [(33, 126)],
    "lower": _ascii(str.islower),
    "print": [(32, 126)],
    "punct": _ascii(lambda c: 33 <= ord(c) <= 126 and not c.isalnum()),
    "space": _norm([(9, 13), (32, 32)]),
    "upper": _ascii(str.isupper),
    "word": _PERL["w"],
    "xdigit": _ascii(lambda c: c in "0123456789abcdefABCDEF"),
}
_CATEGORIES = frozenset(
    "C Cc Cf Co Cs L Ll Lm Lo Lt Lu M Mc Me Mn N Nd Nl No P Pc Pd Pe Pf Pi Po Ps "
    "S Sc Sk Sm So Z Zl Zp Zs".split()
)
_SCRIPTS = frozenset(
    "Arabic Armenian Bengali Bopomofo Cherokee Cyrillic Devanagari Ethiopic Georgian Greek "
    "Gujarati Gurmukhi Han Hangul Hebrew Hiragana Inherited Kannada Katakana Khmer Lao "
    "Malayalam Mongolian Myanmar Oriya Sinhala Tamil Telugu Thaana Thai Tibetan".split()
)


def _unicode_class(name: str) -> Ranges | None:
    if name == "Any":
        return [(0, MAX_RUNE)]
    if name == "Latin":
        return _ascii(str.isalpha)
    if name == "Common":
        return _negate(_ascii(str.isalpha))  # every ASCII character but the letters
    if name in _SCRIPTS:
        return []
    if name in _CATEGORIES:
        return _ascii(lambda c: unicodedata.category(c).startswith(name))
    return None


def _fold(ranges: Ranges) -> Ranges:
    """``ranges`` with the other case of their letters (ASCII, and single characters)."""
    out = list(ranges)
    for lo, hi in ranges:
        for a, b, shift in ((65, 90, 32), (97, 122, -32)):
            if lo <= b and hi >= a:
                out.append((max(lo, a) + shift, min(hi, b) + shift))
        if lo == hi and lo >= 128:
            for other in (chr(lo).lower(), chr(lo).upper()):
                if len(other) == 1:
                    out.append((ord(other), ord(other)))
    return _norm(out)


ANY: Ranges = [(0, MAX_RUNE)]
NOT_NEWLINE: Ranges = [(0, 9), (11, MAX_RUNE)]
BAR = "|"

# ---- the parser ----------------------------------------------------------------------------

_ESCAPES = {"a": 7, "f": 12, "t": 9, "n": 10, "r": 13, "v": 11}
_FLAGS = "imsU"


class _Frame:
    """One group being parsed: its pieces, the kind of the last one, its flags."""

    def __init__(self, opener: str, flags: frozenset[str]) -> None:
        self.opener = opener
        self.flags = flags
        self.items: list[Any] = []  # nodes and BAR
        self.last = "start"  # start | bar | atom | assert | repeat


class _Parser:
    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.names: set[str] = set()

    def error(self, description: str, arg: str) -> InvalidRegex:
        return InvalidRegex(description, arg)

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def parse(self) -> tuple:
        stack = [_Frame("", frozenset())]
        while self.i < len(self.p):
            c = self.p[self.i]
            top = stack[-1]
            if c == "(":
                self.open_group(stack)
            elif c == ")":
                if len(stack) == 1:
                    raise self.error("unexpected )", self.p)
                self.i += 1
                done = stack.pop()
                self.add(stack[-1], self.build(done.items), "atom")
            elif c == "|":
                self.i += 1
                top.items.append(BAR)
                top.last = "bar"
            elif c in "*+?{":
                if not self.repeat(top):
                    self.i += 1
                    self.add(top, self.literal(ord(c), top.flags), "atom")
            elif c == "[":
                self.add(top, ("set", self.char_class(top.flags)), "atom")
            elif c == "\\":
                self.escape(top)
            elif c == ".":
                self.i += 1
                self.add(top, ("set", ANY if "s" in top.flags else NOT_NEWLINE), "atom")
            elif c == "^":
                self.i += 1
                self.add(top, ("assert", "^m" if "m" in top.flags else "A"), "assert")
            elif c == "$":
                self.i += 1
                self.add(top, ("assert", "$m" if "m" in top.flags else "z"), "assert")
            else:
                self.i += 1
                self.add(top, self.literal(ord(c), top.flags), "atom")
        if len(stack) > 1:
            raise self.error("missing closing )", self.p)
        return self.build(stack[0].items)

    @staticmethod
    def build(items: list) -> tuple:
        alts: list[list] = [[]]
        for item in items:
            if item is BAR:
                alts.append([])
            else:
                alts[-1].append(item)
        cats = [("cat", a) for a in alts]
        return cats[0] if len(cats) == 1 else ("alt", cats)

    def add(self, frame: _Frame, item: tuple, kind: str) -> None:
        frame.items.append(item)
        frame.last = kind

    @staticmethod
    def literal(code: int, flags: frozenset[str]) -> tuple:
        ranges = [(code, code)]
        return ("set", _fold(ranges) if "i" in flags else ranges)

    # -- groups and flags

    def open_group(self, stack: list[_Frame]) -> None:
        top = stack[-1]
        start = self.i
        if self.peek(1) != "?":
            self.i += 1
            stack.append(_Frame("(", top.flags))
            return
        rest = self.p[self.i + 2 :]
        if rest.startswith("P") and not rest.startswith("P<"):  # (?P=name): a backreference
            raise self.error("invalid named capture", self.p[start : start + 4])
        for prefix in ("P<", "<"):
            if rest.startswith(prefix) and not rest.startswith(("<=", "<!")):
                end = rest.find(">")
                name = rest[len(prefix) : end] if end >= 0 else ""
                if end < 0 or not name or not re.fullmatch(r"\w+", name, re.ASCII):
                    raise self.error("invalid named capture", self.p[start:])
                if name in self.names:
                    raise self.error("duplicate capture group name", name)
                self.names.add(name)
                self.i += 2 + end + 1
                stack.append(_Frame("(", top.flags))  # names are not needed to match
                return
        # Flags: (?flags) or (?flags:re), flags from imsU, at most one '-'.
        j = self.i + 2
        on, off, negated = set(), set(), False
        while j < len(self.p) and self.p[j] not in ":)":
            f = self.p[j]
            if f == "-" and not negated:
                negated = True
            elif f in _FLAGS:
                (off if negated else on).add(f)
            else:
                raise self.error("invalid or unsupported Perl syntax", self.p[start : j + 1])
            j += 1
        if j >= len(self.p):
            raise self.error("missing closing )", self.p)
        spec = self.p[self.i + 2 : j]
        if (not spec and self.p[j] == ")") or spec.endswith("-") or (negated and not off):
            raise self.error("invalid or unsupported Perl syntax", self.p[start : j + 1])
        flags = (top.flags | on) - off
        self.i = j + 1
        if self.p[j] == ":":
            stack.append(_Frame("(?:", frozenset(flags)))
        else:
            top.flags = frozenset(flags)  # to the end of the current group

    # -- repetition

    def repeat(self, top: _Frame) -> bool:
        """Apply the repetition operator at ``self.i``; False when ``{`` is a literal."""
        start = self.i
        c = self.p[self.i]
        if c == "{":
            m = re.compile(r"\{(\d+)(,(\d*))?\}").match(self.p, self.i)
            if m is None:
                return False
            lo = int(m.group(1))
            hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
            if lo > MAX_REPEAT or (hi is not None and (hi > MAX_REPEAT or hi < lo)):
                raise self.error("invalid repeat count", m.group(0))
            self.i = m.end()
        else:
            lo, hi = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
            self.i += 1
        if self.peek() == "?":
            self.i += 1
        if top.last in ("start", "bar"):
            raise self.error("missing argument to repetition operator", self.p[start : self.i])
        if top.last == "repeat":
            raise self.error("invalid nested repetition operator", self.p[start - 1 : self.i])
        operand = top.items.pop()
        node = ("rep", operand, lo, hi)  # greedy or lazy: the same yes/no answer
        if _repeat_size(node) > MAX_REPEAT:
            raise self.error("invalid repeat count", self.p[start : self.i])
        top.items.append(node)
        top.last = "repeat"
        return True

    # -- escapes

    def escape(self, top: _Frame) -> None:
        start = self.i
        self.i += 1
        if self.i >= len(self.p):
            raise self.error("trailing backslash at end of expression", "")
        c = self.p[self.i]
        if c in "AzbB":
            self.i += 1
            self.add(top, ("assert", c), "assert")
            return
        if c == "C":  # any byte: any character here
            self.i += 1
            self.add(top, ("set", ANY), "atom")
            return
        if c == "Q":
            end = self.p.find("\\E", self.i + 1)
            text = self.p[self.i + 1 :] if end < 0 else self.p[self.i + 1 : end]
            self.i = len(self.p) if end < 0 else end + 2
            for ch in text:
                self.add(top, self.literal(ord(ch), top.flags), "atom")
            return
        self.i = start
        ranges = self.class_escape()
        if ranges is not None:
            self.add(top, ("set", _fold(ranges) if "i" in top.flags else ranges), "atom")
            return
        self.add(top, self.literal(self.char_escape(), top.flags), "atom")

    def class_escape(self) -> Ranges | None:
        """``\\d \\D \\s \\S \\w \\W \\pX \\p{..} \\PX \\P{..}`` at ``self.i``, else None."""
        c = self.peek(1)
        if c.lower() in _PERL:
            self.i += 2
            ranges = _PERL[c.lower()]
            return _negate(ranges) if c.isupper() else ranges
        if c not in "pP" or not c:
            return None
        start = self.i
        if self.peek(2) == "{":
            end = self.p.find("}", self.i + 3)
            if end < 0:
                raise self.error("invalid character class range", self.p[start:])
            name = self.p[self.i + 3 : end]
            self.i = end + 1
        else:
            name = self.peek(2)
            if not name:
                raise self.error("invalid character class range", self.p[start:])
            self.i += 3
        negate = c == "P"
        if name.startswith("^"):
            negate, name = not negate, name[1:]
        ranges = _unicode_class(name)
        if ranges is None:
            raise self.error("invalid character class range", self.p[start : self.i])
        return _negate(ranges) if negate else ranges

    def char_escape(self) -> int:
        """One escaped character at ``self.i`` (a backslash), as a code point."""
        start = self.i
        self.i += 1
        c = self.p[self.i]
        if c in _ESCAPES:
            self.i += 1
            return _ESCAPES[c]
        if c in "01234567":
            digits = re.compile(r"[0-7]{1,3}").match(self.p, self.i).group(0)
            if c != "0" and len(digits) == 1:  # \1..\7: a backreference
                raise self.error("invalid escape sequence", self.p[start : self.i + 1])
            self.i += len(digits)
            return int(digits, 8)
        if c == "x":
            m = re.compile(r"x(?:\{([0-9A-Fa-f]+)\}|([0-9A-Fa-f]{2}))").match(self.p, self.i)
            value = int(m.group(1) or m.group(2), 16) if m else MAX_RUNE + 1
            if value > MAX_RUNE:
                raise self.error("invalid escape sequence", self.p[start : self.i + 4])
            self.i = m.end()
            return value
        if ord(c) < 128 and not c.isalnum():  # escaped punctuation
            self.i += 1
            return ord(c)
        raise self.error("invalid escape sequence", self.p[start : self.i + 1])

    # -- bracket classes

    def char_class(self, flags: frozenset[str]) -> Ranges:
        start = self.i
        self.i += 1
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        ranges: Ranges = []
        first = True
        while True:
            if self.i >= len(self.p):
                raise self.error("missing closing ]", self.p[start:])
            c = self.p[self.i]
            if c == "]" and not first:
                self.i += 1
                break
            first = False
            if c == "[" and self.peek(1) == ":":
                end = self.p.find(":]", self.i + 2)
                if end >= 0:
                    name = self.p[self.i + 2 : end]
                    neg = name.startswith("^")
                    found = _POSIX.get(name.lstrip("^"))
                    if found is None:
                        raise self.error("invalid character class range", self.p[self.i : end + 2])
                    ranges += _negate(found) if neg else found
                    self.i = end + 2
                    continue
            if c == "\\":
                got = self.class_escape()
                if got is not None:
                    ranges += got
                    continue
            lo_at = self.i
            lo = self.class_char()
            if self.peek() == "-" and self.peek(1) not in ("]", ""):
                self.i += 1
                hi = self.class_char()
                if hi < lo:
                    raise self.error("invalid character class range", self.p[lo_at : self.i])
                ranges.append((lo, hi))
            else:
                ranges.append((lo, lo))
        if "i" in flags:
            ranges = _fold(ranges)  # before negating, as RE2: (?i)[^a] refuses A too
        return _negate(ranges) if negate else _norm(ranges)

    def class_char(self) -> int:
        c = self.p[self.i]
        if c != "\\":
            self.i += 1
            return ord(c)
        if self.i + 1 >= len(self.p):
            raise self.error("trailing backslash at end of expression", "")
        if self.class_escape_peek():
            raise self.error("invalid character class range", self.p[self.i : self.i + 2])
        return self.char_escape()

    def class_escape_peek(self) -> bool:
        return self.peek(1).lower() in _PERL or self.peek(1) in ("p", "P")


def _repeat_size(node: tuple) -> int:
    """The product of nested repetition counts (RE2 refuses more than 1000)."""
    kind = node[0]
    if kind == "rep":
        _, child, lo, hi = node
        return max(1, lo, hi or 0) * _repeat_size(child)
    if kind in ("cat", "alt"):
        return max((_repeat_size(c) for c in node[1]), default=1)
    return 1


# ---- the matcher: a Thompson NFA simulated as a set of states ------------------------------

_CHAR, _SPLIT, _ASSERT, _MATCH = range(4)


def _is_word(c: str | None) -> bool:
    return c is not None and c < "\x80" and (c.isalnum() or c == "_")


def _holds(kind: str, prev: str | None, cur: str | None) -> bool:
    if kind == "A":
        return prev is None
    if kind == "z":
        return cur is None
    if kind == "^m":
        return prev is None or prev == "\n"
    if kind == "$m":
        return cur is None or cur == "\n"
    boundary = _is_word(prev) != _is_word(cur)
    return boundary if kind == "b" else not boundary


class Regex:
    """A parsed pattern as a program of states; ``fullmatch`` runs it over a text."""

    def __init__(self, tree: tuple) -> None:
        self.ops: list[int] = []
        self.args: list[Any] = []  # CHAR: (starts, ranges); ASSERT: kind
        self.outs: list[list[int]] = []
        match = self._state(_MATCH, None)
        self.start = self._compile(tree, match)
        self._steps: dict[tuple, frozenset[int]] = {}
        self._ends: dict[tuple, bool] = {}

    def _state(self, op: int, arg: Any, *outs: int) -> int:
        if len(self.ops) >= MAX_STATES:
            raise InvalidRegex("expression too large", "")
        self.ops.append(op)
        self.args.append(arg)
        self.outs.append(list(outs))
        return len(self.ops) - 1

    def _compile(self, node: tuple, nxt: int) -> int:
        """The state that matches ``node`` then continues at ``nxt`` (built backwards)."""
        kind = node[0]
        if kind == "set":
            ranges = node[1]
            return self._state(_CHAR, ([lo for lo, _ in ranges], ranges), nxt)
        if kind == "assert":
            return self._state(_ASSERT, node[1], nxt)
        if kind == "cat":
            for child in reversed(node[1]):
                nxt = self._compile(child, nxt)
            return nxt
        if kind == "alt":
            return self._state(_SPLIT, None, *(self._compile(c, nxt) for c in node[1]))
        _, child, lo, hi = node
        if hi is None:
            loop = self._state(_SPLIT, None)
            self.outs[loop] = [self._compile(child, loop), nxt]
            nxt = loop
        else:
            for _ in range(hi - lo):
                nxt = self._state(_SPLIT, None, self._compile(child, nxt), nxt)
        for _ in range(lo):
            nxt = self._compile(child, nxt)
        return nxt

    def _closure(self, states: frozenset[int], prev: str | None, cur: str | None) -> set[int]:
        seen: set[int] = set()
        stack = list(states)
        while stack:
            s = stack.pop()
            if s in seen:
                continue
            seen.add(s)
            op = self.ops[s]
            if op == _SPLIT:
                stack.extend(self.outs[s])
            elif op == _ASSERT and _holds(self.args[s], prev, cur):
                stack.append(self.outs[s][0])
        return seen

    def fullmatch(self, text: str) -> bool:
        """Whether the pattern matches all of ``text`` (RE2's ``matches()``)."""
        states = frozenset({self.start})
        prev: str | None = None
        for cur in text:
            key = (states, prev, cur)
            nxt = self._steps.get(key)
            if nxt is None:
                code = ord(cur)
                nxt = frozenset(
                    self.outs[s][0]
                    for s in self._closure(states, prev, cur)
                    if self.ops[s] == _CHAR and _contains(self.args[s], code)
                )
                if len(self._steps) > 10_000:
                    self._steps.clear()
                self._steps[key] = nxt
            if not nxt:
                return False
            states, prev = nxt, cur
        key = (states, prev)
        done = self._ends.get(key)
        if done is None:
            done = any(self.ops[s] == _MATCH for s in self._closure(states, prev, None))
            if len(self._ends) > 10_000:
                self._ends.clear()
            self._ends[key] = done
        return done


def _contains(arg: tuple[list[int], Ranges], code: int) -> bool:
    starts, ranges = arg
    i = bisect.bisect_right(starts, code) - 1
    return i >= 0 and code <= ranges[i][1]
