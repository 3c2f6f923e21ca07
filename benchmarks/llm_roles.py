"""Every LLM role driven once by a real model behind an OpenAI-compatible endpoint, with a table of
what each did: calls, replies that parsed, replies the role accepted, repairs, seconds, and what
came out.

    nice -n 10 .venv/bin/python benchmarks/llm_roles.py --base-url URL --model NAME
        [--roles policy_builtin,writer,...] [--clawgym-task DIR] [--skill DIR]
        [--max-tokens 6000] [--policy-max-tokens 256] [--max-turns 4] [--attempts 3]
        [--repairs 1] [--request-timeout 900] [--json OUT.json]

The roles, each through the code the loop runs (nothing is re-implemented here):

- policy_builtin, policy_clawgym: one episode of a built-in task (forged here from the library)
  and of a ClawGym task (default: the first of the shared eval set), through the rollout path;
- writer: the generator writer on one built-in candidate (`write_candidates`, host checks with
  re-asks); what it writes is forged and verified, and a rejection goes back once
  (`repair_candidates`);
- summary: the failure self-summary of a failed episode from the policy roles;
- scenarios: SkillSynth's scenario inference on one skill folder (default: a fixture skill);
- planner: the Planner on a one-step path of that skill and its scenarios;
- constructor, judge: `instantiate` with the Planner's plan (a stated fallback plan when it gave
  none): Constructor, host checks, forge, verify, rubric judge, repairs. When no generator got
  as far as the judge, the judge is asked once about the forged built-in task instead;
- domain_analysis: the domain tools' LLM analysis of one built-in domain tool (its shortest).

Per role: `calls` = requests sent; `parsed` = replies the role's reader could read (JSON found,
or code that parses; for the policy: replies the tool-call parser read a call from); `valid` =
replies that passed the role's own checks (the policy: calls run without a nudge); `repairs` =
requests that sent an earlier reply back with what was wrong (the policy: the agent's nudges).
A role that raises is reported with the error, and the other roles still run.

It is a measurement, not part of `make test`; `tests/benchmarks/test_llm_roles.py` runs it at a
tiny scale (slow: 2.3 min with the tiny offline model, 0.6 GB peak RSS). Measured once on
Qwen2.5-Coder-1.5B-Instruct (GGUF Q4_K_M) served by llama.cpp with one thread on two shared
cores, `--max-tokens 1024 --policy-max-tokens 192 --max-turns 3 --attempts 1 --repairs 1`:
43 min in all, 28 of them the writer's one reply (12,520 prompt tokens at 9.4/s, then 1,023 at 3.7/s);
this script peaked at 214 MB, the server at 11.4 GB (README, "A GGUF model on CPU").
"""

from __future__ import annotations

import argparse
import ast
import json
import resource
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))
from offline_policy import endpoint, episode_summary  # noqa: E402  (a sibling script)

ROOT = Path(__file__).resolve().parents[1]
FIXTURE_SKILL = ROOT / "tests" / "fixtures" / "skills" / "csv-summary-report"
CLAWGYM_EVAL = Path("/work/clawgym-data/RL/data/clawgym_eval")
ROLES = (
    "policy_builtin",
    "policy_clawgym",
    "writer",
    "summary",
    "scenarios",
    "planner",
    "constructor",
    "judge",
    "domain_analysis",
)
BUILTIN = ("time_window_aggregation", "apiculture")  # capability, domain of the built-in task


# ---------------------------------------------------------------------------------------------
# recording what a role sent and got


@dataclass
class Call:
    seconds: float
    reply: str | None  # None: the endpoint gave no reply
    error: str  # the endpoint's error, when it gave none
    repair: bool  # the request sent an earlier reply back with what was wrong
    system: str  # the start of the system prompt (SkillSynth's roles share one chat)


class Recorder:
    """A ChatFn that records each call; endpoint errors are recorded, then raised on."""

    def __init__(
        self, chat: Callable[[list[dict[str, Any]]], str], made: list | None = None
    ) -> None:
        self.chat = chat
        self.calls: list[Call] = []
        if made is not None:
            made.append(self)  # the Bench's list: a role that raises still shows its calls
        self.model = getattr(chat, "model", "")  # writer origins name the model (llm_writer)

    def __call__(self, messages: list[dict[str, Any]]) -> str:
        from clawloop.harness.llm import LLMError

        repair = any(m.get("role") == "assistant" for m in messages)
        system = next((str(m["content"])[:80] for m in messages if m["role"] == "system"), "")
        start = time.monotonic()
        try:
            reply = self.chat(messages)
        except LLMError as exc:
            self.calls.append(Call(time.monotonic() - start, None, str(exc)[:300], repair, system))
            raise
        self.calls.append(Call(time.monotonic() - start, reply, "", repair, system))
        return reply


