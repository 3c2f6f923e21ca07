#!/usr/bin/env bash
# Written by `clawloop import clawgym`: grades /workspace with the ClawGym task's own
# reward/reward.sh (verbatim in /tests/reward/), as ClawGym does: the folder is copied to
# <workspace>/reward/ and reward.sh runs; its last stdout line is the score. The agent wrote the
# workspace, so nothing of it may reach the grader but the files graded: Python never imports
# from the current folder or a user site, HOME and the scratch files are in a fresh folder of a
# name no one could plant, and a step that fails (a copy, reward.sh's exit) fails the grade.
set -eu
MOUNT=__MOUNT__
THRESHOLD=__THRESHOLD__
export PYTHONSAFEPATH=1 PYTHONNOUSERSITE=1 PYTHONDONTWRITEBYTECODE=1
work=$(mktemp -d)
export HOME="$work/home"
mkdir "$HOME"
chmod -R u+rwX /workspace/reward 2>/dev/null || true
rm -rf /workspace/reward
cp -R /tests/reward /workspace/reward
script="$MOUNT/reward/reward.sh"
if [ "$(readlink -f "$MOUNT" 2>/dev/null || true)" != /workspace ]; then
  # No $MOUNT -> /workspace link in this image (built before it had one): run a copy of
  # reward.sh that names /workspace instead; check.py gets the workspace as its argument.
  script="$work/clawgym-reward.sh"
  python3 -I -c 'import sys; t = open(sys.argv[1]).read(); open(sys.argv[2], "x").write(t.replace(sys.argv[3], "/workspace"))' \
    /workspace/reward/reward.sh "$script" "$MOUNT"
fi
cd /workspace
rc=0
bash "$script" >"$work/reward.stdout" 2>"$work/reward.stderr" || rc=$?
exec python3 -I - "$THRESHOLD" "$work" "$rc" <<'PY'
import json, math, sys

logs = "/logs/verifier"
threshold, work, rc = float(sys.argv[1]), sys.argv[2], int(sys.argv[3])
out = open(f"{work}/reward.stdout", errors="replace").read()
err = open(f"{work}/reward.stderr", errors="replace").read()
lines = [line.strip() for line in out.splitlines() if line.strip()]
score, reason = None, ""
tail = (err.strip().splitlines() or ["no output"])[-1][:300]
try:
    score = float(lines[-1])
except (IndexError, ValueError):
    reason = f"reward.sh printed no score (exit {rc}): {tail}"
if score is not None and not (math.isfinite(score) and 0.0 <= score <= 1.0):
    reason, score = f"reward.sh printed {lines[-1][:80]!r}, not a number in [0, 1]", None
if score is not None and rc != 0:
    reason, score = f"reward.sh exited {rc} (a failed check is no score): {tail}", None
reward = 0.0 if score is None else score
passed = score is not None and score >= threshold
if score is not None and not passed:
    reason = f"reward.sh scored {score:g}, below the pass threshold {threshold:g}"
json.dump({"reward": reward, "pass_threshold": threshold}, open(f"{logs}/reward.json", "w"))
details = {"reward": reward, "passed": passed, "checks": [], "reason": reason,
           "reward_sh": {"exit_code": rc, "stdout_tail": out[-2000:], "stderr_tail": err[-2000:]}}
json.dump(details, open(f"{logs}/details.json", "w"))
PY
