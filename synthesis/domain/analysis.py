"""What a tool reads, writes, returns and can fail with, from its code (AST only, never run).

The state argument is tracked through the function: every value taken from it (a subscript, a
`.get(...)`, an iteration over `.values()` / `.items()`, an alias by assignment, an argument to a
helper) carries an *origin*: the table it came from and how deep (0 the table, 1 a record, 2 a
field). Then:

- writes: a store / `del` / augmented assignment whose target is a subscript or attribute of a
  value with a table origin, or a mutating method on one (`append pop update setdefault remove
  clear insert extend popitem add discard sort reverse`). `data["orders"][oid]["status"] = x`
  writes `orders`; so does `o = data["orders"][oid]; o["status"] = x`. A *copy* is not the
  state: a new container built from it (a comprehension, `dict(x)`, `list(x)`, `sorted(x)`,
  `x.copy()`, `copy.copy(x)`; `copy.deepcopy(x)` keeps nothing) can be stored into or
  `.update()`d without writing, while what it holds (a record in a list of records) still is
  the state's.
- iteration: `for k, v in t.items()` / `for i, v in enumerate(t)` binds the key or index to no
  origin and the value to the records; `for k in t.keys()` yields keys only.
- reads: any other access to a value with a table origin.
- only a *constant* subscript of the state (or an alias of it) names a table: a local called
  `flight_data` is just a local, and `data[name]` with a non-constant key is an unknown table
  (skipped).
- sqlite: strings passed to `.execute / .executemany / .executescript` on the connection or a
  cursor from it, resolved from constants, implicit concatenation, `+`, `+=` and f-strings
  (placeholders replaced by a literal until sqlglot parses it), then sql.tables_of.
- helpers (any function of the file, a static method of a class in it, a function imported from
  a sibling module in tools/) are followed with the caller's argument origins, once per distinct
  origin set; nested functions and lambdas are read as part of the enclosing body.
- returns: keys of returned dict literals (also through `json.dumps`, `dict(...)`, list
  comprehensions and locals built up by `x["k"] = ...` / `.append({...})`), and the fields of a
  record returned from a table (state.py's field names) or the columns of a returned SELECT row.
- errors: returned strings that start with "Error" and the messages of raised exceptions;
  f-string placeholders are kept as `{expr}`.
"""

from __future__ import annotations

import ast

from clawloop.synthesis.domain.literals import Str, render, sql_text, strings_of
from clawloop.synthesis.domain.parsed import Facts, Module, Origin, Project
from clawloop.synthesis.domain.sql import select_columns, select_sources, tables_of

MUTATORS = {"append", "extend", "insert", "remove", "clear", "update", "sort", "reverse", "add"}
MUTATORS |= {"discard", "pop", "popitem", "setdefault"}
VIEWS = {"values", "items", "keys"}
PROPAGATE = {"reversed", "iter", "filter", "enumerate", "zip"}  # views: the same values
COPIES = {"list", "sorted", "tuple", "set", "frozenset", "copy"}  # new containers of them
SQL_CALLS = {"execute", "executemany", "executescript"}
_MAX_STRINGS = 32


