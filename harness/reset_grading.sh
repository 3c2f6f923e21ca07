# shellcheck shell=sh
# Empties the dirs the verifier reads from and writes to (harness/taskenv.py names them), whatever
# the graded code did to them (a planted reward.json or grader module, a dir made read-only);
# fails if anything is left. /solution and /tmp (the episode's HOME) too: grading sees none of
# what the episode wrote there.
for d in __TESTS__ __VERIFIER_LOGS__ __SOLUTION__ __TMP__; do
    chmod -R u+rwX "$d" 2>/dev/null
    find "$d" -mindepth 1 -delete 2>/dev/null
    [ -z "$(ls -A "$d")" ] || { echo "could not empty $d" >&2; exit 1; }
done