@dataclass
class RoleResult:
    role: str
    calls: int = 0
    parsed: int = 0
    valid: int = 0
    repairs: int = 0
    seconds: float = 0.0
    outcome: str = ""
    raised: str = ""  # the role raised instead of reporting: a bug in the role or here
    replies: list[str] = field(default_factory=list)  # each reply, clipped


Check = Callable[[str], tuple[bool, bool]]  # reply -> (parsed, valid)


def tally(role: str, calls: list[Call], check: Check, outcome: str) -> RoleResult:
    """A role's counts from its recorded calls (pure)."""
    res = RoleResult(role, outcome=outcome)
    for c in calls:
        res.calls += 1
        res.repairs += c.repair
        res.seconds += c.seconds
        if c.reply is None:
            res.replies.append(f"[endpoint error] {c.error}")
            continue
        parsed, valid = check(c.reply)
        res.parsed += parsed
        res.valid += parsed and valid
        res.replies.append(clip(c.reply))
    res.seconds = round(res.seconds, 1)
    return res


def clip(text: str, head: int = 600, tail: int = 300) -> str:
    """A reply's start and end (where a reply cut at max_tokens shows it)."""
    if len(text) <= head + tail:
        return text
    return f"{text[:head]} [... {len(text) - head - tail} chars ...] {text[-tail:]}"


def json_check(validate: Callable[[Any], Any]) -> Check:
    """(a JSON value could be read out of the reply, it passed `validate`)."""
    from clawloop.synthesis.llm_json import ReplyError, parse_json_reply

    def check(reply: str) -> tuple[bool, bool]:
        try:
            value = parse_json_reply(reply)
        except ReplyError:
            return False, False
        try:
            validate(value)
        except ValueError:
            return True, False
        return True, True

    return check


def code_check(validate: Callable[[str], Any]) -> Check:
    """(the reply's code parses as Python, it passed `validate`)."""
    from clawloop.synthesis.llm_writer import extract_code

    def check(reply: str) -> tuple[bool, bool]:
        code = extract_code(reply)
        try:
            ast.parse(code)
        except (SyntaxError, ValueError):
            return False, False
        try:
            validate(code)
        except ValueError:
            return True, False
        return True, True

    return check


# ---------------------------------------------------------------------------------------------
# the roles


@dataclass
class Bench:
    """What the roles share: the endpoint, the limits, and what earlier roles made."""

    base_url: str
    model: str
    args: argparse.Namespace
    work: Path
    sandbox: Any = None
    builtin_dir: Path | None = None
    trajectories: list[dict[str, Any]] = field(default_factory=list)
    scenarios: Any = None
    recorders: list[Recorder] = field(default_factory=list)

    def endpoint(self) -> Any:
        from clawloop.harness.llm import LLMEndpoint

        timeout = self.args.request_timeout
        return LLMEndpoint(self.base_url, self.model, "", request_timeout_s=timeout, max_retries=0)

    def json_chat(self, max_tokens: int) -> Recorder:
        """The JSON roles' chat as the loop builds it (temperature 0; --json-max-tokens caps)."""
        from clawloop.harness.llm import endpoint_chat

        cap = self.args.json_max_tokens or max_tokens
        chat = endpoint_chat(self.endpoint(), max_tokens=cap, temperature=0.0)
        return Recorder(chat, self.recorders)

    def writer_chat(self) -> Recorder:
        """The writer's and SkillSynth's chat (`writer_chat`), with --max-tokens."""
        from clawloop.synthesis.llm_writer import writer_chat

        return Recorder(writer_chat(self.endpoint(), self.writer_config()), self.recorders)

    def writer_config(self) -> Any:
        from clawloop.synthesis.llm_writer import WriterConfig

        return WriterConfig(max_attempts=self.args.attempts, max_tokens=self.args.max_tokens)

    def builtin_task(self) -> Path:
        """The built-in task folder (forged once)."""
        if self.builtin_dir is None:
            from clawloop.generators.forge import forge_to_folder
            from clawloop.synthesis.library import render_generator

            code = render_generator(*BUILTIN, multihop=0, dirtiness=0, output_format="json")
            out = self.work / BUILTIN[0]
            row = forge_to_folder(code, 0, out, self.sandbox, origin="builtin")
            if row["status"] != "ok":
                raise RuntimeError(f"cannot forge the built-in task: {row.get('error')}")
            self.builtin_dir = out
        return self.builtin_dir


