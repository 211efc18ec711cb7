"""``spool features``: feature flags, as Kafka's ``kafka-features.sh``.

    spool features describe [--json]
    spool features upgrade   [--metadata 3.6-IV2] [--feature name=level ...] [--dry-run]
    spool features downgrade [--metadata V] [--feature name=level ...] [--unsafe] [--dry-run]
    spool features disable   --feature name ... [--unsafe] [--dry-run]

``describe`` asks the bootstrap broker's ApiVersions (v4) and prints, per feature the
broker supports (by name), Kafka's line::

    Feature: metadata.version  SupportedMinVersion: 3.6-IV2  SupportedMaxVersion: 3.6-IV2  FinalizedVersionLevel: 3.6-IV2  Epoch: 12

(tab-separated; metadata.version levels by their names). The others send one
UpdateFeatures (v0-2; brokers forward it to the active controller) with every update,
upgrade type UPGRADE, SAFE_DOWNGRADE or (``--unsafe``) UNSAFE_DOWNGRADE, ``--dry-run``
as validate-only; ``disable`` is a downgrade to 0. Output per feature, as Kafka's::

    transaction.version was upgraded to 2.          (--dry-run: "can be upgraded to 2.")
    Could not upgrade group.version to 1. <the broker's message>

A request fails whole (Kafka's controller checks every update first), so one refusal
lists every feature as failed; then one ``spool:`` line on stderr ("N out of M
operation(s) failed.") and exit 1. ``--json`` prints ``[{"feature", "level", "error",
"message"}]`` (error: the error's name or null) instead of the lines, then fails the same way. Bad usage (no feature, a malformed name=level, a
feature given twice, an unknown metadata.version) is exit 2.
"""

from __future__ import annotations

from typing import Annotated

import typer

from spool.cli import wire
from spool.cli.common import (
    DEFAULT_BOOTSTRAP,
    AdminTimeout,
    Bootstrap,
    CommandConfigOpt,
    JsonFlag,
    cli_command,
    fail,
    print_json,
)
from spool.cluster import features as ft
from spool.protocol._generated import ApiVersionsRequest, UpdateFeaturesRequest
from spool.protocol._generated.update_features_request import FeatureUpdateKey
from spool.protocol.errors import error_name

app = typer.Typer(help="Describe, upgrade or downgrade feature flags (kafka-features).",
                  no_args_is_help=True)

FeatureOpt = Annotated[list[str] | None, typer.Option(
    "--feature", help="name=level (repeatable; disable: the name only).")]
MetadataOpt = Annotated[str | None, typer.Option(
    "--metadata", help="The metadata.version, e.g. 3.6-IV2 (or 3.6, or its level).")]
DryRun = Annotated[bool, typer.Option("--dry-run", help="Validate only; change nothing.")]
Unsafe = Annotated[bool, typer.Option(
    "--unsafe", help="Allow a downgrade that may lose metadata (UNSAFE_DOWNGRADE).")]


def _level_text(name: str, level: int) -> str:
    return ft.metadata_version_name(level) if name == ft.METADATA_VERSION else str(level)


@app.command()
@cli_command
def describe(json: JsonFlag = False, bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
             timeout: AdminTimeout = 30.0, command_config: CommandConfigOpt = None) -> None:
    """Describe the feature flags the broker supports and the cluster's finalized levels."""

    async def body(admin: wire.WireAdmin):
        return await admin.request(ApiVersionsRequest(client_software_name="spool",
                                                      client_software_version="cli"), 4)

    resp = wire.run(bootstrap, timeout, body)
    final = {f.name: f.max_version_level for f in resp.finalized_features}
    epoch = resp.finalized_features_epoch
    rows = [(f.name, f.min_version, f.max_version, final.get(f.name, 0))
            for f in sorted(resp.supported_features, key=lambda f: f.name)]
    if json:
        print_json([{"feature": n, "supported_min": lo, "supported_max": hi,
                     "finalized_level": lvl, "epoch": epoch if epoch >= 0 else None}
                    for n, lo, hi, lvl in rows])
        return
    for n, lo, hi, lvl in rows:
        print(f"Feature: {n}\tSupportedMinVersion: {_level_text(n, lo)}\t"
              f"SupportedMaxVersion: {_level_text(n, hi)}\t"
              f"FinalizedVersionLevel: {_level_text(n, lvl)}\t"
              f"Epoch: {epoch if epoch >= 0 else '-'}")


