"""The cluster's brain: the metadata image, the controller's state machine, the quorum.

Sans I/O throughout: these modules take records, requests and the time, and return
records to append and replies; the broker process drives them over sockets and a
seeded simulator drives them in tests (DESIGN: decision 9).

    image          MetadataImage / MetadataDelta: metadata records -> immutable snapshots
    local_changes  what a new image asks of one broker (create, lead, follow, delete)
    snapshot       an image written back as records (Raft snapshots)
    controller     QuorumController: broker lifecycle, and the writes below
    controller_apis    wire requests -> controller -> wire responses (Kafka's ControllerApis)
    topic_ops      CreateTopics, CreatePartitions, DeleteTopics, ISR/leader changes
    config_ops     AlterConfigs, IncrementalAlterConfigs
    alter_partition    AlterPartition: ISR changes a partition leader asks for
    elections      ElectLeaders (preferred, unclean), preferred-leader balancing, unclean
                   elections for topics that allow them later
    reassignment   AlterPartitionReassignments / ListPartitionReassignments
    placement      rack-aware striped replica placement
    partition_change   Kafka's PartitionChangeBuilder rules (completing reassignments)
    ops            ControllerConfig, ControllerResult and the broker replies
    raft/          the KRaft quorum: RaftNode (pre-vote, pull replication, snapshots),
                   its messages, log/quorum-state store protocols, in-memory stores
"""