def policy_role(bench: Bench, role: str, task_dir: Path) -> RoleResult:
    """One episode through the rollout path; the trajectory row is kept for the summary role."""
    from clawloop.harness.llm import PolicyConfig
    from clawloop.harness.rollout import RolloutConfig, rollout_task, task_row_from_folder

    a = bench.args
    cfg = RolloutConfig(
        n=1,
        max_turns=a.max_turns,
        max_tokens=a.policy_max_tokens,
        context_len=a.context_len,
        episode_timeout_s=a.episode_timeout,
        workers=1,
    )
    policy = PolicyConfig(bench.base_url, bench.model, "", request_timeout_s=a.request_timeout)
    (row,) = rollout_task(
        task_dir, task_row_from_folder(task_dir), policy, 1, bench.sandbox, 1, cfg
    )
    bench.trajectories.append(row)
    ep = episode_summary(row)
    turns = json.loads(row["turns_json"])
    parsed = sum(bool(t.get("tool_calls_from_text") or t.get("tool_calls_native")) for t in turns)
    nudges = ep["parse_errors"] + ep["no_call"]
    outcome = (
        f"{task_dir.name}: reward {row['reward']:.2f}, passed {bool(row['passed'])}, "
        f"end {row['end_reason']}, forms {ep['forms'] or '-'}, {ep['repaired']} call(s) read "
        f"as Python literals"
    )
    return RoleResult(
        role,
        calls=len(turns),
        parsed=parsed,
        valid=calls_run(json.loads(row["messages_json"])),
        repairs=nudges,
        seconds=round(sum(t.get("latency_s") or 0.0 for t in turns), 1),
        outcome=outcome,
        replies=ep["replies"],
    )


def calls_run(messages: list[dict[str, Any]]) -> int:
    """Assistant replies with tool calls that the agent ran rather than answered with a nudge."""
    nudge = ("error:", "No tool call found")
    out = 0
    for i, m in enumerate(messages):
        if m.get("role") != "assistant" or not m.get("tool_calls"):
            continue
        nxt = messages[i + 1] if i + 1 < len(messages) else {}
        out += not (nxt.get("role") == "user" and str(nxt.get("content") or "").startswith(nudge))
    return out


def clawgym_task(bench: Bench) -> Path:
    from clawloop.harness.taskfolder.clawgym import read_task, write_harbor_folder

    src = bench.args.clawgym_task or (CLAWGYM_EVAL / "task_0001")
    if not Path(src).is_dir():
        raise FileNotFoundError(f"no ClawGym task folder at {src}: pass --clawgym-task DIR")
    task = read_task(Path(src))
    return write_harbor_folder(task, bench.work / "clawgym" / task.task_id)


def writer_role(bench: Bench) -> RoleResult:
    from clawloop.generators.candidates import candidate_row
    from clawloop.generators.forge import forge_candidate
    from clawloop.generators.verify import verify_task
    from clawloop.synthesis.library import render_generator
    from clawloop.synthesis.llm_writer import (
        forge_failure,
        repair_candidates,
        spec_from_candidate,
        static_check,
        verify_failure,
        write_candidates,
    )

    code = render_generator(*BUILTIN, multihop=0, dirtiness=0, output_format="json")
    row = candidate_row(code, 0, origin="builtin")
    spec = spec_from_candidate(row)
    chat, cfg = bench.writer_chat(), bench.writer_config()
    (written,), notes = write_candidates([row], chat, cfg=cfg)
    outcome = notes[-1] if len(notes) > 1 else notes[0]
    if str(written["origin"]).startswith("llm:"):
        stage, error = "", ""
        forged = forge_candidate(written, bench.sandbox)
        if forged["status"] != "ok":
            stage, error = "forge", forge_failure(forged)
        else:
            checks, verdict = verify_task(forged, bench.sandbox)
            if not verdict["kept"]:
                stage, error = "verify", verify_failure(verdict, checks)
        if not stage:
            outcome = "written; forge and verify kept it (no repair needed)"
        elif forged.get("error_kind") == "sandbox":
            outcome = f"written; the sandbox failed in forge: {error[:200]}"
        else:
            repaired, rnotes = repair_candidates([(written, stage, error)], chat, cfg=cfg)
            what = "repaired (host-checked)" if repaired else f"not repaired: {rnotes[-1][:300]}"
            outcome = f"written; {stage} rejected it ({error[:160]}); {what}"
    check = code_check(lambda c: static_check(c, spec))
    return tally("writer", chat.calls, check, outcome[:500])


