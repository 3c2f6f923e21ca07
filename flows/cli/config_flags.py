"""Command-line flags generated from a settings model (pydantic, the project's one config style):
one flag per field, its help the field's description, its default the field's default, so a
setting added to the model is a flag of every verb built on it, with no second copy of its
default.

    add_config_flags(parser, RolloutConfig, skip={"band"}, names={"workers": ["--concurrency"]})
    cfg = config_from_args(args, RolloutConfig, skip={"band"}, band=(1, 5))
    add_config_flags(parser, ExecutionSettings, only={"runner"}, overrides="execution")

A field's json_schema_extra may also give `choices` (else a Literal annotation's values are the
choices), `type` (an argparse type, e.g. a run-id checker) and `switch` (a bool flag that takes
no value, `--passed-only`); a field with no default is a required flag.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticUndefined


def parse_bool(text: str) -> bool:
    low = text.lower()
    if low in ("1", "true", "yes", "on"):
        return True
    if low in ("0", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def flag_type(annotation: Any) -> Callable[[str], Any]:
    """The argparse type of a field annotated `annotation`: int, float, bool (true/false words)
    or str; X | None is X's, a Literal its values' type."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) is typing.Literal:
        annotation = type(args[0]) if args else str
    elif typing.get_origin(annotation) in (typing.Union, types.UnionType) and len(args) == 1:
        annotation = args[0]
    kinds = {int: int, float: float, str: str, bool: parse_bool}
    return kinds.get(annotation, str)


@dataclass(frozen=True)
class FlagField:
    """What a flag needs of one field of a settings model."""

    name: str
    annotation: Any
    default: Any
    required: bool
    help: str
    choices: tuple[Any, ...] | None = None
    type: Callable[[str], Any] | None = None
    switch: bool = False


def flag_fields(cls: type[BaseModel]) -> list[FlagField]:
    """The fields of settings model `cls`, in order."""
    out = []
    for name, info in cls.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        literal = typing.get_origin(info.annotation) is typing.Literal
        if "choices" in extra:
            choices = tuple(extra["choices"])
        else:
            choices = typing.get_args(info.annotation) if literal else None
        out.append(
            FlagField(
                name=name,
                annotation=info.annotation,
                default=None if info.default is PydanticUndefined else info.default,
                required=info.is_required(),
                help=info.description or "",
                choices=choices,
                type=extra.get("type"),
                switch=bool(extra.get("switch", False)),
            )
        )
    return out


def add_config_flags(
    parser: argparse.ArgumentParser,
    cls: type[BaseModel],
    *,
    skip: Collection[str] = (),
    only: Collection[str] | None = None,
    names: Mapping[str, list[str]] | None = None,
    defaults: Mapping[str, Any] | None = None,
    overrides: str | None = None,
) -> None:
    """One flag per field of `cls` but `skip` (or only those in `only`): `--field-name` unless
    `names` gives the verb's own spelling, dest the field name, default the field's (or
    `defaults`' where the verb keeps its own), choices from the field's. `overrides`: the flags
    override that section of a run config (e.g. "execution"), so each defaults to None, "not
    given", and its help says whose value it replaces. A help that names its own default keeps it."""
    names = names or {}
    defaults = defaults or {}
    for f in flag_fields(cls):
        if f.name in skip or (only is not None and f.name not in only):
            continue
        flags = names.get(f.name, ["--" + f.name.replace("_", "-")])
        if overrides is not None:
            where = f"{overrides}.{f.name}" if overrides else f.name
            default, note = None, f" (overrides the config's {where})"
        else:
            default = defaults.get(f.name, f.default)
            quiet = f.required or f.switch or "default" in f.help
            note = "" if quiet else f" (default: {default})"
        if f.switch:
            parser.add_argument(*flags, dest=f.name, action="store_true", help=f.help + note)
            continue
        extra = {"choices": list(f.choices)} if f.choices is not None else {}
        parser.add_argument(
            *flags,
            dest=f.name,
            type=f.type or flag_type(f.annotation),
            default=default,
            required=f.required and overrides is None,
            help=f.help + note,
            **extra,
        )


def config_from_args(
    args: argparse.Namespace, cls: type[BaseModel], *, skip: Collection[str] = (), **values: Any
):
    """`cls` from the flags add_config_flags added (fields in `skip` from `values`). A value the
    class refuses is a ValueError naming the setting (a model's errors as one line each)."""
    flags = {f.name: getattr(args, f.name) for f in flag_fields(cls) if f.name not in skip}
    try:
        return cls(**flags, **values)
    except ValidationError as exc:
        raise ValueError(
            "; ".join(
                "".join(f"{part}: " for part in e["loc"]) + e["msg"].removeprefix("Value error, ")
                for e in exc.errors()
            )
        ) from None
