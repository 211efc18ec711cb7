"""A ``Cluster`` (tests/helpers/cluster_proc.py) whose own traffic is authenticated, Kafka's keys
only: brokers replicate over INTERNAL (SASL_SSL, PLAIN, ``inter.broker.listener.name``) and the
quorum, registrations and heartbeats run over CONTROLLER (SSL, ``ssl.client.auth=required``:
each node presents its own certificate). PLAINTEXT stays for the test's clients.

    cluster = secure_cluster(base_dir, overrides={...})   # configured, not started
    cluster.start()
    cluster.node_overrides[3][JAAS_KEY] = internal_jaas("wrong")  # then restart node 3

Certificates come from a ``tests.helpers.certs.Pki`` under ``base_dir/pki``; each node's names
127.0.0.1 (Kafka's default ``ssl.endpoint.identification.algorithm=https`` holds). A broker logs
in as ``broker`` with the ``username``/``password`` of its INTERNAL JAAS config (``JAAS_KEY``),
which also lists the users INTERNAL accepts. ``internal_address(node)`` is a node's INTERNAL
listener. ``authorizer=True`` adds Kafka's authorizer with the nodes' principals as super
users (``secure_cluster``'s docstring).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.helpers.certs import Pki
from tests.helpers.cluster_proc import Cluster, ClusterNode

PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
BROKER_USER, BROKER_PASSWORD = "broker", "broker-secret"
JAAS_KEY = "listener.name.internal.plain.sasl.jaas.config"


def internal_jaas(password: str = BROKER_PASSWORD) -> str:
    """The INTERNAL listener's PLAIN config: the users it accepts, and the login it presents."""
    return (f'{PLAIN_LOGIN} required username="{BROKER_USER}" password="{password}" '
            f'user_{BROKER_USER}="{BROKER_PASSWORD}";')


def internal_address(node: ClusterNode) -> str:
    return f"127.0.0.1:{node.extra_ports[0]}"


AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def secure_cluster(base_dir: Path, *, overrides: dict[str, str] | None = None,
                   authorizer: bool = False, **cluster_kwargs: Any) -> Cluster:
    """``authorizer``: Kafka's StandardAuthorizer with the brokers' own principals as
    ``super.users`` (``User:broker`` on INTERNAL, ``User:CN=node<i>`` from the client
    certificates on CONTROLLER) and ``allow.everyone.if.no.acl.found=true`` for the test's
    PLAINTEXT clients (``User:ANONYMOUS``)."""
    base_dir = Path(base_dir)
    if authorizer:
        overrides = {**(overrides or {}), "authorizer.class.name": AUTHORIZER,
                     "allow.everyone.if.no.acl.found": "true"}
    pki = Pki(base_dir / "pki")
    c = Cluster(base_dir / "cluster", proxied=False, overrides={
        **(overrides or {}),
        "listener.security.protocol.map":
            "PLAINTEXT:PLAINTEXT,INTERNAL:SASL_SSL,CONTROLLER:SSL",
        "inter.broker.listener.name": "INTERNAL",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.internal.sasl.enabled.mechanisms": "PLAIN",
        "ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca_pem),
        "listener.name.controller.ssl.client.auth": "required",
    }, **cluster_kwargs)
    if authorizer:
        c.overrides["super.users"] = ";".join(
            [f"User:{BROKER_USER}"] + [f"User:CN=node{i}" for i in c.nodes])
    for n in c.nodes.values():
        ident = pki.issue(f"CN=node{n.node_id}", hosts=("127.0.0.1",))
        n.reserve_extra()
        c.node_overrides[n.node_id] = {
            "listeners": f"PLAINTEXT://{n.bootstrap},INTERNAL://{internal_address(n)},"
                         f"CONTROLLER://{n.controller_address}",
            "advertised.listeners": f"PLAINTEXT://{n.bootstrap},INTERNAL://{internal_address(n)}",
            "ssl.keystore.type": "PEM", "ssl.keystore.location": str(ident.keystore_pem),
            JAAS_KEY: internal_jaas(),
        }
    return c


def wait_formed(c: Cluster, timeout: float = 90.0) -> None:
    """Every broker lists the three brokers and a controller (``Cluster.wait_formed`` asks the
    controller listener in plaintext: not here)."""
    c.wait_until("every broker lists every broker and a controller", lambda: all(
        not isinstance(md := c.metadata(b.node_id), str) and len(md.brokers) == len(c.brokers)
        and md.controller_id > 0 for b in c.brokers if b.alive) or "not yet", timeout)
