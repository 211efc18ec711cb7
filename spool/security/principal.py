"""Who a connection is: Kafka's ``KafkaPrincipal`` (``User:alice``).

Every connection has one. It starts as ``ANONYMOUS`` (``User:ANONYMOUS``, Kafka's
principal for a PLAINTEXT or unauthenticated SSL connection); mTLS sets it from the
client certificate's subject (after ``ssl.principal.mapping.rules``), SASL from the
authenticated name. ACLs name principals as ``str(principal)``: ``User:alice``.
"""

from __future__ import annotations

from typing import NamedTuple

USER_TYPE = "User"


class KafkaPrincipal(NamedTuple):
    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``Type:name`` (the name may contain ``:``); ValueError without a type."""
        ptype, sep, name = text.partition(":")
        if not sep or not ptype:
            raise ValueError(f"expected a principal as Type:name, got {text!r}")
        return cls(ptype, name)


def user(name: str) -> KafkaPrincipal:
    return KafkaPrincipal(USER_TYPE, name)


ANONYMOUS = user("ANONYMOUS")
