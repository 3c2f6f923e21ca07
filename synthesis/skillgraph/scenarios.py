"""Infer a skill's precondition and postcondition scenarios, with an LLM or offline.

A scenario is an abstract state of a workspace: what exists and in which form ("a folder of
scanned PDF invoices", "a markdown report with a table"), never a concrete file name. With a
ChatFn the LLM reads the skill's description, trimmed body and file list (code is read as text,
never run) and answers JSON that is validated by a pydantic schema; a malformed answer gets the
validation error back for up to `MAX_REPAIRS` repairs, after which the heuristic extractor
(below: `heuristic_scenarios`) is used and the result says why. LLM answers are cached on
disk by (skill content hash, model, prompt version), so rebuilding a graph over an unchanged
corpus asks nothing. Without a ChatFn every result is heuristic.
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator

from clawloop.harness.llm import ChatFn, LLMError
from clawloop.synthesis.llm_json import ReplyError, ask_json, parse_json_reply
from clawloop.synthesis.skillgraph.model import Scenarios, SkillRecord

PROMPT_VERSION = "skill-scenarios-v1"  # bump when the prompt or schema changes: new cache keys
MAX_REPAIRS = 2
BODY_CHARS = 3500  # the body is trimmed: the description and first sections carry the intent
MAX_FILES_LISTED = 40


# ---- the offline extractor -------------------------------------------------------------------
# With no endpoint (CI, a laptop) scenarios must still exist and be deterministic. It reads the
# signals a skill author leaves: the name's `x-to-y` pattern, "convert A to B" / "extract B from
# A" / "generate B" clauses in the description, what it says the skill starts from ("when you
# have A", "executing A") and what comes after it ("before B"), Input/Output lines and sections,
# "when to use" sections, and the file kinds named (pdf, docx, xlsx, csv, json, md, png, svg, html, ...), and writes templated
# states ("a folder of PDF documents" -> "new Markdown documents"). Templated on purpose: states
# naming the same kind of artifact land close in embedding space, which is what lets skills chain.
# kind -> (pattern, noun phrase). Order breaks ties: specific file formats before broad topics.
KINDS: dict[str, tuple[str, str]] = {
    "pdf": (r"\bpdfs?\b", "PDF documents"),
    "docx": (r"\.docx?\b|\bdocx\b|\bword documents?\b|\bms word\b", "Word (.docx) documents"),
    "xlsx": (
        r"\.xlsx?\b|\bxlsx\b|\bexcel\b|\bspreadsheets?\b|\bworkbooks?\b",
        "Excel spreadsheets",
    ),
    "pptx": (r"\.pptx?\b|\bpowerpoint\b|\bslide ?decks?\b|\bslides\b", "a slide deck"),
    "csv": (r"\bcsv\b|\btsv\b", "CSV tables"),
    "json": (r"\bjsonl?\b", "JSON data files"),
    "yaml": (r"\.ya?ml\b|\byaml\b", "YAML configuration files"),
    "md": (r"\.md\b|\bmarkdown\b", "Markdown documents"),
    "html": (r"\bhtml?\b|\bweb ?pages?\b", "HTML pages"),
    "svg": (r"\bsvg\b", "SVG graphics"),
    "image": (
        r"\bpng\b|\bjpe?g\b|\bimages?\b|\bscreenshots?\b|\bphotos?\b",
        "image files (PNG/JPEG)",
    ),
    "chart": (r"\bcharts?\b|\bplots?\b|\bvisuali[sz]ations?\b|\bdashboards?\b", "charts and plots"),
    "video": (r"\bvideos?\b|\bmp4\b|\bgifs?\b|\bframes\b", "video files"),
    # "transcribe", "transcription" read audio; a "transcript" is text (a chat log's, often)
    "audio": (r"\baudio\b|\bmp3\b|\bwav\b|\bspeech\b|\btranscri(?!pts?\b)\w+", "audio recordings"),
    "sql": (r"\bsql\b|\bdatabases?\b|\bpostgres\w*\b|\bduckdb\b|\bsqlite\b", "a SQL database"),
    "dataframe": (r"\bdataframes?\b|\bpandas\b|\bpolars\b|\bdatasets?\b", "a tabular dataset"),
    "tests": (r"\btests?\b|\bpytest\b|\bjest\b|\bplaywright\b|\bcoverage\b", "a test suite"),
    "git": (
        r"\bgit\b|\bcommits?\b|\bbranch(?:es)?\b|\bpull requests?\b|\bgithub\b",
        "a git repository",
    ),
    "container": (
        r"\bdocker\w*\b|\bcontainers?\b|\bkubernetes\b|\bk8s\b|\bkubectl\b",
        "container setup",
    ),
    "logs": (r"\blogs?\b|\bjournalctl\b", "log files"),
    "service": (r"\bdeploy\w*\b|\bsystemd\b|\bservices?\b|\bservers?\b", "a deployed service"),
    "code": (
        r"\bsource code\b|\bcodebase\b|\bpython\b|\bjavascript\b|\btypescript\b|\bcode\b",
        "source code",
    ),
    "web": (r"\burls?\b|\bwebsites?\b|\bhttps?\b|\bapis?\b", "web URLs and HTTP APIs"),
    "text": (r"\bplain[- ]?text\b|\btxt\b|\btext files?\b", "plain-text files"),
    "plan": (r"\bplans?\b|\bspecs?\b|\bspecifications?\b|\brequirements?\b", "a written plan"),
    "report": (r"\breports?\b|\bsummar(?:y|ies|i[sz]e\w*)\b|\bfeedback\b", "a written report"),
}
_RE = {k: re.compile(p, re.IGNORECASE) for k, (p, _) in KINDS.items()}
# File-like kinds get a container in the pre-scenario ("a folder of ..."); others are a state.
FILE_KINDS = {"pdf", "docx", "xlsx", "csv", "json", "yaml", "md", "html", "svg", "image", "video"}
FILE_KINDS |= {"audio", "logs", "text"}

_CATEGORIES: list[tuple[str, str]] = [  # (category, verb pattern), first match wins
    ("convert", r"\bconvert\w*|\btransform\w*|\bexport\w*|\bturn\w* .{0,30}\binto\b"),
    ("extract", r"\bextract\w*|\bpars(?:e|es|ing)\b|\bocr\b|\bscrap\w*|\bpull\w* .{0,20}from\b"),
    ("review", r"\breview\w*|\baudit\w*|\banaly[sz]\w*|\binspect\w*|\bscan\w*|\bcheck\w*"),
    ("debug", r"\bdebug\w*|\btriage\w*|\bdiagnos\w*|\btroubleshoot\w*|\bfix\w*"),
    ("test", r"\btest(?:s|ing)?\b|\btdd\b"),
    ("plan", r"\bplan\w*|\bbrainstorm\w*|\bdesign\w*"),
    ("deploy", r"\bdeploy\w*|\bpublish\w*|\brelease\w*|\bship\w*"),
    ("generate", r"\bgenerat\w*|\bcreat\w*|\bbuild\w*|\bwrit\w*|\bproduc\w*|\bmak\w*|\brender\w*"),
    ("manage", r"\bmanag\w*|\borgani[sz]\w*|\bsync\w*|\bbackup\w*|\bmerg\w*|\bsplit\w*|\bedit\w*"),
]
_OUTPUT_OF = {"review": "report", "debug": "report", "test": "tests", "plan": "plan"}
_OUTPUT_OF["deploy"] = "service"
_SECTION = re.compile(r"^#{1,4}\s+(.+?)\s*$", re.MULTILINE)
_CONVERT = re.compile(
    r"\b(?:convert|transform|turn|export|transcrib|compil|render)\w*\s+(.{0,80}?)\s+(?:in)?to\s+"
    r"(.{0,60})",
    re.I,
)
_FROM_TO = re.compile(r"\bfrom\s+(.{0,50}?)\s+(?:in)?to\s+(.{0,50})", re.IGNORECASE)
# "extract <what> from <where>": where is read, what is written ("Extract text from images").
_FROM = re.compile(
    r"\b(?:extract|read|pars|pull|scrap|load)\w*\s+(.{0,60}?)\s*\bfrom\s+(.{0,60})", re.I
)
_TAKE_OUT = re.compile(r"(?:extract|pull|scrap)", re.I)  # verbs whose object is what they write
_MAKE = re.compile(r"\b(?:generat|creat|produc|writ|build|render|mak)\w*\s+(.{0,60})", re.I)


def kinds_in(text: str) -> list[str]:
    """Kinds named in text, most mentioned first (ties by the table's order)."""
    counts = Counter({k: len(rx.findall(text)) for k, rx in _RE.items()})
    order = list(KINDS)
    return [k for k, c in sorted(counts.items(), key=lambda kc: (-kc[1], order.index(kc[0]))) if c]


_OUT_HEADS = ("output", "result", "deliverable")


def _sections(body: str, words: tuple[str, ...], exact: bool = False) -> str:
    """The text of every section whose heading contains one of `words` (`exact`: is one of
    them, markup aside)."""
    heads = list(_SECTION.finditer(body))
    out = []
    for i, h in enumerate(heads):
        title = h.group(1).lower()
        if title.strip(" *_:`") in words if exact else any(w in title for w in words):
            end = heads[i + 1].start() if i + 1 < len(heads) else len(body)
            out.append(body[h.end() : end][:2000])
    return "\n".join(out)


def category_of(skill: SkillRecord) -> str:
    """The skill's verb category, read from its name and description with the objects it works
    on and the steps that come after it cut out (`situation`): "plans" in "executing
    implementation plans" is the thing executed, not a planning verb."""
    text = situation(f"{skill.name.replace('-', ' ')} {skill.description}").verbs
    for cat, pattern in _CATEGORIES:
        if re.search(pattern, text, re.IGNORECASE):
            return cat
    return "manage"


# A clause's artifact ends where its manner begins: "to text using local Whisper (Docker)" names
# text, not the container it runs in.
_MANNER = re.compile(r"\b(?:using|with|via|by|through|in order|so that|when|if)\b|[,.;:()]", re.I)
# "Input: a PDF file" / "**Outputs**: Markdown" lines in the body (not only section headings).
_LABEL = re.compile(
    r"^[\s>*_-]*(inputs?|takes|accepts|reads|outputs?|produces|returns|writes|results?)[*_\s]*[:=-]"
    r"\s*(.+)$",
    re.IGNORECASE | re.MULTILINE,
)
_OUT_LABEL = ("output", "produce", "return", "write", "result")


def clause_kinds(text: str) -> list[str]:
    """The kinds a clause names before its manner ("using ...", "with ..."); plain "text" counts
    here, where it is the artifact a clause names (in running prose it is too common)."""
    head = _MANNER.split(text, maxsplit=1)[0]
    found = kinds_in(head)
    return found or (["text"] if re.search(r"\btext\b|\btranscripts?\b", head, re.I) else [])


def labelled_io(body: str) -> tuple[list[str], list[str]]:
    """(input kinds, output kinds) the body labels as such: "**Input**: a CSV export" lines, and
    sections headed just "Inputs" / "Outputs"."""
    ins: list[str] = []
    outs: list[str] = []
    for m in _LABEL.finditer(body[:BODY_CHARS]):
        target = outs if m.group(1).lower().startswith(_OUT_LABEL) else ins
        target += [k for k in clause_kinds(m.group(2)) if k not in target]
    for words, target in ((("input", "inputs"), ins), (("output", "outputs"), outs)):
        target += [k for k in kinds_in(_sections(body, words, exact=True)) if k not in target]
    return ins, outs


def body_io(body: str) -> tuple[list[str], list[str]]:
    """(input kinds, output kinds) the SKILL.md body states: labelled Input/Output lines first,
    then a convert / from-to clause in its opening text."""
    text = body[:BODY_CHARS]
    ins, outs = labelled_io(body)
    if ins and outs:
        return ins, outs
    for rx in (_CONVERT, _FROM_TO):
        for m in rx.finditer(text):
            a, b = clause_kinds(m.group(1)), clause_kinds(m.group(2))
            if a and b:
                return ins or a, outs or b
    return ins, outs


# What a description says the skill starts from, and what comes after it. "Use when you have a
# written implementation plan to execute", "when receiving voice messages", "executing
# implementation plans", "working with images": the object is an input, whatever its kind (a plan
# or a report included). "before writing implementation code", "before touching code": the object
# is a later step's, neither what the skill reads nor, usually, what it writes. The heuristic used
# to miss both, and read subagent-driven-development ("Use when executing implementation plans")
# backwards, code -> plan: the category verbs matched the object ("plans": a planning skill, so a
# plan out), and the input skipped the plan, as plans and reports are usually outputs, for the
# next kind its "When to Use" section named (code). writing-plans ("Use when you have a spec ...,
# before touching code") read code -> plan the same way.
_HAS = re.compile(
    r"\b(?:you have|you've got|given|receiv(?:e|es|ed|ing)|execut(?:e|es|ed|ing)|"
    r"implement(?:s|ed|ing)?|carr(?:y|ies|ying) out|work(?:s|ing)? (?:on|with)|after)\s+(?=(.{0,60}))",
    re.I,
)  # the object is a lookahead: a second cue inside it ("receiving X, when receiving Y") is found
_BEFORE = re.compile(r"\bbefore\s+(?=(.{0,60}))", re.I)
# Carrying out a plan writes code: the output of a skill that executes the plan it is given.
_CARRY_OUT = re.compile(
    r"\b(?:execut(?:e|es|ed|ing)|implement(?:s|ed|ing)?|carr(?:y|ies|ying) out)\b", re.I
)  # verbs only: "an implementation plan", "execution plan analysis" carry nothing out


@dataclass(frozen=True)
class Situation:
    consumed: tuple[str, ...]  # kinds named as what the skill starts from, in order
    verbs: str  # the text with both kinds of object blanked: what verb patterns may read
    kept: str  # the text with only the "before ..." clauses blanked: what the skill is about
    carries_out_plan: bool  # a plan it starts from is executed / implemented


_PREPOSITION = re.compile(r"\b(?:on|of|for|about|in|from|to|that|which)\b", re.I)


def _head_first(phrase: str) -> list[str]:
    """The kinds a noun phrase names, its head first: the head of an English compound is its
    last noun before any preposition, so "code review feedback on a pull request" is feedback
    (a report), not code nor git; the kinds after the preposition follow."""
    core = _PREPOSITION.split(phrase, maxsplit=1)[0]
    last = {k: max(m.end() for m in _RE[k].finditer(core)) for k in kinds_in(core)}
    head = sorted(last, key=lambda k: -last[k])
    return head + [k for k in clause_kinds(phrase) if k not in head]


def _objects(rx: re.Pattern[str], text: str) -> list[tuple[int, int, list[str]]]:
    """(start, end, kinds) of each match's object, the object cut where its manner begins."""
    out = []
    for m in rx.finditer(text):
        head = _MANNER.split(m.group(1), maxsplit=1)[0]
        out.append((m.start(), m.start(1) + len(head), _head_first(head)))
    return out


def _blank(text: str, spans: list[tuple[int, int, list[str]]]) -> str:
    for a, b, _ in spans:
        text = text[:a] + " " * (b - a) + text[b:]
    return text


def situation(text: str) -> Situation:
    """What a name + description says the skill starts from and what comes after it."""
    before = _objects(_BEFORE, text)
    kept = _blank(text, before)
    has = _objects(_HAS, kept)
    consumed = list(dict.fromkeys(k for *_, kinds in has for k in kinds))
    verbs = _blank(kept, has)
    carries = "plan" in consumed and bool(_CARRY_OUT.search(kept))
    return Situation(tuple(consumed), verbs, kept, carries)


def _name_kinds(part: str) -> list[str]:
    """Kinds a name's side names: as words, or as a bare kind ("md" in md-to-docx)."""
    return kinds_in(part.replace("-", " ")) or [t for t in part.split("-") if t in KINDS]


def stated_io(skill: SkillRecord) -> tuple[list[str], list[str]]:
    """(input kinds, output kinds) from the strongest signal present: the name's x-to-y, the
    description's convert clause, the body's labelled lines and Inputs/Outputs sections, the
    description's extract clause, the body's clauses; else each side pieced together from the
    body's sections and what the description says the skill starts from (`situation`) and
    makes (a plan it carries out makes code)."""
    name, desc = skill.name.replace("_", "-"), skill.description
    if "-to-" in name:
        left, right = name.split("-to-", 1)
        ins, outs = _name_kinds(left), _name_kinds(right)
        if ins and outs:
            return ins, outs
    for rx in (_CONVERT, _FROM_TO):
        m = rx.search(desc)
        if m and clause_kinds(m.group(1)) and clause_kinds(m.group(2)):
            return clause_kinds(m.group(1)), clause_kinds(m.group(2))
    said_in, said_out = labelled_io(skill.body)
    if said_in and said_out:
        return said_in, said_out
    sit = situation(desc)
    m = _FROM.search(sit.kept)  # the description's "extract <what> from <where>"
    got = clause_kinds(m.group(1)) if m and _TAKE_OUT.match(m.group(0)) else []
    src = kinds_in(m.group(2)) if m else []
    if got and src and not set(got) & set(src):
        return src, got  # before the body's clauses: those are often one step of the procedure
    said_in, said_out = body_io(skill.body)
    if said_in and said_out:
        return said_in, said_out
    ins = said_in or kinds_in(
        _sections(skill.body, ("input", "prerequisite", "when to use", "use when"))
    )
    outs = said_out or kinds_in(_sections(skill.body, _OUT_HEADS))
    ins = _first(list(sit.consumed) + src + ins)
    m = _MAKE.search(sit.verbs)
    if m and kinds_in(m.group(1)):
        outs = kinds_in(m.group(1)) + outs
    if sit.carries_out_plan:
        outs = ["code", *outs]
    return ins, _first(outs)


def _first(kinds: list[str]) -> list[str]:
    return list(dict.fromkeys(kinds))


def _pre_phrase(kind: str) -> str:
    noun = KINDS[kind][1]
    return f"a folder of {noun}" if kind in FILE_KINDS else noun


# A skill whose output is the kind it read: a state that differs from the input in wording, or it
# would merge with its own pre-scenario and be a self-loop no monotone path can take.
_SAME_KIND = {
    "git": "new commits on a git branch",
    "tests": "test run results with failures listed",
    "service": "a running service after a fresh deploy",
    "container": "running containers built from the setup",
}


def _post_phrase(kind: str, category: str, source: str) -> str:
    noun, src = KINDS[kind][1], KINDS[source][1]
    if kind == source and kind in ("report", "plan"):
        return "a finished written report" if kind == "report" else "a written step-by-step plan"
    if kind == "report":
        return f"a Markdown report of findings about {src}"
    if kind == "plan":
        return f"a written step-by-step plan for {src}"
    if kind == source:
        return _SAME_KIND.get(kind, f"a transformed copy of the {noun.removeprefix('a ')}")
    # "new X" and not "X converted from Y": MiniLM barely sees word order, so "Markdown from PDF"
    # and "PDF from Markdown" would merge; the output's kind is what the next skill needs.
    return f"new {noun.removeprefix('a ')}"


def heuristic_scenarios(skill: SkillRecord, reason: str = "no LLM endpoint") -> Scenarios:
    """Deterministic pre/post scenarios for one usable skill, marked heuristic with `reason`."""
    category = category_of(skill)
    ins, outs = stated_io(skill)
    mentioned = kinds_in(f"{skill.name.replace('-', ' ')} {skill.description}")
    mentioned = mentioned or kinds_in(skill.body[:6000]) or ["text"]
    pool = ins or mentioned
    # What the description says the skill starts from is its input, a plan or a report included
    # ("when you have a written plan"); otherwise "report"/"plan" are what skills usually write:
    # an input only when nothing else is named.
    started = [k for k in situation(skill.description).consumed if k in pool]
    kind_in = started[0] if started else next(
        (k for k in pool if k not in ("report", "plan")), pool[0]
    )  # fmt: skip
    wanted = _OUTPUT_OF.get(category)
    if wanted and not (outs and outs[0] != kind_in):
        kind_out = wanted
    elif outs:
        kind_out = next((k for k in outs if k != kind_in), outs[0])
    else:  # a kind named only in a "before ..." clause is a later step's: not written here
        text = f"{skill.name.replace('-', ' ')} {skill.description}"
        later = set(kinds_in(text)) - set(kinds_in(situation(text).kept))
        kind_out = next((k for k in mentioned if k != kind_in and k not in later), kind_in)
    if category == "extract" and kind_out == kind_in:  # extraction yields a new form of the data
        kind_out = "csv" if re.search(r"\btables?\b", skill.description, re.I) else "text"
    return Scenarios(
        skill=skill.name,
        pre=_pre_phrase(kind_in),
        post=_post_phrase(kind_out, category, kind_in),
        heuristic=True,
        artifacts_in=(kind_in,),
        artifacts_out=(kind_out,),
        heuristic_reason=reason,
    )


class ScenarioState(BaseModel):
    summary: str = Field(min_length=8, max_length=200)
    artifacts: list[str] = Field(default_factory=list, max_length=12)

    @field_validator("summary")
    @classmethod
    def _one_line(cls, v: str) -> str:
        v = " ".join(v.split())
        if len(v.split()) < 3:
            raise ValueError("summary must be a short phrase of at least 3 words")
        return v

    @field_validator("artifacts")
    @classmethod
    def _kinds(cls, v: list[str]) -> list[str]:
        return [a.strip().lower().lstrip(".") for a in v if a.strip()]


class ScenarioReply(BaseModel):
    pre: ScenarioState
    post: ScenarioState


SYSTEM = (
    "You read an agent skill (a SKILL.md and the files beside it) and name the abstract workspace "
    "state it starts from (precondition scenario) and the state it leaves (postcondition "
    "scenario). A state says what exists and in which form, e.g. 'a folder of scanned PDF "
    "invoices' or 'a markdown report with a summary table'; no file names, no tool names, at most "
    "15 words. Answer with one JSON object only: "
    '{"pre": {"summary": str, "artifacts": [file kinds such as "pdf", "csv"]}, '
    '"post": {"summary": str, "artifacts": [...]}}'
)


def scenario_prompt(skill: SkillRecord) -> list[dict[str, str]]:
    files = "\n".join(f"- {f}" for f in skill.files[:MAX_FILES_LISTED]) or "(none)"
    body = skill.body[:BODY_CHARS] + ("\n[... trimmed]" if len(skill.body) > BODY_CHARS else "")
    user = (
        f"Skill name: {skill.name}\nDescription: {skill.description}\n\n"
        f"Files beside SKILL.md:\n{files}\n\nSKILL.md body:\n{body}"
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def parse_reply(text: str) -> ScenarioReply:
    """Validate one reply; ValueError (a ValidationError or ReplyError) with the reason."""
    return _validated(parse_json_reply(text))


def cache_key(skill: SkillRecord, model: str) -> str:
    return hashlib.sha256(f"{skill.content_sha256}\0{model}\0{PROMPT_VERSION}".encode()).hexdigest()


def _from_reply(skill: SkillRecord, reply: ScenarioReply) -> Scenarios:
    return Scenarios(
        skill=skill.name,
        pre=reply.pre.summary,
        post=reply.post.summary,
        heuristic=False,
        artifacts_in=tuple(reply.pre.artifacts),
        artifacts_out=tuple(reply.post.artifacts),
    )


def _read_cache(path: Path | None) -> ScenarioReply | None:
    if path is None or not path.is_file():
        return None
    try:
        return ScenarioReply.model_validate_json(path.read_text())
    except (OSError, ValidationError, ValueError):
        return None  # a damaged entry is asked again, then overwritten


def _write_cache(path: Path, reply: ScenarioReply) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(reply.model_dump_json(indent=1))
    tmp.replace(path)  # atomic: a killed build never leaves half an entry


def _validated(value: Any) -> ScenarioReply:
    try:
        return ScenarioReply.model_validate(value)
    except ValidationError as exc:
        raise ValueError(_short_error(exc)) from exc


def ask_scenarios(skill: SkillRecord, chat: ChatFn) -> tuple[ScenarioReply | None, str]:
    """(validated reply, "") or (None, why it failed) after the first answer and MAX_REPAIRS."""
    try:
        return ask_json(chat, scenario_prompt(skill), _validated, MAX_REPAIRS, skill.name), ""
    except LLMError as exc:
        return None, f"LLM call failed ({exc.kind}): {str(exc)[:200]}"
    except ReplyError as exc:
        return None, f"LLM replies invalid after {MAX_REPAIRS} repairs: {exc}"


def _short_error(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        parts = [f"{'.'.join(map(str, e['loc'])) or '(root)'}: {e['msg']}" for e in exc.errors()]
        return "; ".join(parts[:6])
    return str(exc)[:300]


def infer_scenarios(
    skill: SkillRecord, chat: ChatFn | None, cache_dir: str | Path | None, model: str = ""
) -> Scenarios:
    """A usable skill's scenarios: cached LLM answer, fresh LLM answer, or the heuristic (marked
    with the reason). `model` names the endpoint's model in the cache key."""
    if skill.problem:
        raise ValueError(
            f"skill folder {skill.folder} is unusable ({skill.problem}): skip it first"
        )
    if chat is None:
        return heuristic_scenarios(skill, "no LLM endpoint")
    path = Path(cache_dir) / f"{cache_key(skill, model)}.json" if cache_dir else None
    cached = _read_cache(path)
    if cached is not None:
        return _from_reply(skill, cached)
    reply, why = ask_scenarios(skill, chat)
    if reply is None:
        return heuristic_scenarios(skill, why)
    if path is not None:
        _write_cache(path, reply)
    return _from_reply(skill, reply)


def scenarios_summary(items: list[Scenarios]) -> dict[str, int]:
    heur = sum(s.heuristic for s in items)
    return {"llm": len(items) - heur, "heuristic": heur}
