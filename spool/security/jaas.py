"""JAAS configuration text as Kafka's ``sasl.jaas.config`` holds it.

``<LoginModule class> <flag> [key=value ...];`` where the flag is ``required``,
``requisite``, ``sufficient`` or ``optional`` and a value is a word or a double-quoted
string (``\\`` escapes the next character inside quotes)::

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

``parse_jaas_config`` returns the one login module (Kafka's rule for the property:
"JAAS config property contains N login modules, should be 1 module"), or raises
``JaasConfigError`` saying what is wrong where. Options keep their order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

FLAGS = ("required", "requisite", "sufficient", "optional")
PLAIN_LOGIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
OAUTHBEARER_LOGIN_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


class JaasConfigError(ValueError):
    """The text is not a JAAS configuration of one login module."""


@dataclass(frozen=True)
class LoginModule:
    class_name: str
    flag: str
    options: dict[str, str] = field(default_factory=dict)

    @property
    def simple_name(self) -> str:
        """``PlainLoginModule`` for ``org.apache...plain.PlainLoginModule``."""
        return self.class_name.rsplit(".", 1)[-1]


def _tokens(text: str) -> list[tuple[str, bool]]:
    """Words, ``=``, ``;`` and quoted strings (marked True), in order."""
    out: list[tuple[str, bool]] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c.isspace():
            i += 1
        elif c in "=;":
            out.append((c, False))
            i += 1
        elif c == '"':
            i += 1
            buf = []
            while True:
                if i >= n:
                    raise JaasConfigError("unterminated quoted value in JAAS config")
                c = text[i]
                if c == "\\" and i + 1 < n:
                    buf.append(text[i + 1])
                    i += 2
                elif c == '"':
                    i += 1
                    break
                else:
                    buf.append(c)
                    i += 1
            out.append(("".join(buf), True))
        else:
            j = i
            while j < n and not text[j].isspace() and text[j] not in '=;"':
                j += 1
            out.append((text[i:j], False))
            i = j
    return out


def parse_jaas_modules(text: str) -> list[LoginModule]:
    """Every login module of ``text`` (a JAAS file's section body, or the property)."""
    toks = _tokens(text)
    modules: list[LoginModule] = []
    i = 0
    while i < len(toks):
        if i + 1 >= len(toks) or toks[i][1] or toks[i][0] in "=;":
            raise JaasConfigError(f"expected a login module class, got {toks[i][0]!r}")
        class_name, flag = toks[i][0], toks[i + 1][0]
        if flag.lower() not in FLAGS:
            raise JaasConfigError(f"login module {class_name}: control flag {flag!r} is not "
                                  f"one of {', '.join(FLAGS)}")
        i += 2
        options: dict[str, str] = {}
        while True:
            if i >= len(toks):
                raise JaasConfigError(f"login module {class_name}: missing ';' at the end")
            tok, quoted = toks[i]
            if tok == ";" and not quoted:
                i += 1
                break
            if (quoted or i + 2 >= len(toks) or toks[i + 1] != ("=", False)
                    or (toks[i + 2][0] in "=;" and not toks[i + 2][1])):
                raise JaasConfigError(f"login module {class_name}: expected key=value, "
                                      f"got {tok!r}")
            options[tok] = toks[i + 2][0]
            i += 3
        modules.append(LoginModule(class_name, flag.lower(), options))
    return modules


def parse_jaas_config(text: str) -> LoginModule:
    """The single login module of a ``sasl.jaas.config`` value."""
    modules = parse_jaas_modules(text)
    if len(modules) != 1:
        raise JaasConfigError(f"JAAS config property contains {len(modules)} login modules, "
                              f"should be 1 module")
    return modules[0]


def plain_users(module: LoginModule) -> dict[str, str]:
    """PlainLoginModule's server-side users: ``user_<name>="<password>"`` options."""
    return {k[len("user_"):]: v for k, v in module.options.items() if k.startswith("user_")}
