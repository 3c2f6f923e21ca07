"""SkillSynth's records: skills read from folders, their scenarios, and sampled paths.

A terminal trajectory is read as a chain scenario -> skill -> scenario: a skill turns an abstract
state (its pre-scenario: "a folder of scanned PDF invoices") into another (its post-scenario: "a
markdown report with a table"). Scenario nodes are merged phrasings; skills are the graph's edges.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class SkillRecord:
    """One skill folder: SKILL.md front matter + body, and the files beside it."""

    name: str
    folder: str  # the folder's name under the corpus root
    description: str
    body: str  # SKILL.md's markdown body (after the front matter)
    files: tuple[str, ...]  # other files in the folder, relative to it
    content_sha256: str  # of SKILL.md and the files beside it: the scenario cache key
    problem: str = ""  # why the folder is unusable ("" = usable): bad/missing front matter...


@dataclass(frozen=True)
class Scenarios:
    """A skill's inferred precondition and postcondition scenarios (abstract states)."""

    skill: str
    pre: str
    post: str
    heuristic: bool  # made by the offline extractor, not an LLM
    artifacts_in: tuple[str, ...] = ()  # file kinds named, e.g. ("pdf",)
    artifacts_out: tuple[str, ...] = ()
    heuristic_reason: str = ""  # why the heuristic was used (no endpoint, LLM replies invalid...)


@dataclass(frozen=True)
class PathStep:
    """One edge of a sampled path: `skill` takes scenario node `pre` to scenario node `post`."""

    skill: str
    pre: str  # scenario node id
    post: str  # scenario node id
    pre_text: str = ""  # the node's representative phrasing
    post_text: str = ""
    skill_description: str = ""


@dataclass(frozen=True)
class SkillPath:
    path_id: str  # stable hash of the steps
    steps: tuple[PathStep, ...] = field(default_factory=tuple)
