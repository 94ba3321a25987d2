/* src/app/run-setup.h - what a spotdeck run finds before it starts, written
 * once for the run (cmd-run.c) and the clients (attach.c): the theme
 * folders, the worker program and the default catalog beside this program,
 * and the run directory a new run makes (and removes again when its start
 * fails). */
#ifndef SD_APP_RUN_SETUP_H
#define SD_APP_RUN_SETUP_H

#include <limits.h>
#include <stddef.h>

/* Where cockpit themes are looked up, in order: ~/.config/spotdeck/themes
 * ("" when HOME is unset: skipped), SD_DATADIR/themes, then the source
 * tree's themes/ (a build run in place).  dir[3] stays NULL, so dir fits
 * sd_cockpit_opts.theme_dirs; its strings live as long as td. */
struct sd_theme_dirs {
	char home[PATH_MAX];
	const char *dir[4];
};
void sd_theme_dirs_init(struct sd_theme_dirs *td);
#define SD_THEME_DIRS_N 3    /* the entries of dir that are set */

/* spotdeck-worker next to this program (the build tree and an install),
 * else "spotdeck-worker" from PATH; into out (len bytes). */
void sd_default_worker_path(char *out, size_t len);

/* The GCE 2019 catalog: the build tree's data/ beside this program, the
 * source tree's, then SD_DATADIR's; "" when none is readable. */
void sd_default_catalog(char *out, size_t len);

/* A new run's default directory name, "run-YYYYmmdd-HHMMSS" (local time). */
void sd_run_dir_default_name(char *buf, size_t len);

/* Makes the run directory *dir (its parents as needed, itself 0700 and
 * exclusively).  When it exists already: a default name (is_default, in
 * buf) takes a suffix -2 ... -99 until one is new, and *dir points at buf;
 * a name given is used as it is (the controller refuses one that holds a
 * run).  Returns 1 when this call made the directory, else 0 (the
 * controller reports other failures by name). */
int sd_run_dir_make(const char **dir, char *buf, size_t len, int is_default);

/* Removes a run directory this process made moments ago (job.json, token,
 * journal, empty checkpoints/ and logs/, worker logs of a failed start);
 * nothing when another spotdeck holds its lock meanwhile. */
void sd_run_dir_discard(const char *dir);

#endif
