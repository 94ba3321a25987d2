/* src/app/background.c - see background.h. */
#include "config.h"

#include "src/app/background.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* What the run's process writes to the pipe once it started. */
static const char ready[] = "\nspotdeck-ready\n";

/* A background run: the process that was started forks one that leaves the
 * terminal's session (setsid, then a second fork so that it can never get
 * a controlling terminal again), stdin /dev/null, and runs the controller;
 * its stdout and stderr go through a pipe to this process until the run
 * started (so a bad job or catalog is said here, and nothing is left
 * running), then to RUN_DIR/spotdeck.log.  This process then attaches a
 * cockpit to the run as any `spotdeck attach` does.  Returns 1 in the
 * child (the caller runs the controller with *ready_fd set), 0 in the
 * starting process after the run is ready (the caller attaches), -1 with
 * the run's exit status in *status when it did not start. */
int sd_background_fork(int *ready_fd, int *status)
{
	int p[2];
	if (pipe2(p, O_CLOEXEC) < 0) {
		fprintf(stderr, "spotdeck: pipe: %s\n", strerror(errno));
		*status = 1;
		return -1;
	}
	fflush(stdout);
	fflush(stderr);
	pid_t pid = fork();
	if (pid < 0) {
		fprintf(stderr, "spotdeck: fork: %s\n", strerror(errno));
		*status = 1;
		return -1;
	}
	if (pid == 0) {
		close(p[0]);
		if (setsid() < 0)
			_exit(1);
		pid_t again = fork();
		if (again != 0)
			_exit(again < 0);
		int dn = open("/dev/null", O_RDWR);
		if (dn >= 0) {
			dup2(dn, 0);
			close(dn);
		}
		dup2(p[1], 1);
		dup2(p[1], 2);
		*ready_fd = p[1];
		signal(SIGHUP, SIG_IGN);   /* no terminal to lose; SIGTERM still ends it */
		return 1;
	}
	close(p[1]);
	int ws;
	while (waitpid(pid, &ws, 0) < 0 && errno == EINTR)
		;
	/* Everything the run said before it was ready, then its word. */
	char buf[4096];
	size_t n = 0;
	char *all = NULL;
	ssize_t got;
	while ((got = read(p[0], buf, sizeof buf)) != 0) {
		if (got < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		char *na = realloc(all, n + (size_t)got + 1);
		if (!na)
			break;
		all = na;
		memcpy(all + n, buf, (size_t)got);
		n += (size_t)got;
		all[n] = 0;
	}
	close(p[0]);
	char *mark = all ? strstr(all, ready) : NULL;
	if (mark)
		*mark = 0;
	if (all && all[0])
		fputs(all, stderr);
	free(all);
	if (!mark) {
		*status = 1;
		return -1;
	}
	return 0;
}

void sd_background_ready(int ready_fd, const char *run_dir)
{
	char logpath[PATH_MAX + 32];
	snprintf(logpath, sizeof logpath, "%s/spotdeck.log", run_dir);
	int fd = open(logpath, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
	if (fd >= 0) {
		fflush(stdout);
		fflush(stderr);
		dup2(fd, 1);
		dup2(fd, 2);
		close(fd);
	}
	if (write(ready_fd, ready, sizeof ready - 1) < 0)
		perror("spotdeck: ready pipe");
	close(ready_fd);
}
