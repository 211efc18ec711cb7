"""The mTLS principal: a certificate's subject as Kafka prints it, mapped by Kafka's rules.

``subject_dn(der)`` is the subject distinguished name of a DER certificate in RFC 2253
form, as Java's ``X500Principal.getName()`` gives it to Kafka's
``DefaultKafkaPrincipalBuilder``: most specific RDN first (``CN=alice,OU=eng,O=Acme,C=US``),
the keywords CN, C, L, ST, O, OU, STREET, DC, UID, other attributes as their dotted OID
with ``#`` and the hex of the value's DER encoding (``1.2.840.113549.1.9.1=#1611...``),
multi-valued RDNs joined by ``+``; ``, + " \\ < > ;`` escaped with a backslash, as are a
leading ``#`` or space and a trailing space.

``SslPrincipalMapper(rules)`` is ``ssl.principal.mapping.rules``, Kafka's
``SslPrincipalMapper``: a comma-separated list of ``DEFAULT`` (the DN itself) and
``RULE:pattern/replacement/[L|U]`` (when the Java regex ``pattern`` matches the whole
DN, the DN with every match of it replaced by ``replacement``, ``$1`` its groups,
``\\x`` a literal x; then lower- or upper-cased). The first rule that applies gives the
name; none: ``NoMatchingRule``. A malformed list raises ``ValueError`` with Kafka's
message ("Invalid rule: ...").
"""

from __future__ import annotations

import re

from cryptography import x509
from cryptography.x509.oid import NameOID

DEFAULT_RULES = "DEFAULT"

_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_PARSER = re.compile(_RULE)
_BACKREF = re.compile(r"\$(\d+)")

_KEYWORDS = {
    NameOID.COMMON_NAME: "CN", NameOID.COUNTRY_NAME: "C", NameOID.LOCALITY_NAME: "L",
    NameOID.STATE_OR_PROVINCE_NAME: "ST", NameOID.ORGANIZATION_NAME: "O",
    NameOID.ORGANIZATIONAL_UNIT_NAME: "OU", NameOID.STREET_ADDRESS: "STREET",
    NameOID.DOMAIN_COMPONENT: "DC", NameOID.USER_ID: "UID",
}
_SPECIAL = frozenset(',+"\\<>;')


class NoMatchingRule(ValueError):
    """No rule of ``ssl.principal.mapping.rules`` applies to a DN."""


def _escape(value: str) -> str:
    """RFC 2253 escaping as Java's X500Principal prints it (checked against Java 17): every
    leading and every trailing space, and a ``#`` that starts the value after them."""
    out = "".join("\\" + c if c in _SPECIAL else c for c in value)
    body = out.strip(" ")
    if not body:
        return "\\ " * len(out)
    lead = len(out) - len(out.lstrip(" "))
    trail = len(out) - len(out.rstrip(" "))
    if body.startswith("#"):
        body = "\\" + body
    return "\\ " * lead + body + "\\ " * trail


def _der_value(attr: x509.NameAttribute) -> str:
    """``#`` and the hex of the attribute value's DER encoding (tag, length, bytes)."""
    raw = attr.value if isinstance(attr.value, bytes) else attr.value.encode("utf-8")
    tag = attr._type.value if hasattr(attr, "_type") else 12  # (UTF8String)
    n = len(raw)
    length = bytes([n]) if n < 128 else bytes([0x80 | ((n.bit_length() + 7) // 8)]) + (
        n.to_bytes((n.bit_length() + 7) // 8, "big"))
    return "#" + (bytes([tag]) + length + raw).hex()


def format_name(name: x509.Name) -> str:
    """``name`` in RFC 2253 form as Java prints it (module doc)."""
    rdns = []
    for rdn in reversed(list(name.rdns)):
        parts = []
        for attr in rdn:
            keyword = _KEYWORDS.get(attr.oid)
            if keyword is None:
                parts.append(f"{attr.oid.dotted_string}={_der_value(attr)}")
            else:
                parts.append(f"{keyword}={_escape(str(attr.value))}")
        rdns.append("+".join(parts))
    return ",".join(rdns)


def subject_dn(der: bytes) -> str:
    """The subject DN of a DER-encoded certificate, RFC 2253 as Kafka sees it."""
    return format_name(x509.load_der_x509_certificate(der).subject)


def _java_replacement(replacement: str, groups: int):
    """A function for ``re.sub`` doing Java's ``Matcher.replaceAll`` replacement (``$n``
    groups, ``\\x`` literal), after Kafka's rule that a reference to a group the pattern
    lacks is literal text."""

    def expand(m: re.Match) -> str:
        out: list[str] = []
        i = 0
        while i < len(replacement):
            c = replacement[i]
            if c == "\\" and i + 1 < len(replacement):
                out.append(replacement[i + 1])
                i += 2
                continue
            ref = _BACKREF.match(replacement, i) if c == "$" else None
            if ref is None:
                out.append(c)
                i += 1
                continue
            digits = ref.group(1)
            n = int(digits[0])
            used = 1
            while used < len(digits) and n * 10 + int(digits[used]) <= groups:
                n, used = n * 10 + int(digits[used]), used + 1
            if n > groups:
                out.append("$" + digits[:used])
            else:
                out.append(m.group(n) or "")
            i += 1 + used
        return "".join(out)

    return expand


class _Rule:
    def __init__(self, pattern: str | None = None, replacement: str = "",
                 case: str = "") -> None:
        self.pattern = None if pattern is None else re.compile(pattern)
        self.replacement = replacement
        self.case = case
        self.text = "DEFAULT" if pattern is None else (
            f"RULE:{pattern}/{replacement}" + (f"/{case}" if case else ""))

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        result = self.pattern.sub(_java_replacement(self.replacement, self.pattern.groups), dn)
        if self.case == "L":
            return result.lower()
        return result.upper() if self.case == "U" else result


class SslPrincipalMapper:
    """``ssl.principal.mapping.rules`` (module doc)."""

    def __init__(self, rules: str | None = DEFAULT_RULES) -> None:
        text = (rules if rules is not None else DEFAULT_RULES).strip()
        self.rules: list[_Rule] = []
        for m in _SPLITTER.finditer(text):
            rule = m.group(1)
            p = _PARSER.match(rule)
            if p is None or p.end() != len(rule):
                raise ValueError(f"Invalid rule: `{rule}`, unmatched substring: "
                                 f"`{rule[p.end() if p else 0:]}`")
            if p.group(1) is not None:
                self.rules.append(_Rule())
            elif p.group(2) is not None:
                try:
                    self.rules.append(_Rule(p.group(2), p.group(4), p.group(6)))
                except re.error as e:
                    raise ValueError(f"Invalid rule: `{rule}`: {e}") from None

    def name(self, dn: str) -> str:
        for rule in self.rules:
            name = rule.apply(dn)
            if name is not None:
                return name
        raise NoMatchingRule(f"No rules apply to {dn}, rules "
                             f"[{', '.join(r.text for r in self.rules)}]")

    def __str__(self) -> str:
        return f"SslPrincipalMapper(rules = [{', '.join(r.text for r in self.rules)}])"
