"""A broker process with SASL listeners and users, and client configs to reach it.

    broker = SecureBroker(tmp_path / "data", plain_users={"alice": "alice-secret"})
    broker.start()                       # (or: with SecureBroker(...) as broker:)
    broker.bootstrap()                   # "127.0.0.1:PORT" of the SASL_PLAINTEXT listener
    Producer(broker.confluent("alice"))  # librdkafka config: SASL_PLAINTEXT + PLAIN
    broker.kafka_python("alice")         # kwargs for kafka-python's clients
    broker.aiokafka("alice", "SCRAM-SHA-256")  # ... and aiokafka's
    broker.stop()

- ``listeners``: listener names; ``SASL_PLAINTEXT`` (the default), ``PLAINTEXT``,
  ``SASL_SSL``, ``SSL`` map to themselves; each binds 127.0.0.1 on a free port. With a
  TLS one, ``broker.pki`` (``tests.helpers.certs.Pki``) made the server certificate
  (127.0.0.1, localhost) and the client configs trust its CA.
- ``plain_users``: name -> password, PLAIN's users on every SASL listener
  (``listener.name.<l>.plain.sasl.jaas.config``). ``admin``/``admin-secret`` is always
  one of them: ``super.users`` candidates and setup calls use it.
- ``scram_users``: name -> password, given SCRAM-SHA-256 and SCRAM-SHA-512 credentials
  at format time (``spool storage format --add-scram``, before the first start).
- ``mechanisms``: ``sasl.enabled.mechanisms`` (default: PLAIN and both SCRAMs; add
  OAUTHBEARER for unsecured JWS tokens: the client configs then send a token whose
  ``sub`` is the user).
- ``overrides``: any other broker keys (``authorizer.class.name``, ``super.users``...).

The process is ``tests.helpers.broker_proc.BrokerProcess`` (its log at
``<data_dir>-broker.log``; ``stop()``, ``kill()``, ``restart()``).
"""

from __future__ import annotations

import ssl
import subprocess
import sys
from pathlib import Path

from spool.security.sasl.oauthbearer import unsecured_token
from spool.util.ids import random_uuid
from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.certs import Pki

ADMIN = ("admin", "admin-secret")
TLS_LISTENERS = ("SSL", "SASL_SSL")
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def plain_jaas(users: dict[str, str], username: str = ADMIN[0],
               password: str = ADMIN[1]) -> str:
    """PlainLoginModule's server config: its own login and ``user_<name>`` entries."""
    opts = [f"username={_quote(username)}", f"password={_quote(password)}"]
    opts += [f"user_{name}={_quote(pw)}" for name, pw in users.items()]
    return f"{PLAIN_LOGIN} required {' '.join(opts)};"


