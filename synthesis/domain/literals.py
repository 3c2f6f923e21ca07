"""String values the code builds, as far as the AST says: SQL statements and error messages.

A value is a tuple of literal text and `Hole`s (an f-string placeholder, a `.format` field, a
`.join` of something unknown). Constants, implicit concatenation (one Constant in the AST), `+`,
f-strings, `"...".format(...)`, names bound to any of these (locals and module constants) and
conditional expressions are followed. Rendering keeps a hole as `{expr}` (error messages); SQL
replaces every hole by a literal that sqlglot can parse in its place (`1`, then `x`, then
`x = 1` for a `SET {...}` list): the statement's tables never hide in a placeholder that way.
"""

from __future__ import annotations

import ast
import string
from dataclasses import dataclass

from clawloop.synthesis.domain.sql import parses

SUBSTITUTES = ("1", "x", "x = 1")  # what an f-string placeholder in SQL is replaced by


@dataclass(frozen=True)
class Hole:
    src: str  # an f-string placeholder's expression, as written


Str = tuple[str | Hole, ...]


def join_parts(parts: list[str | Hole] | tuple[str | Hole, ...]) -> Str:
    out: list[str | Hole] = []
    for p in parts:
        if isinstance(p, str) and out and isinstance(out[-1], str):
            out[-1] = out[-1] + p
        elif p != "":
            out.append(p)
    return tuple(out) if out else ("",)


def render(parts: Str) -> str:
    """The text with each hole written as `{expr}`."""
    return "".join(p if isinstance(p, str) else "{" + p.src + "}" for p in parts)


def sql_text(parts: Str) -> str | None:
    """The statement with holes replaced so that it parses, or None if no substitute does."""
    holes = any(isinstance(p, Hole) for p in parts)
    if not any(isinstance(p, str) and p.strip() for p in parts):
        return None  # nothing but placeholders: the statement is not in the code
    for sub in SUBSTITUTES if holes else ("",):
        text = "".join(p if isinstance(p, str) else sub for p in parts)
        if parses(text):
            return text
    return None


def strings_of(e: ast.expr, local: dict[str, set[Str]], consts: dict[str, str]) -> set[Str]:
    """The values `e` can take (`local`: names bound in the function, `consts`: module level)."""
    if isinstance(e, ast.Constant):
        return {(e.value,)} if isinstance(e.value, str) else set()
    if isinstance(e, ast.JoinedStr):
        parts: list[str | Hole] = []
        for v in e.values:
            if isinstance(v, ast.Constant):
                parts.append(str(v.value))
            elif isinstance(v, ast.FormattedValue):
                inner = (
                    strings_of(v.value, local, consts) if isinstance(v.value, ast.Name) else set()
                )
                if len(inner) == 1 and all(isinstance(x, str) for x in next(iter(inner))):
                    parts.extend(next(iter(inner)))
                else:
                    parts.append(Hole(ast.unparse(v.value)))
        return {join_parts(parts)}
    if isinstance(e, ast.Name):
        if e.id in local:
            return set(local[e.id])
        return {(consts[e.id],)} if e.id in consts else set()
    if isinstance(e, ast.BinOp) and isinstance(e.op, ast.Add):
        left, right = strings_of(e.left, local, consts), strings_of(e.right, local, consts)
        if bool(left) != bool(right):  # "Error: no " + name: the unknown side is a placeholder
            left = left or {(Hole(ast.unparse(e.left)),)}
            right = right or {(Hole(ast.unparse(e.right)),)}
        return {join_parts(a + b) for a in left for b in right}
    if isinstance(e, ast.IfExp):
        return strings_of(e.body, local, consts) | strings_of(e.orelse, local, consts)
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
        base = e.func.value
        if isinstance(base, ast.Constant) and isinstance(base.value, str):
            if e.func.attr == "format":
                return {_format(base.value, e, local, consts)}
            if e.func.attr == "join" and e.args:
                return {_joined(base.value, e.args[0], local, consts)}
    return set()


def _format(
    template: str, call: ast.Call, local: dict[str, set[Str]], consts: dict[str, str]
) -> Str:
    """`template.format(...)` with each field a constant argument's text, else a Hole."""
    keywords = {k.arg: k.value for k in call.keywords if k.arg}
    parts: list[str | Hole] = []
    auto = 0
    for lit, fname, _, _ in string.Formatter().parse(template):
        parts.append(lit)
        if fname is None:
            continue
        if fname == "":
            arg, auto = (call.args[auto] if auto < len(call.args) else None), auto + 1
        elif fname.isdigit():
            arg = call.args[int(fname)] if int(fname) < len(call.args) else None
        else:
            arg = keywords.get(fname)
        found = strings_of(arg, local, consts) if arg is not None else set()
        only = next(iter(found)) if len(found) == 1 else None
        if only is not None and all(isinstance(x, str) for x in only):
            parts.extend(only)
        else:
            parts.append(Hole(fname or "?"))
    return join_parts(parts)


def _joined(sep: str, arg: ast.expr, local: dict[str, set[Str]], consts: dict[str, str]) -> Str:
    """`sep.join([...])` of a literal list or tuple, each item its text or a Hole."""
    if not isinstance(arg, ast.List | ast.Tuple):
        return (Hole(ast.unparse(arg)),)
    parts: list[str | Hole] = []
    for i, item in enumerate(arg.elts):
        if i:
            parts.append(sep)
        found = strings_of(item, local, consts)
        parts.extend(next(iter(found)) if len(found) == 1 else (Hole(ast.unparse(item)),))
    return join_parts(parts)
