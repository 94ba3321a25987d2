/* src/run/run-lock.h - one process per run directory.  RUNDIR/lock is held
 * with flock(2) by the run's controller for as long as it lives: a second
 * controller (a --resume while the first still runs) would interleave the
 * journal and prune the other's checkpoints, and a failed start must not
 * remove a directory another spotdeck has begun to use.  The kernel drops
 * the lock with the process, even on SIGKILL, so a crash leaves no stale
 * lock to clean up.  The file holds the holder's pid and a newline, only
 * for the message that names it. */
#ifndef SD_RUN_RUN_LOCK_H
#define SD_RUN_RUN_LOCK_H

/* Takes RUN_DIR/lock (created 0644 if missing) and writes this process's
 * pid into it.  Returns 0 with *fd the open, locked file (close it to
 * release the run directory), or -1 with *fd -1 and *why: "RUN_DIR/lock:
 * REASON" when it cannot be opened, "RUN_DIR: in use by another spotdeck
 * (pid PID); stop it first" when another process holds it. */
int sd_run_lock(const char *run_dir, int *fd, char **why);

/* Whether another process holds RUN_DIR/lock: 1 (and *fd -1) if so; else 0
 * with *fd the lock, now held by this process until it closes *fd, or -1
 * when RUN_DIR has no lock file (no run ever locked it). */
int sd_run_lock_busy(const char *run_dir, int *fd);

#endif
