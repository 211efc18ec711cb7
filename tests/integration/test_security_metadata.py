"""ACLs, SCRAM credentials and client quotas on a single node: the admin APIs answered as
Kafka answers them (confluent-kafka's AdminClient where it has the call, the raw codec for
exact codes and messages), each API's own cluster ACL, and the state kept across a kill -9
and restart (it is in the metadata log) and from ``spool storage format --add-scram``."""

from __future__ import annotations

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialDeletion,
    UserScramCredentialUpsertion,
)
from typer.testing import CliRunner

from spool.cli.main import app as cli
from spool.protocol._generated import (
    AlterClientQuotasRequest,
    AlterUserScramCredentialsRequest,
    CreateAclsRequest,
    DeleteAclsRequest,
    DescribeAclsRequest,
    DescribeClientQuotasRequest,
    DescribeUserScramCredentialsRequest,
)
from spool.protocol._generated import alter_client_quotas_request as acq
from spool.protocol._generated.alter_user_scram_credentials_request import (
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from spool.protocol._generated.create_acls_request import AclCreation
from spool.protocol._generated.delete_acls_request import DeleteAclsFilter
from spool.protocol._generated.describe_client_quotas_request import ComponentData
from spool.protocol._generated.describe_user_scram_credentials_request import UserName
from spool.protocol.errors import Errors
from tests.helpers.broker_proc import BrokerProcess
from tests.helpers.raw_client import request_once

AUTHORIZER = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
ANY_ACL = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,
                           AclOperation.ANY, AclPermissionType.ANY)
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    """A broker with the StandardAuthorizer whose PLAINTEXT clients (User:ANONYMOUS) are
    super users."""
    b = BrokerProcess(tmp_path_factory.mktemp("secured") / "data",
                      {**AUTHORIZER, "super.users": "User:ANONYMOUS"})
    b.start()
    yield b
    b.stop()


_ADMINS: dict[str, AdminClient] = {}


@pytest.fixture(autouse=True)
def _drop_clients():
    yield
    _ADMINS.clear()  # no client outlives its test (or keeps dialing a stopped broker)


def admin(b: BrokerProcess) -> AdminClient:
    """One client per broker address (a client dropped fails its futures with _DESTROY)."""
    if b.bootstrap not in _ADMINS:
        _ADMINS[b.bootstrap] = AdminClient({"bootstrap.servers": b.bootstrap})
    return _ADMINS[b.bootstrap]


def restart(b: BrokerProcess) -> None:
    """kill -9 and start on the same data, with a new client (no reconnect backoff)."""
    _ADMINS.pop(b.bootstrap, None)
    b.restart()


