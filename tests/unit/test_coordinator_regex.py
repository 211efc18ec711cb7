"""KIP-848 regex subscriptions: RE2/J syntax parsed, validated, matched in linear time."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spool.coordinator import regex

TOPICS = {
    "orders-eu",
    "orders-us",
    "orders",
    "reorders",
    "payments",
    "__consumer_offsets",
    "__transaction_state",
    "__share_group_state",
    "__private",
}


def test_resolve_is_a_full_match():
    assert regex.resolve("^orders-.*", TOPICS) == {"orders-eu", "orders-us"}
    assert regex.resolve("orders", TOPICS) == {"orders"}
    assert regex.resolve("orders-(eu|us)$", TOPICS) == {"orders-eu", "orders-us"}
    assert regex.resolve("pay", TOPICS) == set()


def test_internal_topics_match_as_in_kafka():
    # Kafka's TopicRegexResolver scans every topic name (only DESCRIBE ACLs filter).
    assert regex.resolve("__.*", TOPICS) == {
        "__consumer_offsets",
        "__transaction_state",
        "__share_group_state",
        "__private",
    }


def test_an_invalid_pattern_resolves_to_nothing():
    assert regex.resolve("(?=orders).*", TOPICS) == set()


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        ("(?i)ORDERS-EU", ["orders-eu", "Orders-Eu"], ["orders-us"]),
        ("a(?i)b|c", ["aB", "C", "c"], ["AB"]),  # (?i) reaches the later alternative
        ("a(?i:b)c", ["aBc"], ["aBC"]),
        ("(?i)a(?-i)b", ["Ab"], ["AB"]),
        (r"[[:alpha:]]+-\d{2}", ["ab-12"], ["ab-1", "a1-12"]),
        (r"[[:^digit:]x]+", ["ab", "x"], ["a1"]),
        (r"\pL+\p{Nd}", ["abc1"], ["abc"]),
        (r"\PL", ["1", "-"], ["a"]),
        (r"\Qa.b\E", ["a.b"], ["axb"]),
        (r"\x41\x{42}\103", ["ABC"], []),
        (r"a{,2}", ["a{,2}"], ["aa"]),  # not a repetition in RE2: literals
        (r"a{2,}", ["aa", "aaa"], ["a"]),
        (r"(?U)(a+)(a*)", ["aaa"], []),
        (r"(?P<x>t)(?<y>1)", ["t1"], ["t"]),
        (r"x$", ["x"], ["x\n"]),  # $ is the end of the text, unlike Python's
        (r"(?s).", ["\n"], []),
        (r".", ["a"], ["\n"]),
        (r"^*t", ["t"], []),
        (r"\bt\b", ["t"], []),
        (r"[\d\-.]+", ["1-2.3"], ["a"]),
        (r"[]a]+", ["]a"], ["b"]),
        (r"[a-]+", ["a-"], ["b"]),
        (r"\_", ["_"], []),
        (r"(?i)[^a]", ["b"], ["a", "A"]),  # folded before negated
        (r"(?i)\x{212A}", ["\u212a"], []),
        (r"(a{2}){500}", ["a" * 1000], ["a" * 999]),
        (r"(?m)^a$\n^b$", ["a\nb"], []),
        (r"(|a)+", ["", "aa"], ["b"]),  # a loop that can match nothing ends
        (r"(a*)*b", ["aab", "b"], ["aa"]),
        (r"\B", [""], ["a"]),  # RE2: no boundary in an empty text (Python's \B never matches it)
        (r"a\Bb-\b", [], ["ab-"]),
        (r"a\Bb\b-", ["ab-"], []),
    ],
)
def test_re2_meaning(pattern, matches, misses):
    assert regex.validate(pattern) is None
    rx = regex.compile(pattern)
    for s in matches:
        assert rx.fullmatch(s), (pattern, s)
    for s in misses:
        assert not rx.fullmatch(s), (pattern, s)


@pytest.mark.parametrize(
    ("pattern", "description"),
    [
        (r"(a)\1", "invalid escape sequence"),
        (r"(?P<n>a)(?P=n)", "invalid named capture"),
        ("(?=a)b", "invalid or unsupported Perl syntax"),
        ("(?!a)b", "invalid or unsupported Perl syntax"),
        ("(?<=a)b", "invalid or unsupported Perl syntax"),
        ("(?<!a)b", "invalid or unsupported Perl syntax"),
        ("(?>a)", "invalid or unsupported Perl syntax"),
        ("(?(1)a|b)", "invalid or unsupported Perl syntax"),
        ("(?x)a b", "invalid or unsupported Perl syntax"),
        ("(?#c)a", "invalid or unsupported Perl syntax"),
        ("a*+", "invalid nested repetition operator"),
        ("a++", "invalid nested repetition operator"),
        ("a**", "invalid nested repetition operator"),
        ("a*??", "invalid nested repetition operator"),
        ("*a", "missing argument to repetition operator"),
        ("a|*", "missing argument to repetition operator"),
        ("a{1001}", "invalid repeat count"),
        ("a{3,2}", "invalid repeat count"),
        ("[z-a]", "invalid character class range"),
        ("[[:foo:]]", "invalid character class range"),
        (r"\p{NoSuchScript}", "invalid character class range"),
        ("(a", "missing closing )"),
        ("a)", "unexpected )"),
        ("[a", "missing closing ]"),
        ("a\\", "trailing backslash at end of expression"),
        (r"\Z", "invalid escape sequence"),
        (r"\G", "invalid escape sequence"),
        (r"\8", "invalid escape sequence"),
        ("(?P<a>x)(?P<a>y)", "duplicate capture group name"),
        ("(a{2}){501}", "invalid repeat count"),  # nested counts multiply
    ],
)
def test_refused_as_re2_refuses(pattern, description):
    assert regex.validate(pattern) == (
        f"SubscribedTopicRegex `{pattern}` is not a valid regular expression: {description}."
    )
    with pytest.raises(regex.InvalidRegex) as e:
        regex.compile(pattern)
    assert e.value.description == description


@pytest.mark.timeout(30)
def test_matching_is_linear_no_catastrophic_backtracking():
    # Python's backtracking re takes 2.4 s for 24 a's and doubles with each more: a member's
    # regex would stall the coordinator. RE2 (and this module) answer in linear time.
    names = ["a" * n for n in range(1, 250)]
    for pattern in ("(a*)*b", "(a|a)*b", "(x+x+)+y", "(a|aa)*c", "(.*a){20}b"):
        assert regex.resolve(pattern, names) == set()
    assert regex.resolve("(a|a)*", names) == set(names)


# Differential: on the syntax RE2 and Python share, this module's NFA matches what Python's
# backtracking engine matches on topic-like names.

ALPHABET = "ab-.1"


@st.composite
def common_patterns(draw, depth=0):
    n = draw(st.integers(1, 3))
    parts = []
    for _ in range(n):
        kind = draw(
            st.sampled_from(
                ["lit", "dot", "class", "group", "alt"] if depth < 2 else ["lit", "dot", "class"]
            )
        )
        if kind == "lit":
            atom = re.escape(draw(st.sampled_from(ALPHABET)))
        elif kind == "dot":
            atom = "."
        elif kind == "class":
            chars = draw(st.sets(st.sampled_from("ab1"), min_size=1))
            neg = draw(st.sampled_from(["", "^"]))
            atom = "[" + neg + "".join(sorted(chars)) + "]"
        elif kind == "group":
            atom = "(" + draw(common_patterns(depth + 1)) + ")"
        else:
            atom = (
                "(?:"
                + draw(common_patterns(depth + 1))
                + "|"
                + draw(common_patterns(depth + 1))
                + ")"
            )
        atom += draw(st.sampled_from(["", "", "*", "+", "?", "{1,2}", "*?", "{2}"]))
        parts.append(atom)
        if draw(st.integers(0, 5)) == 0:  # anchors, never repeated (Python refuses ^*)
            parts.append(draw(st.sampled_from(["^", "$", r"\b"])))
    return "".join(parts)


@settings(max_examples=400, deadline=None)
@given(pattern=common_patterns(), names=st.lists(st.text(ALPHABET, max_size=6), max_size=20))
def test_translation_agrees_with_python_on_common_syntax(pattern, names):
    ours = regex.resolve(pattern, names)
    python = {n for n in names if re.fullmatch(pattern, n)}
    assert ours == python, pattern
