"""Verify holds a stored domain task to derivability (issue 24, item 3): the check reads the
reference plan from the folder's generator, the predicates from tests/answer.json and the
instruction from instruction.md; a folder whose instruction.md lost a value is dropped with the
value named, a sound one is kept, and a task of another origin gets no row."""

from __future__ import annotations

import io
import shutil
import tarfile

import _sabotage
import pytest
from _sabotage import make

from clawloop.generators.candidates import candidate_row
from clawloop.generators.forge import forge_candidate
from clawloop.generators.verify import HOST_CHECKS, TaskFiles, check_derivable, verify_task
from clawloop.generators.verify.derivable import embedded_task
from clawloop.harness.sandbox.base import SandboxConfig
from clawloop.harness.taskfolder.packing import tar_files
from clawloop.synthesis.domain.ground import Step

BWRAP = SandboxConfig(backend="bwrap")
needs_bwrap = pytest.mark.skipif(shutil.which("bwrap") is None, reason="no bwrap")
INSPECTION = {
    "hive_code": "HV-0021", "date": "2025-05-13", "inspector": "Ada Finch", "brood_frames": 3,
    "disease": "varroa", "temperament": "calm", "queen_seen": False, "notes": "brood patchy",
}  # fmt: skip
STATED = ", `queen_seen` = `false`"


def _inspected(t):
    t["inspections"].append(
        {"code": "IN-0135", "hive": "HV-0021", "date": "2025-05-13", "inspector": "Ada Finch",
         "brood_frames": 3, "disease": "varroa", "temperament": "calm", "queen_seen": False,
         "notes": "brood patchy"}
    )  # fmt: skip


@pytest.fixture(scope="module")
def forged(tmp_path_factory):
    """The built-in apiary_coop task recording an inspection with queen_seen=false (the tool's
    default is true), rendered by synth.make_task and forged into a stored task folder."""
    codes = []
    real = _sabotage.make_task

    def keep(*args, **kw):
        code, note = real(*args, **kw)
        codes.append(code)
        return code, note

    mp = pytest.MonkeyPatch()
    mp.setattr(_sabotage, "make_task", keep)
    try:
        steps = [Step("record_inspection", INSPECTION)]
        make("apiary_coop", steps, _inspected, tmp_path_factory.mktemp("inspection"))
    finally:
        mp.undo()
    cand = candidate_row(codes[0], 0, origin="domain:apiary_coop")
    row = forge_candidate(cand, BWRAP)
    assert row["status"] == "ok", row["error"]
    return row


def _edited(row, rel, edit):
    """The forged row with one file of its task folder rewritten by `edit`."""
    files = tar_files(row["task_tar"])
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for name, entry in sorted(files.items()):
            if entry is None:
                continue
            data, executable = entry
            if name == rel:
                data = edit(data.decode()).encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o755 if executable else 0o644
            tar.addfile(info, io.BytesIO(data))
    return dict(row, task_tar=buf.getvalue())


def _task(row):
    return TaskFiles(tar_files(row["task_tar"]), row["task_id"])


@needs_bwrap
def test_the_stored_plan_is_read_from_the_generator(forged):
    code = _task(forged).text("solution/generator.py")
    assert "STATE = " in code  # the snapshot is packed apart; the plan stays readable
    (step,) = embedded_task(code)["plan"]
    assert step["tool"] == "record_inspection" and step["params"]["queen_seen"] is False


@needs_bwrap
def test_a_sound_domain_folder_passes_and_one_that_lost_a_value_fails_naming_it(forged):
    assert STATED in _task(forged).text("instruction.md")
    ok, reason = check_derivable(_task(forged))
    assert ok, reason
    lost = _edited(forged, "instruction.md", lambda t: t.replace(STATED, ""))
    ok, reason = check_derivable(_task(lost))
    assert not ok
    assert "inspections.queen_seen = false" in reason and "record_inspection --queen_seen" in reason


@needs_bwrap
def test_a_task_of_another_origin_gets_no_row(forged):
    other = _edited(forged, "task.toml", lambda t: t.replace('"domain:apiary_coop"', '"user"'))
    assert 'origin = "user"' in _task(other).text("task.toml")
    assert check_derivable(_task(other)) is None
    assert [n for n, _ in HOST_CHECKS][-1] == "derivable"


@needs_bwrap
@pytest.mark.slow
def test_verify_keeps_the_sound_task_and_drops_the_edited_one_naming_the_value(forged):
    checks, verdict = verify_task(forged, BWRAP)
    assert verdict["kept"], verdict["reason"]
    (row,) = [c for c in checks if c["check"] == "derivable"]
    assert row["passed"]
    lost = _edited(forged, "instruction.md", lambda t: t.replace(STATED, ""))
    checks, verdict = verify_task(lost, BWRAP)
    assert not verdict["kept"]
    assert verdict["reason"].startswith("derivable: inspections.queen_seen = false"), verdict


@needs_bwrap
@pytest.mark.slow
def test_verify_keeps_synthesized_apiary_tasks_with_a_passing_derivable_row():
    """Sound built-in tasks, made end to end by synthesize_domain (seed 1 grounds the
    queen_seen=false inspection): each is kept by verify, its derivable row passing."""
    from _sabotage import DOMAINS

    from clawloop.synthesis.domain.synth import synthesize_domain

    made = synthesize_domain(DOMAINS["apiary_coop"], 2, 1, BWRAP)
    assert made.candidates, [g["reason"] for g in made.graphs]
    for cand in made.candidates:
        row = forge_candidate(cand, BWRAP)
        assert row["status"] == "ok", row["error"]
        checks, verdict = verify_task(row, BWRAP)
        assert verdict["kept"], verdict["reason"]
        assert [c["passed"] for c in checks if c["check"] == "derivable"] == [True]