def acl(name, principal="User:alice", op=AclOperation.READ, rtype=ResourceType.TOPIC,
        pattern=ResourcePatternType.LITERAL, perm=AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(rtype, name, pattern, principal, "*", op, perm)


def create_acls(b, bindings) -> None:
    for f in admin(b).create_acls(bindings).values():
        assert f.result(timeout=30) is None


def describe_acls(b, flt=ANY_ACL) -> set[AclBinding]:
    return set(admin(b).describe_acls(flt).result(timeout=30))


def delete_acls(b, flt=ANY_ACL) -> set[AclBinding]:
    (f,) = admin(b).delete_acls([flt]).values()
    return set(f.result(timeout=30))


def scram_users(b) -> dict[str, list[tuple[int, int]]]:
    described = admin(b).describe_user_scram_credentials().result(timeout=30)
    return {u: sorted((i.mechanism.value, i.iterations) for i in d.scram_credential_infos)
            for u, d in described.items()}


def alter_scram(b, *changes) -> dict[str, object]:
    """user -> None or the exception its future raised."""
    out = {}
    for user, f in admin(b).alter_user_scram_credentials(list(changes)).items():
        try:
            out[user] = f.result(timeout=30)
        except KafkaException as e:
            out[user] = e.args[0].name()
    return out


def upsert(user, mech=SHA256, iterations=4096, password=b"secret"):
    return UserScramCredentialUpsertion(user, ScramCredentialInfo(mech, iterations), password)


def quotas(b, components=(), strict=False):
    resp = request_once(b.bootstrap, 48, 1, DescribeClientQuotasRequest(
        components=[ComponentData(entity_type=t, match_type=m, match=n)
                    for t, m, n in components], strict=strict))
    assert (resp.error_code, resp.error_message) == (0, None)
    return {tuple((e.entity_type, e.entity_name) for e in entry.entity):
            {v.key: v.value for v in entry.values} for entry in resp.entries}


def alter_quotas(b, *entries, validate_only=False):
    resp = request_once(b.bootstrap, 49, 1, AlterClientQuotasRequest(entries=[
        acq.EntryData(entity=[acq.EntityData(entity_type=t, entity_name=n) for t, n in entity],
                      ops=[acq.OpData(key=k, value=v or 0.0, remove=v is None)
                           for k, v in ops])
        for entity, ops in entries], validate_only=validate_only))
    return [(tuple(sorted((e.entity_type, e.entity_name) for e in r.entity)),
             r.error_code, r.error_message) for r in resp.entries]


# -- ACLs --------------------------------------------------------------------------------

def test_acls_created_described_and_deleted_with_confluent_kafka(secured):
    read = acl("orders")
    prefixed = acl("orders-", pattern=ResourcePatternType.PREFIXED, op=AclOperation.WRITE)
    deny = acl("g", principal="User:bob", op=AclOperation.ALL, rtype=ResourceType.GROUP,
               perm=AclPermissionType.DENY)
    cluster = acl("kafka-cluster", op=AclOperation.DESCRIBE, rtype=ResourceType.BROKER)
    create_acls(secured, [read, prefixed, deny, cluster])
    create_acls(secured, [read])  # exists: succeeds, kept once
    assert sorted(map(str, admin(secured).describe_acls(ANY_ACL).result(timeout=30))) == sorted(
        map(str, [read, prefixed, deny, cluster]))
    # MATCH: the ACLs that apply to topic orders-eu
    match = AclBindingFilter(ResourceType.TOPIC, "orders-eu", ResourcePatternType.MATCH, None,
                             None, AclOperation.ANY, AclPermissionType.ANY)
    assert describe_acls(secured, match) == {prefixed}
    by_bob = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:bob", None,
                              AclOperation.ANY, AclPermissionType.ANY)
    assert delete_acls(secured, by_bob) == {deny}
    assert delete_acls(secured, by_bob) == set()
    assert describe_acls(secured) == {read, prefixed, cluster}
    assert delete_acls(secured) == {read, prefixed, cluster}
    assert describe_acls(secured) == set()


def test_bad_acls_get_kafka_errors_one_by_one(secured):
    def creation(rtype=2, name="t", pattern=3, op=3, perm=3):
        return AclCreation(resource_type=rtype, resource_name=name, resource_pattern_type=pattern,
                           principal="User:carol", host="*", operation=op, permission_type=perm)

    resp = request_once(secured.bootstrap, 30, 3, CreateAclsRequest(creations=[
        creation(rtype=4, name="other"), creation(name=""), creation(rtype=1),
        creation(pattern=2), creation(op=1), creation(perm=1), creation(rtype=42),
        creation(name="carol-ok")]))
    assert [(r.error_code, r.error_message) for r in resp.results] == [
        (Errors.INVALID_REQUEST, "The only valid name for the CLUSTER resource is kafka-cluster"),
        (Errors.INVALID_REQUEST, "Invalid empty resource name"),
        (Errors.INVALID_REQUEST, "Invalid resourceType ANY"),
        (Errors.INVALID_REQUEST, "Invalid patternType MATCH"),
        (Errors.INVALID_REQUEST, "Invalid operation ANY"),
        (Errors.INVALID_REQUEST, "Invalid permissionType ANY"),
        (Errors.INVALID_REQUEST, "Invalid resourceType UNKNOWN"),
        (0, None)]
    carol = AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, "User:carol",
                             None, AclOperation.ANY, AclPermissionType.ANY)
    assert describe_acls(secured, carol) == {acl("carol-ok", principal="User:carol")}

    def flt(pattern=1, op=1):
        return DeleteAclsFilter(resource_type_filter=1, resource_name_filter=None,
                                pattern_type_filter=pattern, principal_filter="User:carol",
                                host_filter=None, operation=op, permission_type=1)

    resp = request_once(secured.bootstrap, 31, 3, DeleteAclsRequest(filters=[
        flt(pattern=0), flt(op=0), flt()]))
    assert [(r.error_code, r.error_message, len(r.matching_acls))
            for r in resp.filter_results] == [
        (Errors.INVALID_REQUEST, "Unknown patternFilter.", 0),
        (Errors.INVALID_REQUEST, "Unknown entryFilter.", 0),
        (0, None, 1)]
    resp = request_once(secured.bootstrap, 29, 3, DescribeAclsRequest(
        resource_type_filter=0, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1))
    assert (resp.error_code, resp.error_message, resp.resources) == (
        Errors.INVALID_REQUEST, "Unknown patternFilter.", [])


