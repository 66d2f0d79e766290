/* Runs a command and prints its own peak RSS in KiB (wait4's ru_maxrss).
 *
 *   peak-rss [-t SECONDS] COMMAND [ARGS...]
 *
 * -t: a daemon is sent SIGTERM after SECONDS and must then exit 0 (a clean shutdown); without it
 * the command must exit 0. Its stdout goes to /dev/null.
 *
 * Why C: Linux counts the memory a process had before exec in its peak (exec keeps the old
 * address space's high-water mark), so the measuring process must itself be tiny; a Python or
 * Rust parent would add its own 5-14 MiB to every figure. Built static by .ci/budget.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int first = 1;
    double seconds = -1;
    if (argc > 2 && argv[1][0] == '-' && argv[1][1] == 't') {
        seconds = atof(argv[2]);
        first = 3;
    }
    if (first >= argc) {
        fprintf(stderr, "usage: peak-rss [-t SECONDS] COMMAND [ARGS...]\n");
        return 2;
    }
    pid_t pid = fork();
    if (pid < 0) {
        perror("peak-rss: fork");
        return 1;
    }
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        if (null >= 0) dup2(null, 1);
        execvp(argv[first], argv + first);
        perror("peak-rss: exec");
        _exit(127);
    }
    if (seconds >= 0) {
        struct timespec nap = {(time_t)seconds, (long)((seconds - (time_t)seconds) * 1e9)};
        nanosleep(&nap, NULL);
        if (waitpid(pid, NULL, WNOHANG) != 0) {
            fprintf(stderr, "peak-rss: %s exited before its %g s\n", argv[first], seconds);
            return 1;
        }
        kill(pid, SIGTERM);
    }
    int status;
    struct rusage usage;
    if (wait4(pid, &status, 0, &usage) < 0) {
        perror("peak-rss: wait4");
        return 1;
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "peak-rss: %s did not exit 0 (status %d)\n", argv[first], status);
        return 1;
    }
    printf("%ld\n", usage.ru_maxrss);
    return 0;
}