def summary_role(bench: Bench) -> RoleResult:
    from clawloop.diagnosis.summary import SummaryConfig, parse_summary, summarize_failure

    rows = [r for r in bench.trajectories if not r["passed"]] or bench.trajectories
    if not rows:
        raise RuntimeError("no episode to summarize: the policy roles made none")
    row = rows[0]
    cfg = SummaryConfig()
    chat = bench.json_chat(cfg.max_tokens)
    out = summarize_failure(row, chat, cfg, iteration=1, summarizer=bench.model)
    outcome = (
        f"heuristic fallback: {out['fallback_reason'][:300]}"
        if out["fallback"]
        else f"step {out['failure_step']}, {out['root_cause']}: {out['missing_capability'][:200]}"
    )

    def check(reply: str) -> tuple[bool, bool]:
        parsed, _ = json_check(lambda v: v)(reply)
        try:
            parse_summary(reply)
        except ValueError:
            return parsed, False
        return parsed, True

    return tally("summary", chat.calls, check, outcome)


def skill(bench: Bench) -> Any:
    from clawloop.synthesis.skillgraph.corpus import read_skill

    record = read_skill(Path(bench.args.skill))
    if record.problem:
        raise ValueError(f"skill folder {bench.args.skill} is unusable: {record.problem}")
    return record


def scenarios_role(bench: Bench) -> RoleResult:
    from clawloop.synthesis.skillgraph.scenarios import infer_scenarios

    chat = bench.json_chat(600)  # tasks/skill_source.py's scenario chat
    scen = infer_scenarios(skill(bench), chat, None, bench.model)
    bench.scenarios = scen
    outcome = (
        f"heuristic: {scen.heuristic_reason[:300]}"
        if scen.heuristic
        else f"pre {scen.pre!r} -> post {scen.post!r}"
    )
    return tally("scenarios", chat.calls, scenario_check(), outcome)


def scenario_check() -> Check:
    """The scenario role's reader: JSON found, and a valid ScenarioReply."""
    from clawloop.synthesis.skillgraph.scenarios import ScenarioReply

    return json_check(ScenarioReply.model_validate)


def one_step_path(bench: Bench) -> tuple[Any, Any]:
    """The skill as a one-step path between its (inferred, else heuristic) scenarios."""
    from clawloop.synthesis.skillgraph.model import PathStep
    from clawloop.synthesis.skillgraph.sample import path_id
    from clawloop.synthesis.skillgraph.scenarios import heuristic_scenarios

    record = skill(bench)
    scen = bench.scenarios or heuristic_scenarios(record, "scenario role not run")
    step = PathStep(record.name, "pre", "post", scen.pre, scen.post, record.description)
    from clawloop.synthesis.skillgraph.model import SkillPath

    return SkillPath(path_id([step]), (step,)), record


def fallback_plan(path: Any) -> Any:
    """A plain valid plan for `path`, for the Constructor when the Planner gave none (stated)."""
    from clawloop.synthesis.skillgraph.plan import Plan, check_plan

    step = path.steps[0]
    plan = Plan(
        goal=f"Use the {step.skill} skill: {step.pre_text} becomes {step.post_text}",
        domain="skill practice",
        files=[{"path": "data/records.csv", "kind": "csv", "holds": "the input records"}],
        steps=[{"skill": step.skill, "state": step.post_text or "the result is written"}],
        outputs=[{"path": "output/result.json", "format": "json", "contains": "the result"}],
        checks=[{"fact": "the number of input records", "output": "output/result.json"}],
    )
    return check_plan(plan, path)


