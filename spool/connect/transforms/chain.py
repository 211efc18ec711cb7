"""A connector's transformation chain, from Kafka Connect's keys.

Keys (the connector's own properties):

- ``transforms``: aliases, in order (``Duplicate alias provided.`` when one repeats);
- ``transforms.<t>.type``: the transformation's class (``plugins.load(.., "transformation")``);
- ``transforms.<t>.<key>``: its configuration (the prefix stripped, as Kafka's
  ``originalsWithPrefix``; ``type`` included, ``predicate``/``negate`` not);
- ``transforms.<t>.predicate``: an alias from ``predicates``; ``transforms.<t>.negate``
  (false): apply the transformation when the predicate is false instead;
- ``predicates``, ``predicates.<p>.type``, ``predicates.<p>.<key>``: likewise.

``TransformationChain.from_config(props, plugins)`` builds and configures every stage or
raises ``api.ConfigError`` whose ``errors`` map each bad key to Kafka's messages;
``config_errors(props, plugins)`` answers the same without raising (what
``/config/validate`` reports). ``apply(record)`` runs the stages in order, each only when
its predicate (xor ``negate``) holds, and returns None as soon as one drops the record.
``close()`` closes every transformation and predicate. A chain is used by one task's
thread at a time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from spool.connect import api

if TYPE_CHECKING:
    from spool.connect.plugins import Plugins


@dataclass
class Stage:
    alias: str
    transformation: api.Transformation
    predicate: api.Predicate | None = None
    negate: bool = False

    def apply(self, record: api.ConnectRecord) -> api.ConnectRecord | None:
        if self.predicate is not None and self.predicate.test(record) == self.negate:
            return record
        return self.transformation.apply(record)


class TransformationChain:
    def __init__(self, stages: list[Stage] | None = None,
                 predicates: dict[str, api.Predicate] | None = None) -> None:
        self.stages = list(stages or [])
        self.predicates = dict(predicates or {})

    @classmethod
    def from_config(cls, props: dict[str, str], plugins: Plugins) -> TransformationChain:
        errors, chain = _build(props, plugins)
        if errors:
            if chain is not None:
                chain.close()
            raise api.ConfigError(errors)
        assert chain is not None
        return chain

    def apply(self, record: api.ConnectRecord) -> api.ConnectRecord | None:
        for stage in self.stages:
            out = stage.apply(record)
            if out is None:
                return None
            record = out
        return record

    def close(self) -> None:
        for stage in self.stages:
            _quietly(stage.transformation.close)
        for p in self.predicates.values():
            _quietly(p.close)

    def __len__(self) -> int:
        return len(self.stages)


def config_errors(props: dict[str, str], plugins: Plugins) -> dict[str, list[str]]:
    """Every error of the transforms/predicates keys of ``props`` (empty: all good)."""
    errors, chain = _build(props, plugins)
    if chain is not None:
        chain.close()
    return errors


def aliases(props: dict[str, Any], key: str) -> list[str]:
    raw = props.get(key)
    if raw is None:
        return []
    if isinstance(raw, (list, tuple)):
        return [str(a).strip() for a in raw if str(a).strip()]
    return [a.strip() for a in str(raw).split(",") if a.strip()]


def _prefixed(props: dict[str, Any], prefix: str) -> dict[str, Any]:
    return {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix)}


def _build(props: dict[str, Any],
           plugins: Plugins) -> tuple[dict[str, list[str]], TransformationChain | None]:
    errors: dict[str, list[str]] = {}

    def err(key: str, msg: str) -> None:
        errors.setdefault(key, []).append(msg)

    chain = TransformationChain()
    for group, kind in (("predicates", "predicate"), ("transforms", "transformation")):
        names = aliases(props, group)
        if len(set(names)) != len(names):
            err(group, f"Invalid value [{', '.join(names)}] for configuration {group}: "
                       "Duplicate alias provided.")
        for alias in dict.fromkeys(names):
            prefix = f"{group}.{alias}."
            own = _prefixed(props, prefix)
            obj = _instance(plugins, own.get("type"), kind, prefix + "type", err)
            if obj is None:
                continue
            values = obj.config_def().validate(own)
            bad = {n: v.errors for n, v in values.items() if v.errors}
            for n, msgs in bad.items():
                for m in msgs:
                    err(prefix + n, m.replace(f"configuration {n}:",
                                              f"configuration {prefix + n}:")
                        .replace(f'"{n}"', f'"{prefix + n}"'))
            if not bad:
                try:
                    obj.configure({k: v for k, v in own.items()
                                   if kind == "predicate" or k not in ("predicate", "negate")})
                except api.ConfigError as e:
                    for n, msgs in e.errors.items():
                        for m in msgs:
                            err(prefix + n if n else prefix + "type", m)
                    continue
                except Exception as e:  # noqa: BLE001 - a plugin's own failure is a config error
                    err(prefix + "type", f"Invalid value {own.get('type')} for configuration "
                                         f"{prefix}type: {type(e).__name__}: {e}")
                    continue
            else:
                continue
            if kind == "predicate":
                chain.predicates[alias] = obj
            else:
                stage = Stage(alias, obj)
                _attach_predicate(stage, own, prefix, chain, props, err)
                chain.stages.append(stage)
    return errors, chain


def _instance(plugins: Plugins, type_name: Any, kind: str, key: str, err: Any) -> Any:
    if type_name is None or not str(type_name).strip():
        err(key, f'Missing required configuration "{key}" which has no default value.')
        return None
    try:
        klass = plugins.load(str(type_name), kind)
    except api.ConfigError:
        err(key, f"Invalid value {type_name} for configuration {key}: "
                 f"Class {type_name} could not be found.")
        return None
    try:
        return klass()
    except Exception as e:  # noqa: BLE001
        err(key, f"Invalid value {type_name} for configuration {key}: {e}")
        return None


def _attach_predicate(stage: Stage, own: dict[str, Any], prefix: str,
                      chain: TransformationChain, props: dict[str, Any], err: Any) -> None:
    negate = own.get("negate")
    if negate is not None and own.get("predicate") is None:
        err(prefix + "type", f"Config '{prefix}negate' was provided but there is no config "
                             f"'{prefix}predicate' defining a predicate to be negated.")
    if negate is not None:
        text = str(negate).strip().lower()
        if text not in ("true", "false"):
            err(prefix + "negate", f"Invalid value {negate} for configuration {prefix}negate: "
                                   "Expected value to be either true or false")
        stage.negate = text == "true"
    alias = own.get("predicate")
    if alias is None or not str(alias).strip():
        return
    alias = str(alias).strip()
    if alias not in aliases(props, "predicates"):
        err(prefix + "predicate", f"Invalid value {alias} for configuration "
                                  f"{prefix}predicate: This predicate alias is not defined in "
                                  "'predicates'")
        return
    stage.predicate = chain.predicates.get(alias)


def _quietly(fn: Any) -> None:
    try:
        fn()
    except Exception:  # noqa: BLE001, S110 - closing must not hide the first failure
        pass