def test_acl_apis_without_an_authorizer_are_security_disabled(broker):
    # (librdkafka 2.16 reads DescribeAcls' top-level error as an empty list: the raw codec)
    resp = request_once(broker.bootstrap, 29, 3, DescribeAclsRequest(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1))
    assert (resp.error_code, resp.error_message, resp.resources) == (
        Errors.SECURITY_DISABLED, "No Authorizer is configured on the broker", [])
    (f,) = admin(broker).create_acls([acl("x")]).values()
    with pytest.raises(KafkaException) as info:
        f.result(timeout=30)
    assert info.value.args[0].name() == "SECURITY_DISABLED"
    resp = request_once(broker.bootstrap, 31, 3, DeleteAclsRequest(filters=[DeleteAclsFilter(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1)]))
    assert [(r.error_code, r.error_message) for r in resp.filter_results] == [
        (Errors.SECURITY_DISABLED, "No Authorizer is configured.")]


# -- SCRAM -------------------------------------------------------------------------------

def test_scram_credentials_altered_and_described_with_confluent_kafka(secured):
    assert alter_scram(secured, upsert("alice"), upsert("bob", SHA512, 8192)) == {
        "alice": None, "bob": None}
    assert alter_scram(secured, upsert("alice", SHA512, 5000)) == {"alice": None}
    users = scram_users(secured)
    assert {u: users[u] for u in ("alice", "bob")} == {
        "alice": [(1, 4096), (2, 5000)], "bob": [(2, 8192)]}
    assert alter_scram(secured, UserScramCredentialDeletion("alice", SHA256)) == {"alice": None}
    assert alter_scram(secured, UserScramCredentialDeletion("alice", SHA256),
                       upsert("bob", SHA256, 4000), upsert("dan", SHA256, 20000)) == {
        "alice": "RESOURCE_NOT_FOUND", "bob": "UNACCEPTABLE_CREDENTIAL",
        "dan": "UNACCEPTABLE_CREDENTIAL"}
    assert scram_users(secured)["alice"] == [(2, 5000)]


