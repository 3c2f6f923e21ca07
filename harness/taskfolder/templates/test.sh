#!/bin/bash
# Verifier: grade /workspace against the hidden answer key in /tests; always leaves a reward.
# reward.json holds numbers only ({"reward": float}, as Harbor requires); the per-check details
# go beside it in details.json.
mkdir -p /logs/verifier
rm -f /logs/verifier/reward.* /logs/verifier/details.json
python3 -I -S /tests/grader.py --tests-dir /tests --workspace /workspace \
    --out /logs/verifier/reward.json --details /logs/verifier/details.json
status=$?
if [ ! -s /logs/verifier/reward.json ]; then
    reason="grader exited $status without writing a reward"
    echo "{\"reward\": 0.0, \"passed\": false, \"checks\": [], \"reason\": \"$reason\"}" \
        > /logs/verifier/details.json
    echo '{"reward": 0.0}' > /logs/verifier/reward.json
fi
exit 0
