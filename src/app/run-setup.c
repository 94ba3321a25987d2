/* src/app/run-setup.c - see run-setup.h. */
#include "config.h"

#include "src/app/run-setup.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <uv.h>

#include "src/run/run-lock.h"

void sd_theme_dirs_init(struct sd_theme_dirs *td)
{
	memset(td, 0, sizeof *td);
	const char *home = getenv("HOME");
	if (home)
		snprintf(td->home, sizeof td->home, "%s/.config/spotdeck/themes", home);
	td->dir[0] = td->home;
	td->dir[1] = SD_DATADIR "/themes";
	td->dir[2] = SD_SRCDIR "/themes";
}

/* spotdeck-worker lives next to spotdeck (build tree and install). */
void sd_default_worker_path(char *out, size_t len)
{
	char self[PATH_MAX];
	size_t n = sizeof self;
	if (uv_exepath(self, &n) == 0) {
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = 0;
			snprintf(out, len, "%s/spotdeck-worker", self);
			if (access(out, X_OK) == 0)
				return;
		}
	}
	snprintf(out, len, "spotdeck-worker");
}

/* The GCE 2019 catalog: from the build tree when run from it, else installed. */
void sd_default_catalog(char *out, size_t len)
{
	char self[PATH_MAX];
	size_t n = sizeof self;
	if (uv_exepath(self, &n) == 0) {
		char *slash = strrchr(self, '/');
		if (slash) {
			*slash = 0;
			snprintf(out, len, "%s/data/gce-2019.json", self);
			if (access(out, R_OK) == 0)
				return;
		}
	}
	/* A build tree outside the source tree (VPATH): the sources' data. */
	snprintf(out, len, "%s/data/gce-2019.json", SD_SRCDIR);
	if (access(out, R_OK) == 0)
		return;
	snprintf(out, len, "%s/gce-2019.json", SD_DATADIR);
	if (access(out, R_OK) != 0)
		out[0] = 0;
}

void sd_run_dir_default_name(char *buf, size_t len)
{
	time_t now = time(NULL);
	struct tm tm;
	localtime_r(&now, &tm);
	strftime(buf, len, "run-%Y%m%d-%H%M%S", &tm);
}

static int discard_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st; (void)flag; (void)ftw;
	remove(path);
	return 0;
}

/* Removes a run directory this process created moments ago (job.json, token,
 * journal, empty checkpoints/ and logs/, worker logs of a failed start). */
void sd_run_dir_discard(const char *dir)
{
	/* Never under a run that another spotdeck started there meanwhile
	 * (this start made the directory but lost the race for its lock). */
	int fd;
	if (sd_run_lock_busy(dir, &fd))
		return;
	nftw(dir, discard_entry, 8, FTW_DEPTH | FTW_PHYS);
	if (fd >= 0)
		close(fd);
}

/* Makes the run directory *dir (its parents as needed, itself 0700 and
 * exclusively).  When it exists already: a default name (is_default, in
 * buf) takes a suffix -2 ... -99 until one is new; a name given is used as
 * it is (the controller refuses one that holds a run).  Returns 1 when this
 * call made the directory, else 0 (the controller reports other failures
 * by name). */
int sd_run_dir_make(const char **dir, char *buf, size_t len, int is_default)
{
	char parent[PATH_MAX];
	snprintf(parent, sizeof parent, "%s", *dir);
	for (char *p = parent + 1; (p = strchr(p, '/')); p++) {
		*p = 0;
		mkdir(parent, 0755);
		*p = '/';
	}
	if (mkdir(*dir, 0700) == 0)
		return 1;
	if (errno != EEXIST || !is_default)
		return 0;
	char base[64];
	snprintf(base, sizeof base, "%s", *dir);
	for (int i = 2; i < 100; i++) {
		snprintf(buf, len, "%.48s-%d", base, i);
		if (mkdir(buf, 0700) == 0) {
			*dir = buf;
			return 1;
		}
		if (errno != EEXIST)
			return 0;
	}
	return 0;
}
