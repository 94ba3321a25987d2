/* src/app/background.h - a run that goes to the background (spotdeck(1):
 * the default, and --detach): the starting process forks the run's own,
 * which leaves the terminal's session, and waits until the run says it
 * started; what the run said until then (a bad job, a catalog error) is
 * shown by the starting process, so nothing is left running after a
 * failed start. */
#ifndef SD_APP_BACKGROUND_H
#define SD_APP_BACKGROUND_H

/* Forks the run's process: setsid, then a second fork so that it can
 * never get a controlling terminal again, stdin /dev/null, stdout and
 * stderr into a pipe to the starting process.  Returns 1 in the run's
 * process (it runs the controller and, once started, calls
 * sd_background_ready with *ready_fd), 0 in the starting process after the
 * run is ready (it attaches a cockpit as `spotdeck attach` does), -1 with
 * the run's exit status in *status when the run did not start. */
int sd_background_fork(int *ready_fd, int *status);

/* In the run's process, once the run started: its output goes to
 * RUN_DIR/spotdeck.log from now on, and the starting process is told;
 * ready_fd is closed. */
void sd_background_ready(int ready_fd, const char *run_dir);

#endif
