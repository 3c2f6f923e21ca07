#!/usr/bin/env bash
# Screenshots of the Prefect UI after a finished one-iteration run: the flow-runs page and the loop's
# run page (its stage flow runs), written to docs/img/. Starts a throwaway Prefect server (own
# PREFECT_HOME, free port), runs `clawloop run --iterations 1` on a small local config against it,
# shoots the pages with headless Chromium, and stops the server.
#
#   apt-get install -y chromium      # once
#   scripts/ui_screenshot.sh         # from the repository root; ~3-5 min on 2 cores
#
# Env: OUT_DIR (default docs/img), PY (default .venv/bin/python), KEEP_TMP=1 keeps the temp folder.
set -euo pipefail

cd "$(dirname "$0")/.."
OUT_DIR=${OUT_DIR:-docs/img}
PY=${PY:-.venv/bin/python}
BIN=$(dirname "$PY")
command -v chromium >/dev/null || { echo "chromium not found: apt-get install -y chromium" >&2; exit 1; }

WORK=$(mktemp -d /tmp/clawloop-ui-XXXXXX)
PORT=$("$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
export PREFECT_HOME="$WORK/prefect-home"
export PREFECT_SERVER_ANALYTICS_ENABLED=false
export PREFECT_API_URL="http://127.0.0.1:$PORT/api"
UI="http://127.0.0.1:$PORT"
SERVER_PID=""

cleanup() {
  if [ -n "$SERVER_PID" ]; then
    # the server runs in its own session (setsid): stop its process group, uvicorn included
    kill -TERM -- "-$SERVER_PID" 2>/dev/null || true
    for _ in $(seq 20); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.5; done
    kill -KILL -- "-$SERVER_PID" 2>/dev/null || true
  fi
  [ "${KEEP_TMP:-0}" = 1 ] || rm -rf "$WORK"
}
trap cleanup EXIT

echo "prefect server on $UI (PREFECT_HOME=$PREFECT_HOME)"
setsid "$BIN/prefect" server start --host 127.0.0.1 --port "$PORT" >"$WORK/server.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 120); do
  curl -fsS "$PREFECT_API_URL/health" >/dev/null 2>&1 && break
  kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/server.log" >&2; exit 1; }
  sleep 1
done
curl -fsS "$PREFECT_API_URL/health" >/dev/null || { echo "server did not answer" >&2; exit 1; }

# A small local run: few tasks, short episodes with the tiny offline model.
cat >"$WORK/ui-run.yaml" <<EOF
profile: local
iterations: 1
storage: {root: $WORK/runs}
synthesize: {n_train: 3, n_eval: 2}
rollout: {n: 2, band: [1, 1], max_turns: 2, max_tokens: 32}
diagnose: {eval_n: 1, embedder: hashed}
EOF
RUN_ID="ui-demo-$(date +%H%M%S)"
"$BIN/clawloop" run --config "$WORK/ui-run.yaml" --run-id "$RUN_ID" | tee "$WORK/run.log"

# The iteration's flow run (its subflows are the stages) and the diagnose stage's markdown artifact.
read -r ITER_ID ARTIFACT_ID < <(RUN_ID="$RUN_ID" "$PY" - <<'EOF'
import json, os, urllib.request
api, run_id = os.environ["PREFECT_API_URL"], os.environ["RUN_ID"]
def post(path, body):
    req = urllib.request.Request(f"{api}{path}", json.dumps(body).encode(),
                                 {"Content-Type": "application/json"})
    return json.load(urllib.request.urlopen(req))
runs = post("/flow_runs/filter", {"flow_runs": {"name": {"any_": [f"{run_id}-iter-1"]}}})
arts = post("/artifacts/filter", {"artifacts": {"key": {"any_": [f"{run_id}-iter-1-diagnose-summary"]}}})
if not runs or not arts:
    raise SystemExit(f"no iteration flow run or diagnose artifact for {run_id} on {api}")
print(runs[0]["id"], arts[0]["id"])
EOF
)
[ -n "${ARTIFACT_ID:-}" ] || { echo "could not find the run on the server" >&2; exit 1; }
echo "iteration flow run: $ITER_ID   diagnose artifact: $ARTIFACT_ID"

shoot() {  # shoot URL FILE WIDTH,HEIGHT
  local profile
  profile=$(mktemp -d "$WORK/chromium-XXXXXX")
  chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --user-data-dir="$profile" --virtual-time-budget=30000 --run-all-compositor-stages-before-draw \
    --window-size="$3" --hide-scrollbars --screenshot="$2" "$1" >/dev/null 2>&1
  # keep the PNGs small for the repository: an adaptive palette is lossless enough for a UI
  "$PY" - "$2" <<'EOF'
import sys
from PIL import Image
path = sys.argv[1]
img = Image.open(path).convert("RGB").quantize(colors=128, method=Image.Quantize.MEDIANCUT)
img.save(path, optimize=True)
EOF
  echo "wrote $2 ($(stat -c %s "$2") bytes)"
}

mkdir -p "$OUT_DIR"
shoot "$UI/runs" "$OUT_DIR/prefect-flow-runs.png" 1600,1300
shoot "$UI/runs/flow-run/$ITER_ID" "$OUT_DIR/prefect-iteration-run.png" 1600,1000
shoot "$UI/artifacts/artifact/$ARTIFACT_ID" "$OUT_DIR/prefect-diagnose-artifact.png" 1600,1400
