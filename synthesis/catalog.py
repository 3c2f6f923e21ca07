"""The capability catalog: what kinds of shell-and-files work the built-in generators exercise.

A capability is a workflow skeleton (the steps an agent must carry out) that stays fixed while the
domain changes, so the agent cannot lean on surface cues. Each capability has one stdlib skeleton in
synthesis/builtin/<name>.py; synthesis (synthesis/synthesize.py) samples capabilities from here.
"""

from __future__ import annotations

from dataclasses import dataclass


class UnknownCapabilityError(KeyError):
    """A capability name that is not in the catalog."""


@dataclass(frozen=True)
class Capability:
    name: str
    description: str  # one line, shown to planners and in reports
    title: (
        str  # generator title template; {entities}, {measure}, {domain} are filled from the domain
    )
    steps: tuple[str, ...]  # the workflow skeleton, in order


CAPABILITIES: dict[str, Capability] = {
    c.name: c
    for c in (
        Capability(
            "reconciliation",
            "Sum an event ledger per entity and reconcile it against a separately reported statement.",
            "Reconcile {measure} ledgers against reported statements for {entities} ({domain})",
            (
                "resolve entities",
                "clean the ledger",
                "sum per entity",
                "join the statement",
                "flag differences",
            ),
        ),
        Capability(
            "cross_source_audit",
            "Audit observed activity against declared limits held in another source and list violations.",
            "Audit observed {measure} against declared limits for {entities} ({domain})",
            (
                "resolve entities",
                "clean observations",
                "peak per entity",
                "join declared limits",
                "list findings",
            ),
        ),
        Capability(
            "multi_document_merge",
            "Merge dated partial-update documents into one current record per entity with a precedence rule.",
            "Merge dated update documents into current {entities} records ({domain})",
            (
                "collect documents",
                "order by date and precedence",
                "apply updates per field",
                "resolve entities",
                "write merged records",
            ),
        ),
        Capability(
            "domain_calculation",
            "Compute a factor-weighted domain metric per entity from events and a category rate table.",
            "Compute factor-weighted {measure} for {entities} and compare them within groups ({domain})",
            (
                "resolve entities",
                "clean events",
                "look up category factors",
                "compute weighted totals",
                "compute group shares",
            ),
        ),
        Capability(
            "entity_resolution",
            "Match free-text intake records to a registry by normalised name and aggregate per real entity.",
            "Resolve duplicate intake records to registered {entities} ({domain})",
            (
                "normalise names",
                "match within group",
                "aggregate per registry entity",
                "count unmatched",
            ),
        ),
        Capability(
            "time_window_aggregation",
            "Bucket dated events into calendar months per group and aggregate counts and totals.",
            "Aggregate monthly {measure} per group for {entities} ({domain})",
            (
                "resolve entities",
                "clean events",
                "assign calendar windows",
                "aggregate per group and window",
                "find the peak",
            ),
        ),
        Capability(
            "anomaly_flagging",
            "Flag readings that deviate from their entity's median by more than a stated fraction.",
            "Flag anomalous {measure} readings for {entities} ({domain})",
            (
                "resolve entities",
                "clean readings",
                "median per entity",
                "compare each reading",
                "list anomalies",
            ),
        ),
        Capability(
            "unit_schema_normalisation",
            "Normalise readings from sources with different schemas, date formats and units into one table.",
            "Normalise {measure} readings from mismatched sources for {entities} ({domain})",
            (
                "map each source's columns",
                "parse dates",
                "convert units",
                "resolve entities",
                "write one table",
            ),
        ),
    )
}


def capability_names() -> list[str]:
    """Catalog order (stable), for round-robin synthesis."""
    return list(CAPABILITIES)


def get_capability(name: str) -> Capability:
    if name not in CAPABILITIES:
        raise UnknownCapabilityError(
            f"unknown capability {name!r}; choose one of {', '.join(CAPABILITIES)} (synthesis/catalog.py)"
        )
    return CAPABILITIES[name]