def _updates(op: str, metadata: str | None, specs: list[str] | None,
             disable: bool = False) -> dict[str, int]:
    out: dict[str, int] = {}
    if metadata is not None:
        try:
            out[ft.METADATA_VERSION] = ft.parse_metadata_version(metadata)
        except ValueError:
            names = ", ".join(ft.METADATA_VERSION_NAMES[lvl] for lvl in sorted(
                ft.METADATA_VERSION_NAMES) if lvl >= ft.MINIMUM_BOOTSTRAP_METADATA_VERSION)
            fail(f"Unknown metadata.version {metadata}. Supported metadata.version are "
                 f"{names}", 2)
    for spec in specs or []:
        if disable:
            name, level = spec.strip(), 0
        else:
            name, eq, text = spec.partition("=")
            name, text = name.strip(), text.strip()
            if not eq:
                fail(f"Can't parse feature=level string {spec}: equals sign not found.", 2)
            try:
                level = int(text)
            except ValueError:
                fail(f"Can't parse feature=level string {spec}: unable to parse {text} as a "
                     f"short.", 2)
        if name in out:
            fail(f"Feature {name} was specified more than once.", 2)
        out[name] = level
    if not out:
        fail(f"You must specify at least one feature to {op}", 2)
    return out


def _update(op: str, updates: dict[str, int], kind: int, dry_run: bool, bootstrap: str,
            timeout: float, json: bool = False) -> None:
    req = UpdateFeaturesRequest(
        timeout_ms=int(timeout * 1000), validate_only=dry_run,
        feature_updates=[FeatureUpdateKey(feature=n, max_version_level=lvl, upgrade_type=kind,
                                          allow_downgrade=kind != ft.UPGRADE)
                         for n, lvl in updates.items()])

    async def body(admin: wire.WireAdmin):
        if dry_run and admin.version(req.API_KEY, 2) < 1:
            fail("the broker's UpdateFeatures has no validate-only (v0)", 1)
        return await admin.request(req, 2)

    resp = wire.run(bootstrap, timeout, body)
    per_feature = {r.feature: (r.error_code, r.error_message) for r in resp.results or []}
    failures = 0
    docs = []
    for name in sorted(updates):
        level = updates[name]
        code, message = (resp.error_code, resp.error_message) if resp.error_code \
            else per_feature.get(name, (0, None))
        docs.append({"feature": name, "level": level, "error": error_name(code) if code else None,
                     "message": (message or None) if code else None})
        what = f"disable {name}" if op == "disable" else f"{op} {name} to {level}"
        if json:
            failures += bool(code)
        elif code:
            failures += 1
            print(f"{'Can not' if dry_run else 'Could not'} {what}. "
                  f"{message or wire.error_text(code)}")
        else:
            done = "disabled." if op == "disable" else f"{op}d to {level}."
            print(f"{name} {'can be' if dry_run else 'was'} {done}")
    if json:
        print_json(docs)
    if failures:
        fail(f"{failures} out of {len(updates)} operation(s) failed.", 1)


@app.command()
@cli_command
def upgrade(metadata: MetadataOpt = None, feature: FeatureOpt = None, dry_run: DryRun = False,
            bootstrap: Bootstrap = DEFAULT_BOOTSTRAP, timeout: AdminTimeout = 30.0,
            command_config: CommandConfigOpt = None, json: JsonFlag = False) -> None:
    """Upgrade one or more feature flags."""
    _update("upgrade", _updates("upgrade", metadata, feature), ft.UPGRADE, dry_run, bootstrap,
            timeout, json)


@app.command()
@cli_command
def downgrade(metadata: MetadataOpt = None, feature: FeatureOpt = None, unsafe: Unsafe = False,
              dry_run: DryRun = False, bootstrap: Bootstrap = DEFAULT_BOOTSTRAP,
              timeout: AdminTimeout = 30.0, command_config: CommandConfigOpt = None,
              json: JsonFlag = False) -> None:
    """Downgrade one or more feature flags."""
    _update("downgrade", _updates("downgrade", metadata, feature),
            ft.UNSAFE_DOWNGRADE if unsafe else ft.SAFE_DOWNGRADE, dry_run, bootstrap, timeout,
            json)


@app.command()
@cli_command
def disable(feature: FeatureOpt = None, unsafe: Unsafe = False, dry_run: DryRun = False,
            bootstrap: Bootstrap = DEFAULT_BOOTSTRAP, timeout: AdminTimeout = 30.0,
            command_config: CommandConfigOpt = None, json: JsonFlag = False) -> None:
    """Disable feature flags (a downgrade to level 0)."""
    _update("disable", _updates("disable", None, feature, disable=True),
            ft.UNSAFE_DOWNGRADE if unsafe else ft.SAFE_DOWNGRADE, dry_run, bootstrap, timeout,
            json)