class SecureBroker(BrokerProcess):
    """A ``spool broker`` with SASL listeners (module doc)."""

    def __init__(
        self,
        data_dir: Path,
        *,
        listeners: tuple[str, ...] = ("SASL_PLAINTEXT",),
        plain_users: dict[str, str] | None = None,
        scram_users: dict[str, str] | None = None,
        mechanisms: tuple[str, ...] = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"),
        overrides: dict[str, str] | None = None,
        log_level: str = "WARNING",
    ) -> None:
        self.listener_names = tuple(name.upper() for name in listeners)
        self.plain_users = {ADMIN[0]: ADMIN[1], **(plain_users or {})}
        self.scram_users = dict(scram_users or {})
        self.mechanisms = tuple(mechanisms)
        ov = {"listeners": ",".join(f"{n}://127.0.0.1:0" for n in self.listener_names),
              "sasl.enabled.mechanisms": ",".join(self.mechanisms)}
        jaas = plain_jaas(self.plain_users)
        for name in self.listener_names:
            if name.startswith("SASL_"):
                ov[f"listener.name.{name.lower()}.plain.sasl.jaas.config"] = jaas
        self.pki: Pki | None = None
        if any(n in TLS_LISTENERS for n in self.listener_names):
            self.pki = Pki(Path(data_dir).parent / f"{Path(data_dir).name}-pki")
            server = self.pki.issue("CN=localhost", hosts=("127.0.0.1", "localhost"))
            ov.update({"ssl.keystore.type": "PEM",
                       "ssl.keystore.location": str(server.keystore_pem)})
        ov.update(overrides or {})
        super().__init__(Path(data_dir), ov, log_level=log_level)

    def start(self, timeout: float = 30.0) -> SecureBroker:
        if self.listener_ports:  # a restart: the same ports
            self.overrides["listeners"] = ",".join(
                f"{n}://127.0.0.1:{self.listener_ports[n]}" for n in self.listener_names)
        elif self.scram_users and not self.data_dir.exists():
            self.format()
        super().start(timeout)
        return self

    def format(self) -> None:
        """``spool storage format --add-scram`` for every SCRAM user, both mechanisms."""
        cmd = [sys.executable, "-m", "spool.cli.main", "storage", "format",
               "--cluster-id", random_uuid()]
        for k, v in {"log.dirs": str(self.data_dir), **self.overrides}.items():
            cmd += ["--override", f"{k}={v}"]
        for name, password in self.scram_users.items():
            for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
                cmd += ["--add-scram", f"{mech}=[name={name},password={password}]"]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            raise RuntimeError(f"spool storage format failed: {done.stderr}")

    def bootstrap(self, listener: str | None = None) -> str:  # type: ignore[override]
        """``127.0.0.1:PORT`` of ``listener`` (default: the first one)."""
        name = (listener or self.listener_names[0]).upper()
        return f"127.0.0.1:{self.listener_ports[name]}"

    def password(self, user: str, mechanism: str = "PLAIN") -> str:
        users = self.plain_users if mechanism == "PLAIN" else self.scram_users
        return users[user]

    def confluent(self, user: str | None = ADMIN[0], mechanism: str = "PLAIN",
                  listener: str | None = None, password: str | None = None,
                  **extra: object) -> dict:
        """confluent-kafka (librdkafka) config for ``user`` (None: no SASL settings)."""
        name = (listener or self.listener_names[0]).upper()
        conf: dict = {"bootstrap.servers": self.bootstrap(name), "security.protocol": name}
        if name in TLS_LISTENERS:
            assert self.pki is not None
            conf["ssl.ca.location"] = str(self.pki.ca_pem)
        if user is not None and name.startswith("SASL_") and mechanism == "OAUTHBEARER":
            conf.update({"sasl.mechanism": mechanism,  # librdkafka's unsecured JWS, sub=user
                         "enable.sasl.oauthbearer.unsecure.jwt": True,
                         "sasl.oauthbearer.config": f"principal={user}"})
        elif user is not None and name.startswith("SASL_"):
            conf.update({"sasl.mechanism": mechanism, "sasl.username": user,
                         "sasl.password": password if password is not None
                         else self.password(user, mechanism)})
        conf.update(extra)
        return conf

    def kafka_python(self, user: str | None = ADMIN[0], mechanism: str = "PLAIN",
                     listener: str | None = None, password: str | None = None) -> dict:
        """Keyword arguments for kafka-python's clients."""
        name = (listener or self.listener_names[0]).upper()
        kw: dict = {"bootstrap_servers": self.bootstrap(name), "security_protocol": name}
        if name in TLS_LISTENERS:
            assert self.pki is not None
            kw["ssl_cafile"] = str(self.pki.ca_pem)
        if user is not None and name.startswith("SASL_") and mechanism == "OAUTHBEARER":
            from kafka.net.sasl.oauth import AbstractTokenProvider

            class Unsecured(AbstractTokenProvider):
                def token(self) -> str:
                    return unsecured_token({"unsecuredLoginStringClaim_sub": user})

            kw.update({"sasl_mechanism": mechanism, "sasl_oauth_token_provider": Unsecured()})
        elif user is not None and name.startswith("SASL_"):
            kw.update({"sasl_mechanism": mechanism, "sasl_plain_username": user,
                       "sasl_plain_password": password if password is not None
                       else self.password(user, mechanism)})
        return kw

    def aiokafka(self, user: str | None = ADMIN[0], mechanism: str = "PLAIN",
                 listener: str | None = None, password: str | None = None) -> dict:
        """Keyword arguments for aiokafka's clients (its TLS is an ``ssl_context``)."""
        kw = self.kafka_python(None if mechanism == "OAUTHBEARER" else user, mechanism,
                               listener, password)
        if user is not None and mechanism == "OAUTHBEARER":
            from aiokafka.abc import AbstractTokenProvider

            class Unsecured(AbstractTokenProvider):
                async def token(self) -> str:
                    return unsecured_token({"unsecuredLoginStringClaim_sub": user})

            kw.update({"sasl_mechanism": mechanism, "sasl_oauth_token_provider": Unsecured()})
        cafile = kw.pop("ssl_cafile", None)
        if cafile is not None:
            kw["ssl_context"] = ssl.create_default_context(cafile=cafile)
        return kw