def _first_param(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    args = node.args.posonlyargs + node.args.args
    return args[0].arg if args else None


def analyse(
    project: Project, module: Module, node: ast.FunctionDef | ast.AsyncFunctionDef
) -> Facts:
    """The facts of one tool: its first parameter is the state (a dict, or a connection)."""
    state = _first_param(node)
    kind = "conn" if project.state_format == "sqlite" else "state"
    env = {state: {Origin(kind)}} if state else {}
    facts = _Body(project, module, env).run(node.body)
    tables = set(project.fields)
    facts.reads &= tables
    facts.writes &= tables
    return facts


class _Body:
    """One function body, visited until the origins of its names stop growing."""

    def __init__(self, project: Project, module: Module, env: dict[str, set[Origin]]):
        self.p, self.m = project, module
        self.env: dict[str, set[Origin]] = {k: set(v) for k, v in env.items()}
        self.strs: dict[str, set[Str]] = {}
        self.shapes: dict[str, set[str]] = {}
        self.facts = Facts()
        self.first = True
        self.nested = 0
        self.helper_returns: dict[int, set[str]] = {}  # id(call node) -> the helper's returns

    def run(self, body: list[ast.stmt]) -> Facts:
        for _ in range(4):
            before = {k: frozenset(v) for k, v in self.env.items()}
            self.block(body)
            self.first = False
            if {k: frozenset(v) for k, v in self.env.items()} == before:
                break
        return self.facts

    # statements ---------------------------------------------------------------------------
    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.stmt(stmt)

    def stmt(self, s: ast.stmt) -> None:
        if isinstance(s, ast.Assign | ast.AnnAssign):
            if s.value is None:
                return
            origins = self.eval(s.value)
            targets = s.targets if isinstance(s, ast.Assign) else [s.target]
            for t in targets:
                self.bind(t, s.value, origins)
        elif isinstance(s, ast.AugAssign):
            origins = self.eval(s.value)
            if isinstance(s.target, ast.Name):
                name = s.target.id
                self.env.setdefault(name, set()).update(origins)
                if self.first and isinstance(s.op, ast.Add) and name in self.strs:
                    tails = self.strings(s.value)
                    grown = {a + b for a in self.strs[name] for b in tails}
                    self.strs[name] = set(list(self.strs[name] | grown)[:_MAX_STRINGS])
            else:  # `rec["qty"] += 1` reads the old value, then writes
                self.eval(s.target)
                self.store(s.target)
        elif isinstance(s, ast.For | ast.AsyncFor):
            self.loop_bind(s.target, s.iter)
            self.block(s.body + s.orelse)
        elif isinstance(s, ast.Return):
            if s.value is not None:
                self.returned(s.value)
        elif isinstance(s, ast.Raise):
            if isinstance(s.exc, ast.Call) and s.exc.args:
                self.eval(s.exc)
                for text in self.rendered(s.exc.args[0]):
                    self.facts.errors[text] = None
        elif isinstance(s, ast.Delete):
            for t in s.targets:
                self.store(t)
        elif isinstance(s, ast.With | ast.AsyncWith):
            for item in s.items:
                origins = self.eval(item.context_expr)
                if item.optional_vars is not None:
                    self.bind(item.optional_vars, None, origins)
            self.block(s.body)
        elif isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef):
            self.nested += 1  # a closure: its body reads and writes as if inlined
            self.block(s.body)
            self.nested -= 1
        elif isinstance(s, ast.ClassDef | ast.Import | ast.ImportFrom):
            return
        else:  # if / while / try / match / expression statements: visit what they hold
            for child in ast.iter_child_nodes(s):
                if isinstance(child, ast.stmt):
                    self.stmt(child)
                elif isinstance(child, ast.expr):
                    self.eval(child)
                else:  # except handlers, match cases
                    for sub in ast.iter_child_nodes(child):
                        if isinstance(sub, ast.stmt):
                            self.stmt(sub)
                        elif isinstance(sub, ast.expr):
                            self.eval(sub)

    def bind(self, target: ast.expr, value: ast.expr | None, origins: set[Origin]) -> None:
        if isinstance(target, ast.Name):
            self.env.setdefault(target.id, set()).update(origins)
            if value is not None:
                if self.first:
                    found = self.strings(value)
                    if found:
                        self.strs.setdefault(target.id, set()).update(found)
                self.shapes.setdefault(target.id, set()).update(self.local_shape(value))
        elif isinstance(target, ast.Tuple | ast.List):
            values = value.elts if isinstance(value, ast.Tuple | ast.List) else None
            for i, elt in enumerate(target.elts):
                if values is not None and len(values) == len(target.elts):
                    self.bind(elt, values[i], self.eval(values[i]))
                else:
                    self.bind(elt, None, origins)
        elif isinstance(target, ast.Starred):
            self.bind(target.value, None, origins)
        else:
            self.store(target)

    def store(self, target: ast.expr) -> None:
        """A write through `target` (a subscript / attribute store, a del, an augmented op)."""
        if isinstance(target, ast.Tuple | ast.List):
            for elt in target.elts:
                self.store(elt)
            return
        if not isinstance(target, ast.Subscript | ast.Attribute):
            return
        if isinstance(target, ast.Subscript):
            self.eval(target.slice)
        base = self.target_origins(target.value)
        for o in base:
            if o.copy:  # storing into a copy changes nothing
                continue
            if o.kind == "table":
                self.facts.writes.add(o.table)
            elif o.kind == "state" and isinstance(target, ast.Subscript):
                self.facts.writes.update(self.const_keys(target.slice))
        if isinstance(target.value, ast.Name) and isinstance(target, ast.Subscript) and not base:
            self.shapes.setdefault(target.value.id, set()).update(self.const_keys(target.slice))

    def returned(self, value: ast.expr) -> None:
        if isinstance(value, ast.IfExp):  # `x if ok else "Error: ..."`: each branch on its own
            self.eval(value.test)
            self.returned(value.body)
            self.returned(value.orelse)
            return
        origins = self.eval(value)
        texts = self.rendered(value)
        for text in texts:
            if text.lstrip().lower().startswith("error"):
                self.facts.errors[text] = None
        if isinstance(value, ast.Dict):
            for k, v in zip(value.keys, value.values, strict=True):
                if isinstance(k, ast.Constant) and k.value == "error":
                    for text in self.rendered(v):
                        self.facts.errors[text] = None
        if texts or self.nested:
            return
        self.facts.returns |= self.shape(value)
        self.facts.ret_origins |= origins

    # expressions --------------------------------------------------------------------------
    def eval(self, e: ast.expr) -> set[Origin]:
        out = self._eval(e)
        self.facts.reads.update(o.table for o in out if o.kind == "table")
        return out

    def _eval(self, e: ast.expr) -> set[Origin]:
        if isinstance(e, ast.Name):
            return set(self.env.get(e.id, ()))
        if isinstance(e, ast.Subscript):
            self.eval(e.slice)
            return self.sub(self.eval(e.value), e.slice)
        if isinstance(e, ast.Call):
            return self.call(e)
        if isinstance(e, ast.BoolOp):
            return set().union(*(self.eval(v) for v in e.values))
        if isinstance(e, ast.IfExp):
            self.eval(e.test)
            return self.eval(e.body) | self.eval(e.orelse)
        if isinstance(e, ast.NamedExpr):
            origins = self.eval(e.value)
            self.bind(e.target, e.value, origins)
            return origins
        if isinstance(e, ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp):
            for gen in e.generators:
                self.loop_bind(gen.target, gen.iter)
                for cond in gen.ifs:
                    self.eval(cond)
            if isinstance(e, ast.DictComp):
                self.eval(e.key)
                inner = self.eval(e.value)
            else:
                inner = self.eval(e.elt)
            return {_fresh(_deeper(o, -1)) for o in inner if o.depth > 0}
        if isinstance(e, ast.Lambda):
            self.nested += 1
            self.eval(e.body)
            self.nested -= 1
            return set()
        for child in ast.iter_child_nodes(e):
            if isinstance(child, ast.expr):
                self.eval(child)
            elif isinstance(child, ast.comprehension):
                self.eval(child.iter)
        return set()

    def target_origins(self, e: ast.expr) -> set[Origin]:
        """Origins of a store target's base: the access chain itself is not a read."""
        if isinstance(e, ast.Name):
            return set(self.env.get(e.id, ()))
        if isinstance(e, ast.Subscript):
            self.eval(e.slice)
            return self.sub(self.target_origins(e.value), e.slice)
        if isinstance(e, ast.Attribute):
            return self.target_origins(e.value)
        return self.eval(e)

    def sub(self, base: set[Origin], key: ast.expr) -> set[Origin]:
        out = set()
        for o in base:
            if o.kind == "state":
                out |= {Origin("table", t) for t in self.const_keys(key)}
            elif o.kind in ("table", "rows"):
                out.add(_deeper(o, 1))
        return out

    def loop_bind(self, target: ast.expr, it: ast.expr) -> None:
        """Bind a loop's (or a comprehension's) target to what iterating `it` yields."""
        origins = self.eval(it)
        call = it if isinstance(it, ast.Call) else None
        view = call.func.attr if call and isinstance(call.func, ast.Attribute) else ""
        fn = call.func.id if call and isinstance(call.func, ast.Name) else ""
        pair = isinstance(target, ast.Tuple | ast.List) and len(target.elts) == 2
        if view == "keys" and not (call and call.args):
            self.bind(target, None, set())  # keys are strings, not records
        elif pair and (view == "items" or fn == "enumerate"):
            self.bind(target.elts[0], None, set())  # type: ignore[attr-defined]
            self.bind(target.elts[1], None, self.iterate(origins))  # type: ignore[attr-defined]
        else:
            self.bind(target, None, self.iterate(origins))

    def iterate(self, origins: set[Origin]) -> set[Origin]:
        return {_deeper(o, 1) for o in origins if o.kind in ("table", "rows")}

    def call(self, e: ast.Call) -> set[Origin]:
        args = [self.eval(a) for a in e.args]
        for kw in e.keywords:
            self.eval(kw.value)
        f = e.func
        helper = self.resolve_helper(f)
        if helper is not None:
            return self.call_helper(helper, e)
        if isinstance(f, ast.Attribute):
            return self.method(e, f, args)
        if isinstance(f, ast.Name):
            union = set().union(*args) if args else set()
            if f.id in COPIES:
                return {_fresh(o) for o in union}
            if f.id in PROPAGATE:
                return union
            if f.id == "next" and args:
                return {_deeper(o, 1) for o in args[0]}
            if f.id in ("max", "min"):
                return {_deeper(o, 1) for o in args[0]} if len(args) == 1 else union
            if f.id == "dict":  # a copy; a sqlite row made a dict keeps its columns
                return {_fresh(o) for o in union}
            return set()
        self.eval(f)
        return set()

    def method(self, e: ast.Call, f: ast.Attribute, args: list[set[Origin]]) -> set[Origin]:
        name = f.attr
        if name in SQL_CALLS:
            base = self.eval(f.value)
            if any(o.kind in ("conn", "rows") for o in base) and e.args:
                return self.sql(e.args[0])
            return set()
        if name in MUTATORS:
            base = self.target_origins(f.value)
            for o in base:
                if o.copy:  # `info = {k: v ...}; info.update(...)` mutates a copy
                    continue
                if o.kind == "table":
                    self.facts.writes.add(o.table)
                elif o.kind == "state" and name in ("pop", "setdefault") and e.args:
                    self.facts.writes.update(self.const_keys(e.args[0]))
            if isinstance(f.value, ast.Name) and not base and name in ("append", "update"):
                for a in e.args:
                    self.shapes.setdefault(f.value.id, set()).update(self.shape(a))
            if name in ("pop", "setdefault", "popitem"):
                return self.sub(base, e.args[0]) if e.args else {_deeper(o, 1) for o in base}
            return set()
        if name in ("copy", "deepcopy") and isinstance(f.value, ast.Name) and f.value.id == "copy":
            # the copy module: copy.copy(x) is a shallow copy, copy.deepcopy(x) shares nothing
            return {_fresh(o) for o in args[0]} if name == "copy" and args else set()
        base = self.eval(f.value)
        if name == "copy" and not e.args:  # rec.copy(), a shallow copy
            return {_fresh(o) for o in base}
        if name == "get":
            return self.sub(base, e.args[0]) if e.args else set()
        if name in VIEWS:
            return {o for o in base if o.kind in ("table", "rows")}
        if name == "cursor":
            return {Origin("conn")} if any(o.kind == "conn" for o in base) else set()
        if name == "fetchone":
            return {_deeper(o, 1) for o in base if o.kind == "rows"}
        if name in ("fetchall", "fetchmany"):
            return {o for o in base if o.kind == "rows"}
        return set()

    def sql(self, arg: ast.expr) -> set[Origin]:
        out = set()
        for text in self.sql_texts(arg):
            reads, writes = tables_of(text)
            self.facts.reads |= reads
            self.facts.writes |= writes
            cols = select_columns(text)
            if cols is not None:
                out.add(Origin("rows", cols=self.expand(text, cols)))
        return out

    def sql_texts(self, arg: ast.expr) -> list[str]:
        texts = []
        for parts in self.strings(arg):
            text = sql_text(parts)
            if text is None:
                self.facts.unparsed_sql[render(parts)] = None
            else:
                texts.append(text)
        return texts

    def expand(self, text: str, cols: list[str]) -> tuple[str, ...]:
        """SELECT output columns with `*` / `t.*` replaced by the table's columns."""
        sources = select_sources(text)
        out: list[str] = []
        for c in cols:
            if c == "*":
                out += [f for t in sources.values() for f in self.p.fields.get(t, ())]
            elif c.endswith(".*"):
                out += list(self.p.fields.get(sources.get(c[:-2], c[:-2]), ()))
            else:
                out.append(c)
        return tuple(dict.fromkeys(out))

    # helpers ------------------------------------------------------------------------------
    def resolve_helper(self, f: ast.expr) -> tuple[Module, ast.FunctionDef] | None:
        m = self.m
        if isinstance(f, ast.Name):
            if f.id in m.functions:
                return m, m.functions[f.id]  # type: ignore[return-value]
            mod, sym = m.imports.get(f.id, ("", ""))
            other = self.p.modules.get(mod)
            if other and sym in other.functions:
                return other, other.functions[sym]  # type: ignore[return-value]
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
            if f.value.id in m.classes and f.attr in m.classes[f.value.id]:
                return m, m.classes[f.value.id][f.attr]  # type: ignore[return-value]
            mod, sym = m.imports.get(f.value.id, ("", ""))
            other = self.p.modules.get(mod) if not sym else None
            if other and f.attr in other.functions:
                return other, other.functions[f.attr]  # type: ignore[return-value]
        return None

    def call_helper(self, helper: tuple[Module, ast.FunctionDef], e: ast.Call) -> set[Origin]:
        module, node = helper
        params = [a.arg for a in node.args.posonlyargs + node.args.args]
        env: dict[str, set[Origin]] = {p: set() for p in params}
        strs: dict[str, set[Str]] = {}
        bound = list(zip(params, e.args, strict=False))
        bound += [(kw.arg, kw.value) for kw in e.keywords if kw.arg in env]
        for name, arg in bound:
            env[name] = self.eval(arg)
            found = self.strings(arg)
            if found:  # a table or column name passed to a helper that builds SQL with it
                strs[name] = found
        key = (
            module.rel,
            node.name,
            tuple(sorted((k, frozenset(v)) for k, v in env.items())),
            tuple(sorted((k, frozenset(v)) for k, v in strs.items())),
        )
        if key in self.p.stack:  # recursion: what it does is already being collected
            return set()
        if key not in self.p.memo:
            self.p.stack.add(key)
            try:
                body = _Body(self.p, module, env)
                body.strs.update(strs)
                self.p.memo[key] = body.run(node.body)
            finally:
                self.p.stack.discard(key)
        done = self.p.memo[key]
        self.facts.merge(done)
        self.helper_returns[id(e)] = done.returns
        return set(done.ret_origins)

    # strings and shapes -------------------------------------------------------------------
    def const_keys(self, key: ast.expr) -> set[str]:
        """The table names a subscript key can be: constants only (a Hole is unknown)."""
        return {p[0] for p in self.strings(key) if len(p) == 1 and isinstance(p[0], str)}

    def strings(self, e: ast.expr) -> set[Str]:
        return strings_of(e, self.strs, self.m.consts)

    def rendered(self, e: ast.expr) -> list[str]:
        return sorted({render(p) for p in self.strings(e)})

    def fields_of(self, origins: set[Origin]) -> set[str]:
        out: set[str] = set()
        for o in origins:
            if o.kind == "table" and o.depth <= 1:
                out |= set(self.p.fields.get(o.table, ()))
            elif o.kind == "rows" and o.depth <= 1:
                out |= set(o.cols)
        return out

    def local_shape(self, e: ast.expr) -> set[str]:
        """Keys a local gets from its assignment (dict literals, helpers that return them)."""
        if isinstance(e, ast.Dict | ast.ListComp | ast.List | ast.Call):
            return self.shape(e)
        return set()

    def shape(self, e: ast.expr) -> set[str]:
        """The field names of what `e` evaluates to, as far as the code says."""
        if isinstance(e, ast.Dict):
            out: set[str] = set()
            for k, v in zip(e.keys, e.values, strict=True):
                if k is None:
                    out |= self.shape(v)
                elif isinstance(k, ast.Constant) and isinstance(k.value, str):
                    out.add(k.value)
            return out
        if isinstance(e, ast.Name):
            return self.shapes.get(e.id, set()) | self.fields_of(set(self.env.get(e.id, ())))
        if isinstance(e, ast.ListComp | ast.GeneratorExp | ast.SetComp):
            return self.shape(e.elt)
        if isinstance(e, ast.List | ast.Tuple):
            return set().union(*(self.shape(x) for x in e.elts)) if e.elts else set()
        if isinstance(e, ast.IfExp):
            return self.shape(e.body) | self.shape(e.orelse)
        if isinstance(e, ast.BoolOp):
            return set().union(*(self.shape(v) for v in e.values))
        if isinstance(e, ast.Call):
            if id(e) in self.helper_returns:
                return self.helper_returns[id(e)] | self.fields_of(self.eval(e))
            name = e.func.attr if isinstance(e.func, ast.Attribute) else getattr(e.func, "id", "")
            if name == "copy" and not e.args and isinstance(e.func, ast.Attribute):
                return self.shape(e.func.value)  # rec.copy()
            if name in ("dumps", "dict", "list", "sorted", "deepcopy", "copy") and e.args:
                return self.shape(e.args[0]) | self.fields_of(self.eval(e.args[0]))
            if name == "dict" and e.keywords:
                return {k.arg for k in e.keywords if k.arg}
        return self.fields_of(self.eval(e))


def _deeper(o: Origin, by: int) -> Origin:
    """What a subscript or iteration of `o` reaches: the state's own values (never a copy)."""
    return Origin(o.kind, o.table, o.depth + by, o.cols)


def _fresh(o: Origin) -> Origin:
    """A new container holding what `o` holds."""
    return Origin(o.kind, o.table, o.depth, o.cols, copy=True)
