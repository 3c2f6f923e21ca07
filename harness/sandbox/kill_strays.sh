# shellcheck shell=sh
# Kills every process in the container but PID 1 (docker-init) and its first child, the sleeper
# the container lives on (`kill -KILL -1` would take the sleeper too, and init exits with it).
# Orphans are re-parented to init after the sleeper, so the sleeper is the first pid of init's
# children list. Everything is stopped first (`kill -1` reaches all at once), so a loop cannot
# fork a new process between the scan and the kill. Exit 3: the sleeper is not where expected.
read -r sleeper rest </proc/1/task/1/children
[ -n "$sleeper" ] || exit 3
kill -s STOP -1 2>/dev/null
for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case $p in 1|"$sleeper"|"$$") ;; *) kill -s KILL "$p" 2>/dev/null ;; esac
done
kill -s CONT "$sleeper"
