"""The one table of feature flags: what Kafka 4.2 defines, what Spool claims, how levels change.

A feature is a name with integer levels; the cluster *finalizes* one level of each
(``FeatureLevelRecord`` in the metadata log: ``spool.cluster.image`` on a cluster,
``spool.storage.metadata`` on a single node; an absent feature is at level 0).
Every node *supports* a range of levels; ApiVersions (v3+) reports both, BrokerRegistration
sends the supported ranges, UpdateFeatures changes finalized levels by Kafka's rules.

Kafka 4.2's features, and Spool's claim (``FEATURES``)::

    feature                           Kafka 4.2  Spool claims  level meanings
    metadata.version                  7-...*     14 (3.6-IV2)  the metadata records' format
    kraft.version                     0-1        0             1: dynamic quorum (KIP-853)
    transaction.version               0-2        0-2           1: flexible transaction log
                                                               records; 2: KIP-890 part 2
    group.version                     0-1        0             1: KIP-848 consumer groups
    eligible.leader.replicas.version  0-1        0             1: ELR (KIP-966)
    share.version                     0-1        0             1: share groups (KIP-932)
    streams.version                   0-1        0             1: streams groups (KIP-1071)

    * from 3.3-IV3 (7); the levels after 4.0-IV3 (25) are 4.1's and 4.2's, which this
      table does not name (they are shown as numbers).

A level is claimed only where Spool implements what it means: metadata.version stays
at 3.6-IV2 (Spool writes its records at that level's formats: no directory
assignment, KIP-858, nor ELR, KIP-966), so 14 is the only level it supports; the
quorum's voters are static (kraft.version 0, reported from the quorum, never a
FeatureLevelRecord); KIP-848, share and streams groups are other issues' work.
A supported range whose maximum is 0 is not advertised (Kafka's ``BrokerFeatures``);
finalized level 0 is not listed either (ApiVersionsResponse drops them).

A new cluster (the first active controller, on an empty log) and a new single node
finalize ``bootstrap_levels()``: metadata.version 14 and each feature's ``bootstrap``
level (Kafka's ``Features.defaultValue`` at metadata.version 3.6-IV2: 0 for all).

Changing levels (``plan_update``, Kafka's ``FeatureControlManager.updateFeature``):
every update is checked, the first failure fails the whole request with
INVALID_UPDATE_VERSION ("Invalid update version L for feature F. <reason>"), nothing is
written; otherwise one FeatureLevelRecord per update (level 0 removes the feature).

- upgrade type UNKNOWN (not 1-3): refused; a level below 0: refused;
- the level must be in the local controller's supported range and every registered
  broker's ("Local controller N only supports versions lo-hi" / "Broker B does not
  support this feature."); an unknown feature is supported at 0 only;
- a lower level than finalized needs SAFE_DOWNGRADE or UNSAFE_DOWNGRADE; a higher one
  needs UPGRADE ("Can't downgrade to a newer version.");
- metadata.version: never below 3.3-IV0, and a downgrade that crosses a metadata format
  change is refused (Spool supports one level, so both are moot until it supports more);
- other features: level >= 1 needs metadata.version >= 3.3-IV0, plus the feature's
  dependencies (none among the levels Spool claims).

``finalized_level(view, name)`` is the one call for code that acts on a level (the
transaction coordinator reads ``transaction.version`` with it): ``view`` is anything
with ``finalized_features()`` (the broker's ``MetadataView``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from spool.protocol.errors import Errors, KafkaError

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
ELIGIBLE_LEADER_REPLICAS_VERSION = "eligible.leader.replicas.version"
SHARE_VERSION = "share.version"
STREAMS_VERSION = "streams.version"

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3  # UpdateFeatures' UpgradeType
UPGRADE_TYPES = {"upgrade": UPGRADE, "safe_downgrade": SAFE_DOWNGRADE,
                 "unsafe_downgrade": UNSAFE_DOWNGRADE}

# metadata.version levels by Kafka's names (MetadataVersion: 1 = 3.0-IV1 ... 25 = 4.0-IV3)
METADATA_VERSION_NAMES: dict[int, str] = {
    1: "3.0-IV1", 2: "3.1-IV0", 3: "3.2-IV0", 4: "3.3-IV0", 5: "3.3-IV1", 6: "3.3-IV2",
    7: "3.3-IV3", 8: "3.4-IV0", 9: "3.5-IV0", 10: "3.5-IV1", 11: "3.5-IV2", 12: "3.6-IV0",
    13: "3.6-IV1", 14: "3.6-IV2", 15: "3.7-IV0", 16: "3.7-IV1", 17: "3.7-IV2", 18: "3.7-IV3",
    19: "3.7-IV4", 20: "3.8-IV0", 21: "3.9-IV0", 22: "4.0-IV0", 23: "4.0-IV1", 24: "4.0-IV2",
    25: "4.0-IV3",
}
# levels that changed the metadata format (Kafka's MetadataVersion.didMetadataChange)
_METADATA_CHANGED = frozenset({1, 3, 5, 6, 7, 8, 11, 13, 14, 15, 17, 23})
MINIMUM_BOOTSTRAP_METADATA_VERSION = 4  # 3.3-IV0: the first with FeatureLevelRecord
SPOOL_METADATA_VERSION = 14  # 3.6-IV2


@dataclass(frozen=True)
class Feature:
    """One feature: Kafka 4.2's levels (``levels``: level -> what it enables) and Spool's
    claim (``min_level``..``max_level``; a level is claimed iff it is in that range)."""

    name: str
    levels: Mapping[int, str]
    min_level: int
    max_level: int
    bootstrap: int = 0
    # level -> {feature: lowest level it needs} (Kafka's FeatureVersion.dependencies)
    dependencies: Mapping[int, Mapping[str, int]] = field(default_factory=dict)
    in_metadata_log: bool = True  # False: kraft.version, kept by the quorum itself

    @property
    def kafka_max(self) -> int:
        return max(self.levels)

    def claimed(self, level: int) -> bool:
        return self.min_level <= level <= self.max_level


FEATURES: dict[str, Feature] = {f.name: f for f in (
    Feature(METADATA_VERSION, {lvl: f"metadata format of {n}"
                               for lvl, n in METADATA_VERSION_NAMES.items()},
            SPOOL_METADATA_VERSION, SPOOL_METADATA_VERSION, SPOOL_METADATA_VERSION),
    Feature(KRAFT_VERSION, {0: "static voters (controller.quorum.voters)",
                            1: "dynamic quorum: AddRaftVoter, RemoveRaftVoter (KIP-853)"},
            0, 0, in_metadata_log=False),
    Feature(TRANSACTION_VERSION, {
        0: "the original transaction protocol",
        1: "flexible transaction log records (KIP-890)",
        2: "the second transaction protocol: epoch bumped every transaction, partitions "
           "added implicitly by Produce (KIP-890 part 2)"}, 0, 2),
    Feature(GROUP_VERSION, {0: "classic groups only",
                            1: "the consumer rebalance protocol (KIP-848)"}, 0, 0),
    Feature(ELIGIBLE_LEADER_REPLICAS_VERSION, {0: "no ELR", 1: "eligible leader replicas "
                                               "(KIP-966)"}, 0, 0),
    Feature(SHARE_VERSION, {0: "no share groups", 1: "share groups (KIP-932)"}, 0, 0),
    Feature(STREAMS_VERSION, {0: "no streams groups", 1: "streams groups (KIP-1071)"}, 0, 0),
)}


def supported() -> list[tuple[str, int, int]]:
    """(name, min, max) this node supports, as ApiVersions and BrokerRegistration send them:
    metadata.version and every feature with a claimed level above 0, by name."""
    return sorted((f.name, f.min_level, f.max_level) for f in FEATURES.values()
                  if f.name == METADATA_VERSION or f.max_level > 0)


def supported_range(name: str) -> tuple[int, int]:
    """The levels this node supports of ``name`` ((0, 0) for a feature it does not know)."""
    f = FEATURES.get(name)
    return (0, 0) if f is None else (f.min_level, f.max_level)


def bootstrap_levels() -> dict[str, int]:
    """What a new cluster or single node finalizes besides metadata.version (module doc):
    name -> level, none at 0."""
    return {f.name: f.bootstrap for f in FEATURES.values()
            if f.name != METADATA_VERSION and f.in_metadata_log and f.bootstrap > 0}


def bootstrap_records(finalized: Mapping[str, int]) -> list[tuple[str, int]]:
    """The (feature, level) records a single node writes at start: metadata.version and
    ``bootstrap_levels()`` when its store has no metadata.version yet, else none."""
    if METADATA_VERSION in finalized:
        return []
    return [(METADATA_VERSION, SPOOL_METADATA_VERSION), *sorted(bootstrap_levels().items())]


def finalized_level(view, name: str) -> int:
    """The finalized level of ``name`` in ``view`` (anything with ``finalized_features()``,
    e.g. ``broker.view``); 0 when the feature is not finalized."""
    return int(view.finalized_features().get(name, 0))


def transaction_version(view) -> int:
    """``finalized_level(view, "transaction.version")``: 2 means KIP-890 part 2."""
    return finalized_level(view, TRANSACTION_VERSION)


def metadata_version_name(level: int) -> str:
    return METADATA_VERSION_NAMES.get(level, str(level))


def parse_metadata_version(text: str) -> int:
    """A metadata.version level from ``3.6-IV2``, a release ``3.6`` (its last level) or a
    number. ValueError for anything else."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    for level, name in METADATA_VERSION_NAMES.items():
        if name == text:
            return level
    levels = [lvl for lvl, n in METADATA_VERSION_NAMES.items() if n.split("-")[0] == text]
    if levels:
        return max(levels)
    raise ValueError(f"unknown metadata.version {text!r}")


