"""Command-line flags generated from a settings dataclass: one flag per field, its help the
field's `help` metadata, its default the field's default, so a setting added to the class is a
flag of every verb built on it, with no second copy of its default.

    add_config_flags(parser, RolloutConfig, skip={"band"}, names={"workers": ["--concurrency"]})
    cfg = config_from_args(args, RolloutConfig, skip={"band"}, band=(1, 5))
"""

from __future__ import annotations

import argparse
from collections.abc import Collection, Mapping
from dataclasses import MISSING, fields
from typing import Any


def parse_bool(text: str) -> bool:
    low = text.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def flag_type(annotation: str):
    """The argparse type of a field annotated `annotation` (a string under postponed
    annotations): int, float, bool (true/false words) or str."""
    kinds = {"int": int, "float": float, "str": str, "bool": parse_bool}
    for name, kind in kinds.items():
        if annotation.startswith(name):
            return kind
    return str


def add_config_flags(
    parser: argparse.ArgumentParser,
    cls: type,
    *,
    skip: Collection[str] = (),
    names: Mapping[str, list[str]] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> None:
    """One flag per field of dataclass `cls` but `skip`: `--field-name` unless `names` gives the
    verb's own spelling, dest the field name, default the field's (or `defaults`' where the verb
    keeps its own), choices from the field's `choices` metadata."""
    names = names or {}
    defaults = defaults or {}
    for f in fields(cls):
        if f.name in skip:
            continue
        default = defaults.get(f.name, f.default if f.default is not MISSING else None)
        extra = {"choices": list(f.metadata["choices"])} if "choices" in f.metadata else {}
        parser.add_argument(
            *names.get(f.name, ["--" + f.name.replace("_", "-")]),
            dest=f.name,
            type=flag_type(str(f.type)),
            default=default,
            help=f"{f.metadata.get('help', '')} (default: {default})",
            **extra,
        )


def config_from_args(
    args: argparse.Namespace, cls: type, *, skip: Collection[str] = (), **values: Any
):
    """`cls` from the flags add_config_flags added (fields in `skip` from `values`)."""
    flags = {f.name: getattr(args, f.name) for f in fields(cls) if f.name not in skip}
    return cls(**flags, **values)
