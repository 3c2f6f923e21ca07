"""A tool's parameters and schema, from a function signature + docstring or a get_info() literal.

Host side, AST only. The function shape (`def name(state, ...)`) gets its parameter types from
annotations (`str`, `int | None`, `Literal["a", "b"]`, `list[str]`...) or, unannotated, from the
default's type; descriptions from a Google-style "Args:" section; an OpenAI function schema is
built from those, so both shapes hand the agent the same kind of schema. The class shape
(`get_info()` returning a dict literal, the tau-bench shape) is read with `ast.literal_eval`:
its schema is the source of truth for the name, description and parameters.
"""

from __future__ import annotations

import ast
from typing import Any

from clawloop.synthesis.domain.model import DomainError, Param

_SCALARS = {
    "str": "string",
    "int": "integer",
    "float": "number",
    "bool": "boolean",
    "list": "array",
    "List": "array",
    "tuple": "array",
    "Tuple": "array",
    "set": "array",
    "Sequence": "array",
    "Iterable": "array",
    "dict": "object",
    "Dict": "object",
    "Mapping": "object",
}
_JSON_OF_PY = {str: "string", bool: "boolean", int: "integer", float: "number"}
_SECTIONS = ("Args:", "Arguments:", "Parameters:", "Params:")


def _ann_type(ann: ast.expr | None) -> tuple[str, tuple[Any, ...], bool]:
    """(JSON type, enum, optional) of an annotation; ("", (), False) when it says nothing."""
    if ann is None:
        return "", (), False
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):  # "str" forward reference
        try:
            return _ann_type(ast.parse(ann.value, mode="eval").body)
        except SyntaxError:
            return "", (), False
    if isinstance(ann, ast.Constant) and ann.value is None:
        return "null", (), True
    if isinstance(ann, ast.Name | ast.Attribute):
        name = ann.id if isinstance(ann, ast.Name) else ann.attr
        return _SCALARS.get(name, ""), (), False
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        parts = [_ann_type(ann.left), _ann_type(ann.right)]
        real = [p for p in parts if p[0] != "null"]
        kind, enum, _ = real[0] if real else ("", (), False)
        return kind, enum, len(real) < len(parts)
    if isinstance(ann, ast.Subscript):
        head = ann.value.id if isinstance(ann.value, ast.Name) else getattr(ann.value, "attr", "")
        args = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
        if head == "Optional":
            return _ann_type(args[0])[0], _ann_type(args[0])[1], True
        if head == "Union":
            parts = [_ann_type(a) for a in args]
            real = [p for p in parts if p[0] != "null"]
            kind, enum, _ = real[0] if real else ("", (), False)
            return kind, enum, len(real) < len(parts)
        if head == "Literal":
            values = tuple(a.value for a in args if isinstance(a, ast.Constant))
            kind = _JSON_OF_PY.get(type(values[0]), "string") if values else "string"
            return kind, values, False
        return _SCALARS.get(head, ""), (), False
    return "", (), False


def docstring_parts(doc: str) -> tuple[str, dict[str, str]]:
    """(summary: the first paragraph, {param: description} from a Google-style Args section)."""
    lines = doc.expandtabs().splitlines()
    summary = []
    for line in lines:
        if not line.strip() or line.strip() in _SECTIONS:
            break
        summary.append(line.strip())
    params: dict[str, str] = {}
    inside, indent, current, params_indent = False, 0, "", 0
    for line in lines:
        text = line.strip()
        lead = len(line) - len(line.lstrip())
        if text in _SECTIONS:
            inside, indent, current = True, lead, ""
            continue
        if not inside or not text:
            continue
        if lead <= indent and text.endswith(":"):  # the next section (Returns:, Raises:)
            inside = False
            continue
        head, sep, rest = text.partition(":")
        name = head.split("(")[0].strip()
        if sep and name.isidentifier() and (current == "" or lead <= params_indent):
            params_indent = lead
            current = name
            params[name] = rest.strip()
        elif current:
            params[current] = (params[current] + " " + text).strip()
    return " ".join(summary), params


