
/* clawloop-enter UID TASKS_FD REPORT_FD RESOURCE=VALUE... -- PROGRAM ARGS...
   Joins a memory cgroup by writing "0" to TASKS_FD (-1: none): a thread moving itself skips the
   kernel's global cgroup lock. Sets each rlimit (soft = hard). Becomes UID (-1: stay) with no
   supplementary groups. Then execs PROGRAM. Any failure: a message on REPORT_FD, exit 125.
   REPORT_FD is closed by the exec, so nothing the program runs can forge such a message. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

static int report = 2;

static int fail(const char *what) {
    dprintf(report, "%s: %s", what, strerror(errno));
    return 125;
}

int main(int argc, char **argv) {
    if (argc < 6) { errno = EINVAL; return fail("usage"); }
    long uid = strtol(argv[1], NULL, 10);
    int fd = (int)strtol(argv[2], NULL, 10);
    report = (int)strtol(argv[3], NULL, 10);
    if (fcntl(report, F_SETFD, FD_CLOEXEC) != 0) { report = 2; return fail("report fd"); }
    if (fd >= 0) {
        if (write(fd, "0", 1) != 1) return fail("join cgroup");
        close(fd);
    }
    int i = 4;
    for (; i < argc && strcmp(argv[i], "--") != 0; i++) {
        char *eq;
        int which = (int)strtol(argv[i], &eq, 10);
        if (*eq != '=') { errno = EINVAL; return fail(argv[i]); }
        struct rlimit lim;
        lim.rlim_cur = lim.rlim_max = strtoull(eq + 1, NULL, 10);
        if (setrlimit(which, &lim) != 0) return fail(argv[i]);
    }
    if (i + 1 >= argc) { errno = EINVAL; return fail("no program after --"); }
    if (uid >= 0 && (setgroups(0, NULL) != 0 || setresgid(uid, uid, uid) != 0
                     || setresuid(uid, uid, uid) != 0)) return fail("switch uid");
    execvp(argv[i + 1], argv + i + 1);
    return fail(argv[i + 1]);
}
