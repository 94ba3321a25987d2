/* src/run/run-lock.c - see run-lock.h. */
#include "config.h"

#include "src/run/run-lock.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

#include "src/base/errors.h"

int sd_run_lock(const char *run_dir, int *fd, char **why)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof path, "%s/lock", run_dir);
	*fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
	if (*fd < 0)
		return sd_why(why, "%s: %s", path, strerror(errno));
	if (flock(*fd, LOCK_EX | LOCK_NB) < 0) {
		char pid[32] = "";
		ssize_t n = pread(*fd, pid, sizeof pid - 1, 0);
		pid[n > 0 ? n : 0] = 0;
		pid[strcspn(pid, "\n")] = 0;
		close(*fd);
		*fd = -1;
		return sd_why(why, "%s: in use by another spotdeck (pid %s); stop it first", run_dir,
		              pid[0] ? pid : "?");
	}
	char pidline[32];
	int pl = snprintf(pidline, sizeof pidline, "%ld\n", (long)getpid());
	if (ftruncate(*fd, 0) < 0 || pwrite(*fd, pidline, (size_t)pl, 0) != pl) {
		/* The pid is only a courtesy for the message above. */
	}
	return 0;
}

int sd_run_lock_busy(const char *run_dir, int *fd)
{
	char path[PATH_MAX + 16];
	snprintf(path, sizeof path, "%s/lock", run_dir);
	*fd = open(path, O_RDWR | O_CLOEXEC);
	if (*fd >= 0 && flock(*fd, LOCK_EX | LOCK_NB) < 0) {
		close(*fd);
		*fd = -1;
		return 1;
	}
	return 0;
}