@dataclass(frozen=True)
class FeatureUpdate:
    """One requested change: ``feature`` to ``level`` with ``upgrade_type`` (1-3)."""

    feature: str
    level: int
    upgrade_type: int = UPGRADE


def _invalid(name: str, level: int, why: str) -> KafkaError:
    return KafkaError(Errors.INVALID_UPDATE_VERSION,
                      f"Invalid update version {level} for feature {name}. {why}")


def _not_supported(level: int, who: str, lo: int, hi: int) -> str | None:
    if lo <= level <= hi:
        return None
    if hi == 0:
        return f"{who} does not support this feature."
    return f"{who} only supports versions {lo}-{hi}"


def plan_update(finalized: Mapping[str, int], updates: Sequence[FeatureUpdate], *,
                node_id: int, brokers: Iterable[tuple[int, Mapping[str, tuple[int, int]]]] = ()
                ) -> list[tuple[str, int]]:
    """The (feature, level) records that make ``updates`` (module doc), or KafkaError
    INVALID_UPDATE_VERSION for the first update that may not be made. ``finalized``: the
    current levels; ``brokers``: (broker id, its supported ranges) of every registered
    broker (this node, ``node_id``, is checked with this table)."""
    brokers = list(brokers)
    proposed = dict(finalized)
    proposed.setdefault(METADATA_VERSION, SPOOL_METADATA_VERSION)
    for u in updates:
        proposed[u.feature] = u.level
    out: list[tuple[str, int]] = []
    for u in updates:
        name, level = u.feature, u.level
        if u.upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
            raise _invalid(name, level, "The controller does not support the given upgrade "
                                        "type.")
        current = finalized.get(name, SPOOL_METADATA_VERSION if name == METADATA_VERSION else 0)
        if level < 0:
            raise _invalid(name, level, "A feature version cannot be less than 0.")
        why = _not_supported(level, f"Local controller {node_id}", *supported_range(name))
        for broker_id, ranges in brokers:
            why = why or _not_supported(level, f"Broker {broker_id}", *ranges.get(name, (0, 0)))
        if why:
            raise _invalid(name, level, why)
        if level < current and u.upgrade_type == UPGRADE:
            raise _invalid(name, level, "Can't downgrade the version of this feature without "
                                        "setting the upgrade type to either safe or unsafe "
                                        "downgrade.")
        if level > current and u.upgrade_type != UPGRADE:
            raise _invalid(name, level, "Can't downgrade to a newer version.")
        if name == METADATA_VERSION:
            _check_metadata_version(current, level, u.upgrade_type)
        else:
            _check_dependencies(name, level, proposed)
        out.append((name, level))
    return out