def planner_role(bench: Bench) -> tuple[RoleResult, Any]:
    from clawloop.synthesis.skillgraph.plan import Plan, PlanError, check_plan, plan_path

    path, record = one_step_path(bench)
    chat = bench.writer_chat()  # tasks/skill_source.py: SkillSynth's roles use writer_chat
    try:
        plan = plan_path(path, [record], chat)
        outcome = f"plan: {plan.domain}, {len(plan.files)} file(s), outputs {[o.path for o in plan.outputs]}"
    except PlanError as exc:
        plan, outcome = None, f"no plan: {str(exc)[:300]}"
    check = json_check(lambda v: check_plan(Plan.model_validate(v), path))
    return tally("planner", chat.calls, check, outcome), plan


def constructor_and_judge(bench: Bench, plan: Any) -> list[RoleResult]:
    from clawloop.synthesis.skillgraph.construct import check_code
    from clawloop.synthesis.skillgraph.instantiate import instantiate
    from clawloop.synthesis.skillgraph.prompts import CONSTRUCTOR_MARK, JUDGE_MARK
    from clawloop.synthesis.skillgraph.rubric import RubricError, RubricVerdict, judge_folder

    path, record = one_step_path(bench)
    given = plan if plan is not None else fallback_plan(path)
    note = "the Planner's plan" if plan is not None else "the fallback plan (the Planner gave none)"
    chat = bench.writer_chat()
    res = instantiate(
        path, [record], chat, bench.sandbox, seed=0, max_repairs=bench.args.repairs, plan=given
    )
    stages = [f"{a['stage']}{'' if a['passed'] else ' failed'}" for a in res.attempts]
    last = res.attempts[-1]["reason"] if res.attempts else ""
    outcome = f"on {note}: attempts {stages}; {'kept' if res.kept else 'last: ' + last[:240]}"
    built = [c for c in chat.calls if CONSTRUCTOR_MARK in c.system]
    judged = [c for c in chat.calls if JUDGE_MARK in c.system]
    ctor = tally("constructor", built, code_check(lambda c: check_code(c, given)), outcome)

    def verdict(v: Any) -> Any:
        return RubricVerdict.model_validate(v)

    if judged:
        judge_outcome = f"judged the Constructor's task: {[a.get('rubric', '')[:200] for a in res.attempts if a.get('rubric')]}"
    else:  # nothing the Constructor wrote reached the rubric: judge the built-in task instead
        jchat = bench.writer_chat()
        try:
            v = judge_folder(bench.builtin_task(), jchat)
            judge_outcome = (
                f"built-in task (no Constructor task reached it): agree={v.agree}, {v.reason[:200]}"
            )
        except RubricError as exc:
            judge_outcome = f"built-in task: no valid verdict: {str(exc)[:300]}"
        judged = jchat.calls
    return [ctor, tally("judge", judged, json_check(verdict), judge_outcome)]


def domain_role(bench: Bench) -> RoleResult:
    from clawloop.synthesis.domain import llm_analysis
    from clawloop.synthesis.domain.load import builtin_domains, load_domain

    domain = load_domain(builtin_domains()[0])
    tool = min(domain.tools, key=lambda t: len(llm_analysis.tool_source(domain, t)))
    chat = bench.json_chat(800)  # tasks/domain_source.py
    reading, why = llm_analysis.ask(domain, tool, chat)
    ast_edges = f"AST: reads {list(tool.reads)}, writes {list(tool.writes)}"
    outcome = (
        f"{domain.name}.{tool.name}: LLM reads {reading.reads}, writes {reading.writes}; {ast_edges}"
        if reading
        else f"{domain.name}.{tool.name}: no reading: {why[:300]}; {ast_edges}"
    )
    check = json_check(lambda v: llm_analysis.check_reading(v, domain.tables))
    return tally("domain_analysis", chat.calls, check, outcome)


# ---------------------------------------------------------------------------------------------