def function_params(node: ast.FunctionDef | ast.AsyncFunctionDef, rel: str) -> tuple[Param, ...]:
    """The parameters after the state argument, from annotations, defaults and the docstring."""
    a = node.args
    if a.vararg or a.kwarg:
        star = f"*{a.vararg.arg}" if a.vararg else f"**{a.kwarg.arg}"  # type: ignore[union-attr]
        raise DomainError(
            f"{rel}: tool {node.name!r} takes {star}, so its parameters cannot be known; "
            "name every parameter in the signature"
        )
    positional = a.posonlyargs + a.args
    if not positional:
        raise DomainError(
            f"{rel}: tool {node.name!r} takes no state argument; make the state its first "
            "parameter, or prefix the name with _ if it is a helper"
        )
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(a.defaults)) + list(
        a.defaults
    )
    pairs = list(zip(positional, defaults, strict=True))[1:] + list(
        zip(a.kwonlyargs, a.kw_defaults, strict=True)
    )
    _, docs = docstring_parts(ast.get_docstring(node) or "")
    out = []
    for arg, default in pairs:
        kind, enum, optional = _ann_type(arg.annotation)
        if not kind and isinstance(default, ast.Constant) and default.value is not None:
            kind = _JSON_OF_PY.get(type(default.value), "string")
        out.append(
            Param(
                name=arg.arg,
                type=kind or "string",
                required=default is None and not optional,
                description=docs.get(arg.arg, ""),
                enum=enum,
            )
        )
    return tuple(out)


def build_schema(name: str, description: str, params: tuple[Param, ...]) -> dict[str, Any]:
    """The OpenAI function schema of a function-shaped tool."""
    props: dict[str, Any] = {}
    for p in params:
        spec: dict[str, Any] = {"type": p.type}
        if p.description:
            spec["description"] = p.description
        if p.enum:
            spec["enum"] = list(p.enum)
        props[p.name] = spec
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": props,
                "required": [p.name for p in params if p.required],
            },
        },
    }


def literal_schema(get_info: ast.FunctionDef, rel: str, cls: str) -> dict[str, Any]:
    """The dict literal get_info() returns (the first `return {...}` in its body)."""
    for node in ast.walk(get_info):
        if isinstance(node, ast.Return) and node.value is not None:
            try:
                value = ast.literal_eval(node.value)
            except (ValueError, SyntaxError, TypeError) as exc:
                raise DomainError(
                    f"{rel}: {cls}.get_info() must return a dict literal (no names or calls "
                    f"inside): {exc}; write the schema out as a literal"
                ) from exc
            if not isinstance(value, dict):
                break
            return value
    raise DomainError(f"{rel}: {cls}.get_info() returns no dict literal; return the schema dict")


def schema_params(info: dict[str, Any], rel: str, cls: str) -> tuple[str, str, tuple[Param, ...]]:
    """(name, description, params) of an OpenAI function schema ({"type": "function", ...})."""
    fn = info.get("function", info) if isinstance(info.get("function"), dict) else info
    name = fn.get("name")
    if not isinstance(name, str) or not name.isidentifier():
        raise DomainError(
            f"{rel}: {cls}.get_info() has no function name (got {name!r}); set "
            '"function": {"name": "<identifier>", ...}'
        )
    parameters = fn.get("parameters")
    if not isinstance(parameters, dict) or not isinstance(parameters.get("properties", {}), dict):
        raise DomainError(
            f"{rel}: {cls}.get_info() for {name!r} has no parameters object; add "
            '"parameters": {"type": "object", "properties": {...}, "required": [...]}'
        )
    required = set(parameters.get("required", []))
    params = []
    for pname, spec in parameters.get("properties", {}).items():
        spec = spec if isinstance(spec, dict) else {}
        kind = spec.get("type", "string")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "string")
        params.append(
            Param(
                name=pname,
                type=str(kind),
                required=pname in required,
                description=str(spec.get("description", "")),
                enum=tuple(spec.get("enum", ())),
            )
        )
    return name, str(fn.get("description", "")), tuple(params)
