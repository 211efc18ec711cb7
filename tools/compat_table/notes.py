"""What each API's versions do in Spool: the notes column of docs/COMPATIBILITY.md.

``NOTES[api_key]``: one short paragraph per API, in Kafka's words, saying what Spool
does with what the versions carry (and what it does not do). Whoever raises an API's
version or changes what a version does edits its entry here and runs
``python -m tools.compat_table`` (``make compat``); tests/unit/test_compat_table.py
fails while the committed page is stale. An API with no entry shows nothing.
"""

from __future__ import annotations

NOTES: dict[int, str] = {
    0: "Advertised from v0 for old librdkafka (it stops compressing otherwise), v0-2 answered "
       "UNSUPPORTED_VERSION per partition as Kafka 4. RecordBatch v2 only; idempotent and "
       "transactional batches checked against producer state; v8+ KIP-467 `record_errors` "
       "name the refused records of a batch (null key on a compacted topic, timestamp out of "
       "range); v10 KIP-951 `current_leader` and `node_endpoints` on NOT_LEADER_OR_FOLLOWER; "
       "KIP-890: the first transactional batch of a transaction on a partition is verified "
       "with the transaction coordinator (v3-11, `transaction.partition.verification.enable`; "
       "not in the transaction: INVALID_TXN_STATE, TRANSACTION_ABORTABLE from v11) and v12 "
       "adds the partition to the transaction itself (transaction version 2); v13 topics by id "
       "(UNKNOWN_TOPIC_ID per partition for an unknown id, nothing appended). "
       "acks=0 gets no answer; when it fails the connection is closed, as Kafka tells such a "
       "producer."
       " With an authorizer: WRITE on each topic (TOPIC_AUTHORIZATION_FAILED per partition, also "
       "for a topic that does not exist); transactional batches need WRITE on the transactional id"
       " (TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition).",
    1: "Whole batches from segment files with sendfile, long polling, KIP-74 (the first "
       "batch always fits), read_committed up to the LSO with aborted transactions. No fetch "
       "sessions (KIP-227): `session_id` 0 asks for full requests. v13+ topics by id "
       "(UNKNOWN_TOPIC_ID per partition for an unknown id, INCONSISTENT_TOPIC_ID for a replica "
       "of another incarnation of the name); v15 follower id from `replica_state` (its broker "
       "epoch unused); v16+ KIP-951 `current_leader` and `node_endpoints` on "
       "NOT_LEADER_OR_FOLLOWER and FENCED_LEADER_EPOCH; v17 `replica_directory_id` and v18 "
       "`high_watermark` ignored (no JBOD, no KIP-1166). On a controller listener: "
       "the Raft fetch of `__cluster_metadata` (v12+, diverging epochs, snapshots)."
       " With an authorizer: READ on each topic (TOPIC_AUTHORIZATION_FAILED per partition, left "
       "out of the long poll); a follower's fetch CLUSTER_ACTION.",
    2: "Latest (-1), earliest (-2), max timestamp (-3, v7+), by timestamp through the time "
       "index; earliest local (-4, v8+) is the log start, latest tiered (-5, v9+) and "
       "earliest pending upload (-6, v11+) offset -1 (no tiered storage); a special "
       "timestamp below its version UNSUPPORTED_VERSION; answers past the HW (LSO under "
       "read_committed) hidden; v10 `timeout_ms` unused (no remote reads). v5+: "
       "OFFSET_NOT_AVAILABLE, LEADER_NOT_AVAILABLE below."
       " With an authorizer: DESCRIBE on each topic (TOPIC_AUTHORIZATION_FAILED per partition).",
    3: "Brokers, controller id, leaders, epochs, ISR, offline replicas; auto-creation when "
       "allowed (v4+, always below); topic ids (v10+); by topic id from v12 (unknown: "
       "UNKNOWN_TOPIC_ID, null name; v10-11 ids INVALID_REQUEST); v13 top-level `error_code` "
       "always 0 (Kafka's brokers never ask for KIP-1102's rebootstrap); v8+ authorized "
       "operations (without an authorizer: every operation of the resource type)."
       " With an authorizer: all topics leaves out those the principal may not DESCRIBE; a named "
       "one is TOPIC_AUTHORIZATION_FAILED without a topic id, existing or not; by id, with the id "
       "and no name; auto-creation needs CREATE on the cluster or the topic; cluster operations 0 "
       "without DESCRIBE on the cluster.",
    8: "Classic groups: generation and member checks, static members (v7 group.instance.id); "
       "commits appended to `__consumer_offsets` and replayed before the answer; "
       "`retention_time_ms` (v2-4) ignored as Kafka since 2.1; v9 member id/epoch ignored for "
       "classic groups (as Kafka), a generation to an unknown group GROUP_ID_NOT_FOUND "
       "(ILLEGAL_GENERATION below v9); v10 topics by id (UNKNOWN_TOPIC_ID)."
       " With an authorizer: READ on the group (GROUP_AUTHORIZATION_FAILED for every partition) "
       "and on each topic (TOPIC_AUTHORIZATION_FAILED).",
    9: "Per partition offset, leader epoch (v5+) and metadata; null topics (v2+) list every "
       "committed partition; v7 `require_stable`: UNSTABLE_OFFSET_COMMIT while a transactional "
       "commit waits for its marker; v8 several groups, each with its own error; v10 topics "
       "by id."
       " With an authorizer: DESCRIBE on each group (the group's error) and on each topic "
       "(TOPIC_AUTHORIZATION_FAILED, offset -1; left out of an all-topics answer).",
    10: "Group (0) and transaction (1) keys: the leader of the key's internal partition; v4 "
        "batched keys; v5 TRANSACTION_ABORTABLE never answered; v6 share keys (2, "
        "`group:topicId:partition`): the leader of its `__share_group_state` partition (below "
        "v6 INVALID_REQUEST). An empty group id is INVALID_GROUP_ID (Kafka looks it up)."
        " With an authorizer: DESCRIBE on the group (GROUP_AUTHORIZATION_FAILED) or the "
        "transactional id (TRANSACTIONAL_ID_AUTHORIZATION_FAILED); CLUSTER_ACTION for a share "
        "key (CLUSTER_AUTHORIZATION_FAILED).",
    11: "Classic protocol; MEMBER_ID_REQUIRED round trip v4+; static members v5+; v8 "
        "`reason` logged; v9 KIP-814 `skip_assignment` for a static leader rejoining a "
        "Stable group."
        " With an authorizer: READ on the group (GROUP_AUTHORIZATION_FAILED).",
    12: "Session expiry, REBALANCE_IN_PROGRESS during a rebalance, static members (v3+)."
        " With an authorizer: READ on the group.",
    13: "v3+ batch of members (static and dynamic); v5 `reason` logged."
        " With an authorizer: READ on the group (the request's error, no members).",
    14: "The leader's assignment bytes are passed through unparsed; v5 checks protocol type "
        "and name."
        " With an authorizer: READ on the group.",
    15: "State, protocol, members with their metadata and assignment; v3+ authorized "
        "operations (all without an authorizer); v6 KIP-1043 GROUP_ID_NOT_FOUND for an unknown group "
        "(Dead and no error below)."
        " With an authorizer: DESCRIBE on each group (GROUP_AUTHORIZATION_FAILED for that group); "
        "authorized operations from the authorizer.",
    16: "v4 states filter (case-insensitive: Kafka's classic, consumer and share group "
        "states); v5 `group_type` and type filter (`classic`, `consumer`, `share`). Each broker "
        "answers for the groups it coordinates (`spool groups list` asks every broker)."
        " With an authorizer: every group with DESCRIBE on the cluster, else the groups the "
        "principal may DESCRIBE.",
    17: "On a SASL listener (SASL_PLAINTEXT, SASL_SSL), before authentication: a mechanism "
        "of `sasl.enabled.mechanisms` (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER), else "
        "UNSUPPORTED_SASL_MECHANISM with the enabled list and the connection closed; v0: raw "
        "size-prefixed tokens follow, v1: SaslAuthenticate. After a SaslAuthenticate v1+, a "
        "new handshake starts KIP-368 re-authentication (same principal; another enabled "
        "mechanism is answered NONE and the next frame closes the connection, Kafka's "
        "REAUTH_BAD_MECHANISM). Elsewhere ILLEGAL_SASL_STATE, as Kafka. Any other request "
        "after the handshake and before authentication completes gets its own API's error "
        "response with ILLEGAL_SASL_STATE (top-level error code, or each Metadata topic), "
        "then the close.",
    18: "Derived from the handler registry, per listener plane; an unknown version gets a v0 "
        "body with UNSUPPORTED_VERSION and the full list; v3+ supported and finalized "
        "features.",
    19: "Partitions, replica assignments, configs validated by each key's validator; "
        "`validate_only`; the partition limit (`max.broker.partitions`) is POLICY_VIOLATION. "
        "In a cluster, forwarded to the active controller.",
    20: "By name, or by topic id (v6+, UNKNOWN_TOPIC_ID). In a cluster, forwarded to the "
        "active controller.",
    21: "Moves the log start offset; -1 means the high watermark.",
    22: "Idempotent (a fresh producer id) and transactional (epoch bump, fencing, abort of "
        "the open transaction); v3+ KIP-360 resume with the current id and epoch. "
        "PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v4. v6 (KIP-939): no two-phase "
        "commit, `enable2Pc` TRANSACTIONAL_ID_AUTHORIZATION_FAILED and `keepPreparedTxn` "
        "UNSUPPORTED_VERSION, as Kafka with `transaction.two.phase.commit.enable` off. "
        "A Kafka 4.2 broker advertises 0-5 (v6 is unstable there); Spool advertises v6."
        " With an authorizer: WRITE on the transactional id "
        "(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); an idempotent producer IDEMPOTENT_WRITE on the "
        "cluster or WRITE on some topic (KIP-679; else CLUSTER_AUTHORIZATION_FAILED).",
    23: "From the partition's leader epoch cache (truncation detection)."
        " With an authorizer: CLUSTER_ACTION, or DESCRIBE on each topic "
        "(TOPIC_AUTHORIZATION_FAILED per partition).",
    24: "v0-3 from producers; v4+ from partition leaders (KIP-890), batched per coordinator: "
        "`verify_only` (is the partition in the ongoing transaction?) or the add of a "
        "transaction version 2 producer's partition. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH "
        "below v2."
        " With an authorizer: v0-3 WRITE on the transactional id and on each topic (internal "
        "topics never; TOPIC_AUTHORIZATION_FAILED and OPERATION_NOT_ATTEMPTED for the rest); v4+ "
        "CLUSTER_ACTION (top-level CLUSTER_AUTHORIZATION_FAILED).",
    25: "Adds the group's `__consumer_offsets` partition to the transaction. PRODUCER_FENCED "
        "is INVALID_PRODUCER_EPOCH below v2."
        " With an authorizer: WRITE on the transactional id, then READ on the group.",
    26: "Commit or abort: markers written to every partition of the transaction, offsets made "
        "visible on commit. PRODUCER_FENCED is INVALID_PRODUCER_EPOCH below v2. v5 (KIP-890 "
        "transaction version 2): the epoch is bumped at every commit and abort (markers carry "
        "it), the answer names the producer id and epoch to go on with, a retry is told by "
        "its epoch, aborting an empty transaction is allowed, an exhausted epoch moves to a "
        "new producer id."
        " With an authorizer: WRITE on the transactional id.",
    27: "Between brokers: the coordinator's markers for partitions another broker leads; v2 "
        "`transaction_version` 2 (KIP-890): the marker's epoch must be above the producer's "
        "(INVALID_PRODUCER_EPOCH for a late or repeated one)."
        " With an authorizer: ALTER or CLUSTER_ACTION on the cluster (CLUSTER_AUTHORIZATION_FAILED"
        " per partition).",
    28: "Transactional offsets pending until the marker; v3 generation and member checks. A "
        "fenced producer is INVALID_PRODUCER_EPOCH at every version, as Kafka. The offsets "
        "partition is verified with the transaction coordinator (KIP-890), v5 adds it "
        "(transaction version 2: no AddOffsetsToTxn)."
        " With an authorizer: WRITE on the transactional id, READ on the group (that error for "
        "every partition), READ on each topic.",
    32: "Topic and broker resources with sources, synonyms (v1+) and documentation (v3+); "
        "a broker id lists every key (DYNAMIC_BROKER_CONFIG, DYNAMIC_DEFAULT_BROKER_CONFIG, "
        "STATIC_BROKER_CONFIG, DEFAULT_CONFIG, Kafka's synonyms), the empty name only the "
        "cluster-wide dynamic values; passwords and unknown keys hidden (`is_sensitive`). "
        "Group resources (32): every group config key, GROUP_CONFIG (8) when the group sets it, "
        "else DEFAULT_CONFIG with the broker key's value (`group.consumer.session.timeout.ms` "
        "...); the synonym is the key itself, as Kafka 4.2. With an authorizer: "
        "DESCRIBE_CONFIGS on the group (GROUP_AUTHORIZATION_FAILED).",
    33: "Replaces a resource's override set. Broker resource: every key Kafka 4.2 updates "
        "dynamically (a broker id, or the empty name for the cluster-wide default; Kafka's "
        "INVALID_REQUEST for keys that need a restart), stored in the metadata log; topic "
        "defaults (`log.*`, `message.max.bytes`) act at once, and so do a TLS listener's "
        "`ssl.*` keys (the new keystore/truststore loaded first, INVALID_REQUEST if it does "
        "not load; then used for new connections); the others (SASL, quotas, thread "
        "pools...) are stored and reported, and the broker log says so. Group resources "
        "(32): as IncrementalAlterConfigs.",
    35: "Log dirs with partition sizes and offset lag; v4+ total and usable bytes "
        "(statvfs); v5 `is_cordoned` false. A Kafka 4.2 broker advertises 1-4 (v5 is 4.3's "
        "schema); Spool advertises v5.",
    36: "The tokens of the mechanism chosen by SaslHandshake v1; a failure is "
        "SASL_AUTHENTICATION_FAILED with Kafka's message (SCRAM and OAUTHBEARER: the generic "
        "one, or RFC 7628's JSON), then the connection closes after "
        "`connection.failed.authentication.delay.ms`. v1+ `session_lifetime_ms`: "
        "`connections.max.reauth.ms` (KIP-368), no later than an OAUTHBEARER token's exp; an "
        "expired session is closed at its next request. After authentication: "
        "ILLEGAL_SASL_STATE.",
    37: "Adds partitions within the broker's partition limit. In a cluster, forwarded to the "
        "active controller.",
    42: "Empty or dead groups only (NON_EMPTY_GROUP otherwise)."
        " With an authorizer: DELETE on each group (GROUP_AUTHORIZATION_FAILED).",
    43: "Preferred and unclean elections by the controller; a single node answers "
        "ELECTION_NOT_NEEDED.",
    44: "SET, DELETE, APPEND, SUBTRACT (a SUBTRACT may empty a list config: "
        "`cleanup.policy` \"\" keeps records forever); broker resources as AlterConfigs. "
        "Group resources (32, KIP-848/932): Kafka 4.2's GroupConfig keys (`consumer.*`, "
        "`share.*`; KIP-1240's `share.delivery.count.limit` and "
        "`share.partition.max.record.locks`; no `streams.*`), each bounded by the broker's "
        "`group.consumer.min/max.*` and `group.share.min/max.*` keys, unknown keys "
        "INVALID_CONFIG \"Unknown group config name\", stored in the metadata log; ALTER_CONFIGS "
        "on the group.",
    45: "Reassignments by the controller (adding replicas, then the ISR, then removing).",
    46: "The reassignments in progress.",
    47: "Deletes a group's committed offsets of partitions it does not consume."
        " With an authorizer: DELETE on the group (top-level GROUP_AUTHORIZATION_FAILED) and READ "
        "on each topic.",
    29: "The ACLs of the metadata log (Kafka's AclBindingFilter: resource type ANY, pattern "
        "type ANY or MATCH, null name, principal or host), grouped by resource; a cluster broker "
        "answers from its own metadata image. DESCRIBE on the cluster "
        "(CLUSTER_AUTHORIZATION_FAILED); without an authorizer SECURITY_DISABLED; a filter with "
        "an UNKNOWN part INVALID_REQUEST. v0 is gone from Kafka 4.",
    30: "Kafka's AclControlManager rules per ACL (INVALID_REQUEST for a CLUSTER not named "
        "kafka-cluster, an empty name, UNKNOWN/ANY codes, MATCH/ANY patterns); an ACL that "
        "exists succeeds and is written once. ALTER on the cluster "
        "(CLUSTER_AUTHORIZATION_FAILED per ACL); without an authorizer SECURITY_DISABLED. A "
        "single node writes its metadata log; a cluster broker forwards to the active "
        "controller, which commits AccessControlEntryRecords through Raft.",
    31: "Each filter deletes every ACL it matches and lists them (one "
        "RemoveAccessControlEntryRecord per ACL); an UNKNOWN part is INVALID_REQUEST for that "
        "filter. ALTER on the cluster; without an authorizer SECURITY_DISABLED. Forwarded to "
        "the active controller in a cluster.",
    48: "Quotas of user, client-id and ip entities (a null name is the type's `<default>`) "
        "from the metadata log; match types exact, default and any-specified, `strict`; "
        "Kafka's filter errors (INVALID_REQUEST, UNSUPPORTED_VERSION for another entity type). "
        "DESCRIBE_CONFIGS on the cluster.",
    49: "Kafka's ClientQuotaControlManager rules (entity types and combinations, keys "
        "producer_byte_rate, consumer_byte_rate, request_percentage, controller_mutation_rate, "
        "connection_creation_rate for ip, integral values, > 0); only changes are written; "
        "`validate_only`. ALTER_CONFIGS on the cluster. Forwarded to the active controller in "
        "a cluster. The quota manager reads the result (`broker.security_image.quotas`).",
    50: "Mechanisms and iterations per user (never salts or keys); RESOURCE_NOT_FOUND for a "
        "user without credentials, DUPLICATE_RESOURCE for a user asked twice; no users: "
        "every user. DESCRIBE on the cluster.",
    51: "SCRAM-SHA-256/512 credentials stored salted (salt, StoredKey, ServerKey, iterations "
        "4096-16384) as UserScramCredentialRecords; Kafka's errors (DUPLICATE_RESOURCE, "
        "UNACCEPTABLE_CREDENTIAL, UNSUPPORTED_SASL_MECHANISM, RESOURCE_NOT_FOUND). ALTER on "
        "the cluster. Forwarded to the active controller in a cluster; `spool storage format "
        "--add-scram` gives a new cluster its first credentials.",
    55: "Leader, epoch, high watermark, voters' and observers' log end offsets; v2 nodes "
        "and directory ids.",
    57: "Finalized feature levels (`spool.cluster.features`: metadata.version 3.6-IV2 only, "
        "transaction.version 0-2; group.version, kraft.version and the others at 0) with "
        "Kafka's checks; a cluster broker forwards it to the active controller. v0 "
        "`allow_downgrade`, v1+ `upgrade_type` and `validate_only`, v2 no per-feature "
        "results.",
    68: "KIP-848 consumer groups (`group.protocol=consumer`): member and group epochs, server "
        "assignors (`group.consumer.assignors`, `uniform`/`range`), revocation before "
        "assignment, static members (epoch -2 leave, UNRELEASED_INSTANCE_ID), session and "
        "rebalance timeouts, topic metadata changes; v1: client member ids (KIP-1082) and "
        "regex subscriptions (RE2/J syntax, full match) resolved by the broker; online upgrade "
        "and downgrade with classic members (`group.consumer.migration.policy`). With an authorizer: READ on the group, DESCRIBE on the subscribed topics.",
    69: "State, group and assignment epochs, assignor, members with their current and "
        "target assignments; v1 member type. With an authorizer: DESCRIBE on the group and "
        "on its topics; authorized operations.",
    71: "KIP-714: subscriptions from the CLIENT_METRICS resources (metrics, interval.ms, "
        "match on client id, software, address, port), Kafka's throttling.",
    72: "KIP-714: pushed OTLP metrics (any compression) decoded and kept in memory "
        "(`spool.telemetry.retention.ms`), read at the admin endpoint or `spool telemetry "
        "show`; Kafka's errors (UNKNOWN_SUBSCRIPTION_ID, TELEMETRY_TOO_LARGE...).",
    74: "v0 client metrics resources; v1 (KIP-1142) topics, brokers, broker loggers, client "
        "metrics and groups (those with group configs) by type.",
    60: "Brokers with their endpoints on the listener asked; v1 `endpoint_type`: controllers "
        "asked of a broker listener is MISMATCHED_ENDPOINT_TYPE; v2 fenced brokers "
        "(KIP-1073); authorized operations (all, no authorizer).",
    61: "Active producers of a partition from its producer state."
        " With an authorizer: READ on each topic (TOPIC_AUTHORIZATION_FAILED per partition).",
    65: "A transactional id's state, producer, epoch, timeout and partitions."
        " With an authorizer: DESCRIBE on each transactional id "
        "(TRANSACTIONAL_ID_AUTHORIZATION_FAILED); topics it may not DESCRIBE left out.",
    66: "State and producer id filters; v1 duration filter; v2 KIP-1152 transactional id "
        "pattern (the whole id must match; one that does not compile is "
        "INVALID_REGULAR_EXPRESSION)."
        " With an authorizer: only the transactional ids the principal may DESCRIBE.",
    75: "Paginated topics and partitions (KIP-966), `response_partition_limit` clamped to "
        "1-2000; no ELR; authorized operations (all, no authorizer)."
        " With an authorizer: topics the principal may not DESCRIBE left out, the named ones "
        "TOPIC_AUTHORIZATION_FAILED after the rest.",
    52: "Raft (KIP-595/853): elections of the controller quorum.",
    53: "Raft: a new leader announces its epoch.",
    54: "Raft: a resigning leader hands over.",
    56: "A partition leader's ISR change, decided by the controller.",
    59: "Raft: a follower too far behind fetches a metadata snapshot.",
    62: "A broker registers with its listeners, rack and supported features.",
    63: "Liveness and fencing of brokers; controlled shutdown.",
    64: "Removes a broker's registration.",
    67: "Blocks of producer ids for the brokers' InitProducerId.",
    78: "KIP-932 share fetch on the partition leader: share sessions (epochs, "
        "`group.share.max.share.sessions`, ended with their connection), records acquired per "
        "member with delivery counts and a lock of `share.record.lock.duration.ms`, whole "
        "batches with sendfile, long polling on appends and released records, `max_records`, "
        "piggy-backed acknowledgements; v2: `share_acquire_mode` record_limit cuts a batch at "
        "`max_records`, `is_renew_ack` fetches nothing, `batch_size` unused, RENEW "
        "acknowledgements INVALID_REQUEST."
        " With an authorizer: READ on the group, READ on each topic.",
    79: "Acknowledgements (ACCEPT, RELEASE, REJECT, GAP) in a share session, written through "
        "the share-group state persister before the answer; -1 closes the session and releases "
        "the member's records; v2 RENEW unsupported (INVALID_REQUEST)."
        " With an authorizer: READ on the group, READ on each topic.",
    83: "Share coordinator (KIP-932), broker to broker: a ShareSnapshot with the new state "
        "epoch and start offset; FENCED_STATE_EPOCH below the stored one. NOT_COORDINATOR "
        "unless this broker leads the key's `__share_group_state` partition. With an "
        "authorizer: CLUSTER_ACTION (CLUSTER_AUTHORIZATION_FAILED).",
    84: "Share coordinator: the state (epochs, start offset, state batches); a newer leader "
        "epoch is recorded, an older one FENCED_LEADER_EPOCH; never written: "
        "UNKNOWN_TOPIC_OR_PARTITION. With an authorizer: CLUSTER_ACTION.",
    85: "Share coordinator: the batches merged into the state as Kafka's "
        "PersisterStateBatchCombiner (ShareUpdate records, a ShareSnapshot every "
        "`share.coordinator.snapshot.update.records.per.snapshot`); fencing on state and leader "
        "epochs; v1 `delivery_complete_count` ignored. With an authorizer: CLUSTER_ACTION.",
    86: "Share coordinator: tombstones for the key. With an authorizer: CLUSTER_ACTION.",
    87: "Share coordinator: state epoch, leader epoch and start offset; v1 "
        "`delivery_complete_count` is -1 (not tracked). With an authorizer: CLUSTER_ACTION.",
    76: "KIP-932 share group membership: join at epoch 0 with a client-made member id, leave "
        "at -1, epochs (FENCED_MEMBER_EPOCH, the previous epoch accepted), "
        "`share.session.timeout.ms`/`share.heartbeat.interval.ms` (group configs), "
        "`group.share.max.size`/`max.groups`; Kafka 4.2's simple assignor (partitions shared "
        "by ceil(members/partitions) members, balanced, sticky) over the partitions whose "
        "share state is initialized (through the share coordinator, after the first "
        "heartbeat). With an authorizer: READ on the group, DESCRIBE on the subscribed topics.",
    77: "Members, epochs, subscriptions and assignments of share groups (assignor `simple`)."
        " With an authorizer: DESCRIBE on each group.",
    90: "Share-partition start offsets from the share coordinator (-1: no state yet); `lag` "
        "-1. With an authorizer: DESCRIBE on the group and on each topic.",
    91: "An Empty share group's start offsets set again (share state restarted at a new "
        "state epoch); NON_EMPTY_GROUP otherwise. With an authorizer: READ on the group and "
        "on each topic.",
    92: "An Empty share group's share state of whole topics deleted. With an authorizer: "
        "DELETE on the group, READ on each topic.",
}