def run_roles(bench: Bench, roles: list[str]) -> list[RoleResult]:
    """Each asked role once, in order; a role that raises is a row saying so."""
    out: list[RoleResult] = []
    plan = None
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("policy_builtin", lambda: policy_role(bench, "policy_builtin", bench.builtin_task())),
        ("policy_clawgym", lambda: policy_role(bench, "policy_clawgym", clawgym_task(bench))),
        ("writer", lambda: writer_role(bench)),
        ("summary", lambda: summary_role(bench)),
        ("scenarios", lambda: scenarios_role(bench)),
        ("planner", lambda: planner_role(bench)),
        ("constructor", lambda: constructor_and_judge(bench, plan)),
        ("domain_analysis", lambda: domain_role(bench)),
    ]
    for name, step in steps:
        wanted = [name] if name != "constructor" else ["constructor", "judge"]
        if not set(wanted) & set(roles):
            continue
        start, made = time.monotonic(), len(bench.recorders)
        try:
            got = step()
        except Exception as exc:  # reported, with the calls it made, so the other roles still run
            calls = [c for r in bench.recorders[made:] for c in r.calls]
            where = traceback.extract_tb(exc.__traceback__)[-1]
            why = f"{type(exc).__name__}: {str(exc)[:400]} ({Path(where.filename).name}:{where.lineno})"
            got = [
                replace(tally(r, calls, lambda _: (False, False), ""), raised=why) for r in wanted
            ]
        if name == "planner" and isinstance(got, tuple):
            got, plan = got
        results = got if isinstance(got, list) else [got]
        wall = round(time.monotonic() - start, 1)
        for r in results:
            if r.role in roles:
                print(
                    json.dumps({**asdict(r), "replies": len(r.replies), "wall_s": wall}), flush=True
                )
                out.append(r)
    return out


def table(results: list[RoleResult]) -> str:
    head = "| role | calls | parsed | valid | repairs | LLM s | what came out |"
    lines = [head, "|---|---:|---:|---:|---:|---:|---|"]
    for r in results:
        what = (
            (f"RAISED {r.raised}" if r.raised else r.outcome).replace("|", "/").replace("\n", " ")
        )
        lines.append(
            f"| {r.role} | {r.calls} | {r.parsed} | {r.valid} | {r.repairs} | {r.seconds} | {what} |"
        )
    return "\n".join(lines)


def _args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--base-url", help="an OpenAI-compatible server's /v1 URL")
    p.add_argument("--model", help="its served model name")
    p.add_argument("--model-dir", type=Path, help="or: a model folder or .gguf to serve locally")
    p.add_argument("--roles", default=",".join(ROLES), help=f"comma-separated, of {ROLES}")
    p.add_argument(
        "--clawgym-task",
        type=Path,
        help=f"a ClawGym task folder (default {CLAWGYM_EVAL}/task_0001)",
    )
    p.add_argument("--skill", type=Path, default=FIXTURE_SKILL, help="a skill folder (SKILL.md)")
    p.add_argument("--max-tokens", type=int, default=6000, help="per writer/SkillSynth reply")
    p.add_argument("--json-max-tokens", type=int, help="per JSON-role reply (default: the loop's)")
    p.add_argument("--policy-max-tokens", type=int, default=256, help="per policy reply")
    p.add_argument("--max-turns", type=int, default=4, help="policy replies per episode")
    p.add_argument("--context-len", type=int, default=8192, help="the served context window")
    p.add_argument("--attempts", type=int, default=3, help="writer replies per write or repair")
    p.add_argument("--repairs", type=int, default=1, help="Constructor repairs after the first")
    p.add_argument("--request-timeout", type=float, default=900.0, help="seconds per reply")
    p.add_argument("--episode-timeout", type=float, default=1800.0)
    p.add_argument("--backend", choices=["bwrap", "docker"], default="bwrap")
    p.add_argument("--json", type=Path, help="write the results (with every reply) here too")
    args = p.parse_args(argv)
    if not args.model_dir and not (args.base_url and args.model):
        p.error("give --base-url and --model, or --model-dir")
    unknown = sorted(set(args.roles.split(",")) - set(ROLES))
    if unknown:
        p.error(f"unknown roles {unknown}: use some of {','.join(ROLES)}")
    return args


def main(argv: list[str] | None = None) -> int:
    from clawloop.harness.sandbox.base import SandboxConfig

    args = _args(argv)
    start = time.monotonic()
    with ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="clawloop-roles-"))
        base_url, model = endpoint(stack, args.model_dir, args.base_url, args.model)
        bench = Bench(base_url, model, args, Path(tmp), SandboxConfig(backend=args.backend))
        results = run_roles(bench, args.roles.split(","))
    wall = round(time.monotonic() - start, 1)
    rss_mb = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(table(results))
    print(f"wall {wall} s, this process's peak RSS {rss_mb} MB (the model server's is its own)")
    if args.json:
        doc = {"model": bench.model, "wall_s": wall, "peak_rss_mb": rss_mb,
               "roles": [asdict(r) for r in results]}  # fmt: skip
        args.json.write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