def _check_metadata_version(current: int, level: int, upgrade_type: int) -> None:
    def refuse(why: str) -> KafkaError:
        return KafkaError(Errors.INVALID_UPDATE_VERSION,
                          f"Invalid metadata.version {level}. {why}")

    if level not in METADATA_VERSION_NAMES:
        raise refuse("Unknown metadata.version.")
    if level < MINIMUM_BOOTSTRAP_METADATA_VERSION:
        raise refuse("Unable to set a metadata.version less than 3.3-IV0")
    if level < current and any(lvl in _METADATA_CHANGED for lvl in range(level + 1, current + 1)):
        if upgrade_type == UNSAFE_DOWNGRADE:
            raise refuse("Unsafe metadata downgrade is not supported in this version.")
        raise refuse("Refusing to perform the requested downgrade because it might delete "
                     "metadata information.")


def _check_dependencies(name: str, level: int, proposed: Mapping[str, int]) -> None:
    feature = FEATURES.get(name)
    if feature is None:
        raise _invalid(name, level, f"Feature {name} not found.")
    if level >= 1 and proposed.get(METADATA_VERSION, 0) < MINIMUM_BOOTSTRAP_METADATA_VERSION:
        raise _invalid(name, level, f"{name} could not be set to {level} because it depends "
                                    f"on metadata.version=4 (3.3-IV0)")
    for dep, needed in feature.dependencies.get(level, {}).items():
        if proposed.get(dep, 0) < needed:
            raise _invalid(name, level, f"{name} could not be set to {level} because it "
                                        f"depends on {dep} level {needed}")
