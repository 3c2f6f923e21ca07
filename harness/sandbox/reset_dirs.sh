# shellcheck shell=sh
# Empties each dir named as an argument (taskenv.prepare_grading names the dirs the verifier
# reads from and writes to), whatever the graded code did to them (a planted reward.json or
# grader module, a dir made read-only); fails if anything is left. Run as the dir's owner.
for d in "$@"; do
    chmod -R u+rwX "$d" 2>/dev/null
    find "$d" -mindepth 1 -delete 2>/dev/null
    [ -z "$(ls -A "$d")" ] || { echo "could not empty $d" >&2; exit 1; }
done