def test_bad_scram_requests_get_kafka_errors(secured):
    def up(name, mech=1, iterations=4096):
        return ScramCredentialUpsertion(name=name, mechanism=mech, iterations=iterations,
                                        salt=b"salt", salted_password=b"x" * 32)

    resp = request_once(secured.bootstrap, 51, 0, AlterUserScramCredentialsRequest(
        deletions=[ScramCredentialDeletion(name="erin", mechanism=1)],
        upsertions=[up("erin"), up(""), up("fred", mech=0), up("gina", iterations=3)]))
    assert sorted((r.user, r.error_code, r.error_message) for r in resp.results) == [
        ("", Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        ("erin", Errors.RESOURCE_NOT_FOUND,
         "Attempt to delete a user credential that does not exist"),
        ("fred", Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        ("gina", Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations")]
    resp = request_once(secured.bootstrap, 51, 0, AlterUserScramCredentialsRequest(
        deletions=[], upsertions=[up("hank"), up("hank", mech=2)]))
    assert [(r.user, r.error_code, r.error_message) for r in resp.results] == [
        ("hank", Errors.DUPLICATE_RESOURCE,
         "A user credential cannot be altered twice in the same request")]
    resp = request_once(secured.bootstrap, 50, 0, DescribeUserScramCredentialsRequest(
        users=[UserName(name="nobody"), UserName(name="twice"), UserName(name="twice")]))
    assert [(r.user, r.error_code, r.error_message, r.credential_infos)
            for r in resp.results] == [
        ("nobody", Errors.RESOURCE_NOT_FOUND,
         "Attempt to describe a user credential that does not exist: nobody", []),
        ("twice", Errors.DUPLICATE_RESOURCE, "Cannot describe SCRAM credentials for the same "
                                             "user twice in a single request: twice", [])]


# -- client quotas -----------------------------------------------------------------------

def test_client_quotas_altered_and_described(secured):
    alice, default_user = (("user", "alice"),), (("user", None),)
    pair = (("client-id", "app"), ("user", "alice"))
    assert alter_quotas(secured, (alice, [("producer_byte_rate", 1048576.0)]),
                        (default_user, [("consumer_byte_rate", 2048.0)]),
                        (pair, [("request_percentage", 50.0)])) == [
        (alice, 0, None), (default_user, 0, None), (pair, 0, None)]
    assert alter_quotas(secured, (alice, [("producer_byte_rate", 5.0)]),
                        validate_only=True) == [(alice, 0, None)]
    assert quotas(secured) == {alice: {"producer_byte_rate": 1048576.0},
                               default_user: {"consumer_byte_rate": 2048.0},
                               pair: {"request_percentage": 50.0}}
    assert quotas(secured, [("user", 0, "alice")]) == {
        alice: {"producer_byte_rate": 1048576.0}, pair: {"request_percentage": 50.0}}
    assert quotas(secured, [("user", 0, "alice")], strict=True) == {
        alice: {"producer_byte_rate": 1048576.0}}
    assert quotas(secured, [("user", 1, None)]) == {default_user: {"consumer_byte_rate": 2048.0}}
    assert alter_quotas(secured, (pair, [("request_percentage", None)]),
                        (alice, [("bogus", 1.0)]), (default_user, [("consumer_byte_rate", -1.0)]),
                        ((("ip", "1.2.3.4"), ("user", "x")), [("producer_byte_rate", 1.0)])) == [
        (pair, 0, None),
        (alice, Errors.INVALID_REQUEST, "Invalid configuration key bogus"),
        (default_user, Errors.INVALID_REQUEST, "Quota consumer_byte_rate must be greater than 0"),
        ((("ip", "1.2.3.4"), ("user", "x")), Errors.INVALID_REQUEST,
         "Invalid quota entity combination, IP entity shouldnot be combined with User or "
         "ClientId")]
    assert pair not in quotas(secured)
    resp = request_once(secured.bootstrap, 48, 1, DescribeClientQuotasRequest(
        components=[ComponentData(entity_type="group", match_type=2, match=None)], strict=False))
    assert (resp.error_code, resp.error_message, resp.entries) == (
        Errors.UNSUPPORTED_VERSION, "Unsupported entity type group", None)


# -- each API's own ACL ------------------------------------------------------------------

def test_every_security_api_checks_its_cluster_acl(fresh_broker):
    """With an ACL on the cluster (for another principal), User:ANONYMOUS is refused: each
    API answers CLUSTER_AUTHORIZATION_FAILED where Kafka puts it, and nothing changes."""
    b = fresh_broker
    b.overrides.update({**AUTHORIZER, "allow.everyone.if.no.acl.found": "true"})
    b.start()
    create_acls(b, [acl("kafka-cluster", principal="User:admin", op=AclOperation.ALL,
                        rtype=ResourceType.BROKER)])
    denied = Errors.CLUSTER_AUTHORIZATION_FAILED
    resp = request_once(b.bootstrap, 29, 3, DescribeAclsRequest(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1))
    assert (resp.error_code, resp.resources) == (denied, [])
    resp = request_once(b.bootstrap, 30, 3, CreateAclsRequest(creations=[AclCreation(
        resource_type=2, resource_name="t", resource_pattern_type=3, principal="User:x",
        host="*", operation=3, permission_type=3)]))
    assert [r.error_code for r in resp.results] == [denied]
    resp = request_once(b.bootstrap, 31, 3, DeleteAclsRequest(filters=[DeleteAclsFilter(
        resource_type_filter=1, resource_name_filter=None, pattern_type_filter=1,
        principal_filter=None, host_filter=None, operation=1, permission_type=1)]))
    assert [(r.error_code, r.matching_acls) for r in resp.filter_results] == [(denied, [])]
    assert alter_scram(b, upsert("zoe")) == {"zoe": "CLUSTER_AUTHORIZATION_FAILED"}
    resp = request_once(b.bootstrap, 50, 0, DescribeUserScramCredentialsRequest(users=None))
    assert (resp.error_code, resp.results) == (denied, [])
    assert alter_quotas(b, ((("user", "zoe"),), [("producer_byte_rate", 1.0)])) == [
        ((("user", "zoe"),), denied, "Cluster authorization failed.")]
    resp = request_once(b.bootstrap, 48, 1, DescribeClientQuotasRequest(components=[],
                                                                        strict=False))
    assert (resp.error_code, resp.entries) == (denied, None)
    b.overrides["super.users"] = "User:ANONYMOUS"  # nothing was written meanwhile
    restart(b)
    assert [x.principal for x in describe_acls(b)] == ["User:admin"]
    assert scram_users(b) == {}
    assert quotas(b) == {}


# -- durability --------------------------------------------------------------------------

def test_acls_credentials_and_quotas_survive_kill_and_restart(fresh_broker):
    b = fresh_broker
    b.overrides.update({**AUTHORIZER, "super.users": "User:ANONYMOUS"})
    b.start()
    create_acls(b, [acl("a"), acl("b"), acl("c", pattern=ResourcePatternType.PREFIXED)])
    delete_acls(b, AclBindingFilter(ResourceType.TOPIC, "b", ResourcePatternType.LITERAL, None,
                                    None, AclOperation.ANY, AclPermissionType.ANY))
    alter_scram(b, upsert("alice"), upsert("bob", SHA512, 8192))
    alter_scram(b, UserScramCredentialDeletion("bob", SHA512), upsert("alice", SHA512))
    alter_quotas(b, ((("user", "alice"),), [("producer_byte_rate", 1024.0)]),
                 ((("client-id", None),), [("consumer_byte_rate", 10.0)]))
    alter_quotas(b, ((("user", "alice"),), [("producer_byte_rate", None)]))
    before = (describe_acls(b), scram_users(b), quotas(b))
    assert before == ({acl("a"), acl("c", pattern=ResourcePatternType.PREFIXED)},
                      {"alice": [(1, 4096), (2, 4096)]},
                      {(("client-id", None),): {"consumer_byte_rate": 10.0}})
    restart(b)  # kill -9, then start on the same data
    assert (describe_acls(b), scram_users(b), quotas(b)) == before
    assert b.stop() == 0
    _ADMINS.pop(b.bootstrap, None)
    b.start()
    assert (describe_acls(b), scram_users(b), quotas(b)) == before


def test_storage_format_add_scram_gives_a_new_node_its_credentials(tmp_path):
    data = tmp_path / "data"
    config = tmp_path / "server.properties"
    config.write_text(f"log.dirs={data}\nlisteners=PLAINTEXT://127.0.0.1:0\n")

    def fmt(*scram):  # the command in this process (typer's runner): no interpreter start
        args = [a for s in scram for a in ("--add-scram", s)]
        return CliRunner().invoke(cli, ["storage", "format", "--cluster-id", "c1",
                                        "--config", str(config), *args])

    bad = fmt("SCRAM-SHA-256=[name=admin,password=pw]", "SCRAM-SHA-256=[password=pw]")
    assert (bad.exit_code, bad.output.strip()) == (
        1, "spool storage format: You must supply 'name' to add-scram")
    assert not data.exists()  # nothing formatted
    ok = fmt("SCRAM-SHA-256=[name=admin,password=admin-secret]",
             "SCRAM-SHA-512=[name=admin,iterations=8192,password=\"admin-secret\"]",
             "SCRAM-SHA-512=[name=app,salt=c2FsdA==,saltedpassword=AAAA]")
    assert ok.exit_code == 0, ok.output
    b = BrokerProcess(data, {"cluster.id": "c1"})
    b.start()
    try:
        assert scram_users(b) == {"admin": [(1, 4096), (2, 8192)], "app": [(2, 4096)]}
        alter_scram(b, UserScramCredentialDeletion("app", SHA512))
        restart(b)  # the bootstrap file is read only by a new node: app stays deleted
        assert scram_users(b) == {"admin": [(1, 4096), (2, 8192)]}
        # the log dir's bootstrap file is Spool's own: not reported as a stray entry
        assert "bootstrap.spool.json" not in b.log_path.read_text()
    finally:
        b.stop()


# -- credentials set through the API are the ones SASL/SCRAM checks ----------------------

def scram_login(b, user: str, password: str, mechanism: str) -> str:
    """'ok' if ``user`` authenticates with SCRAM (a metadata request answered), else the
    first error librdkafka reports."""
    errors: list = []
    conf = b.confluent(user, mechanism, password=password, error_cb=errors.append)
    client = AdminClient(conf)
    last = ""
    for _ in range(20):
        try:
            client.list_topics(timeout=0.5)
            return "ok"
        except KafkaException as e:
            last = str(e)
        client.poll(0.1)  # error_cb runs from poll
        if errors:
            return errors[0].str()
    return last


def test_scram_credentials_from_alter_user_scram_credentials_authenticate(tmp_path):
    from tests.helpers.secure_broker import SecureBroker

    b = SecureBroker(tmp_path / "data", overrides={**AUTHORIZER, "super.users": "User:admin"})
    b.start()
    try:
        admin_client = AdminClient(b.confluent())  # admin over PLAIN
        for change in (upsert("carol", SHA256, 8192, b"carol-secret"),  # one per request:
                       upsert("carol", SHA512, 4096, b"carol-512")):  # a user once in each
            (f,) = admin_client.alter_user_scram_credentials([change]).values()
            assert f.result(timeout=30) is None
        assert scram_login(b, "carol", "carol-secret", "SCRAM-SHA-256") == "ok"
        assert scram_login(b, "carol", "carol-512", "SCRAM-SHA-512") == "ok"
        refused = ("Authentication failed during authentication due to invalid credentials "
                   "with SASL mechanism SCRAM-SHA-256")
        assert refused in scram_login(b, "carol", "carol-512", "SCRAM-SHA-256")
        (f,) = admin_client.alter_user_scram_credentials(
            [UserScramCredentialDeletion("carol", SHA256)]).values()
        assert f.result(timeout=30) is None
        assert refused in scram_login(b, "carol", "carol-secret", "SCRAM-SHA-256")
        assert scram_login(b, "carol", "carol-512", "SCRAM-SHA-512") == "ok"
    finally:
        b.stop()


def test_kafka_python_admin_client_manages_acls_and_scram_credentials(secured):
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType
    from kafka.admin import UserScramCredentialDeletion as KpDeletion
    from kafka.admin import UserScramCredentialUpsertion as KpUpsertion
    from kafka.errors import NoError

    client = KafkaAdminClient(bootstrap_servers=secured.bootstrap)
    try:
        dave = ACL("User:dave", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
                   ResourcePattern(KpResourceType.TOPIC, "dave-", ACLResourcePatternType.PREFIXED))
        assert client.create_acls([dave]) == {"succeeded": [dave], "failed": []}
        by_dave = ACLFilter("User:dave", None, ACLOperation.ANY, ACLPermissionType.ANY,
                            ResourcePatternFilter(KpResourceType.ANY, None,
                                                  ACLResourcePatternType.ANY))
        assert client.describe_acls(by_dave) == ([dave], NoError)
        assert client.delete_acls([by_dave]) == [(by_dave, [dave], NoError)]
        assert client.describe_acls(by_dave) == ([], NoError)

        assert client.alter_user_scram_credentials([
            KpUpsertion("dave", 2, "dave-secret", iterations=8192)]) == {"dave": None}
        described = client.describe_user_scram_credentials(["dave"])
        assert described["dave"]["error"] is None
        assert [(int(c["mechanism"]), c["iterations"])
                for c in described["dave"]["credential_infos"]] == [(2, 8192)]
        assert client.alter_user_scram_credentials([KpDeletion("dave", 2)]) == {"dave": None}
        assert client.describe_user_scram_credentials(["dave"])["dave"] == {
            "error": "Attempt to describe a user credential that does not exist: dave",
            "credential_infos": []}
    finally:
        client.close()
