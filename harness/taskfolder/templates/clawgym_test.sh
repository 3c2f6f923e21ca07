#!/usr/bin/env bash
# Written by `clawloop import clawgym`: grades /workspace with the ClawGym task's own
# reward/reward.sh (verbatim in /tests/reward/), as ClawGym does: the folder is copied to
# <workspace>/reward/ and reward.sh runs; its last stdout line is the score.
set -u
MOUNT=__MOUNT__
THRESHOLD=__THRESHOLD__
LOGS=/logs/verifier
rm -rf /workspace/reward && cp -R /tests/reward /workspace/reward
script="$MOUNT/reward/reward.sh"
if [ "$(readlink -f "$MOUNT" 2>/dev/null)" != /workspace ]; then
  # No $MOUNT -> /workspace link in this image (built before it had one): run a copy of
  # reward.sh that names /workspace instead; check.py gets the workspace as its argument.
  script=/tmp/clawgym-reward.sh
  python3 -c 'import sys; t = open(sys.argv[1]).read(); open(sys.argv[2], "w").write(t.replace(sys.argv[3], "/workspace"))' \
    /workspace/reward/reward.sh "$script" "$MOUNT"
fi
cd /workspace
bash "$script" >"$LOGS/reward.stdout" 2>"$LOGS/reward.stderr"
echo $? >"$LOGS/reward.rc"
exec python3 - "$THRESHOLD" <<'PY'
import json, math, sys

logs = "/logs/verifier"
threshold = float(sys.argv[1])
out = open(f"{logs}/reward.stdout", errors="replace").read()
err = open(f"{logs}/reward.stderr", errors="replace").read()
rc = open(f"{logs}/reward.rc").read().strip()
lines = [line.strip() for line in out.splitlines() if line.strip()]
score, reason = None, ""
try:
    score = float(lines[-1])
except (IndexError, ValueError):
    tail = (err.strip().splitlines() or ["no output"])[-1][:300]
    reason = f"reward.sh printed no score (exit {rc}): {tail}"
if score is not None and not (math.isfinite(score) and 0.0 <= score <= 1.0):
    reason, score = f"reward.sh printed {lines[-1][:80]!r}, not a number in [0, 1]", None
reward = 0.0 if score is None else score
passed = score is not None and score >= threshold
if score is not None and not passed:
    reason = f"reward.sh scored {score:g}, below the pass threshold {threshold:g}"
json.dump({"reward": reward, "pass_threshold": threshold}, open(f"{logs}/reward.json", "w"))
details = {"reward": reward, "passed": passed, "checks": [], "reason": reason,
           "reward_sh": {"exit_code": rc, "stdout_tail": out[-2000:], "stderr_tail": err[-2000:]}}
json.dump(details, open(f"{logs}/details.json", "w"))
PY
