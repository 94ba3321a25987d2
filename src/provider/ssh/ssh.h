/* src/provider/ssh/ssh.h - the ssh transport, lent to the cloud providers
 * (cloud-vm.h) whose machines are reached over OpenSSH once they run.
 *
 * The ssh provider (sd_provider_ssh) is a transport whose hosts come from
 * a hosts file, each an offer; a cloud's transport starts with no host and
 * the cloud adds each VM as a host when the VM runs.  The transport's
 * calls below (sd_ssh_launch, _signal, _lost, _release, _transport_close,
 * _transport_free) serve the cloud's servers exactly as the ssh
 * provider's operations, which are the same calls, serve a hosts file's: the worker started by a local ssh(1) that
 * passes the run's token on stdin, signals by pid file, a shared control
 * connection per host, keep-alives, probes of a host whose session ended.
 * What differs: no offers of its own (the cloud provider's catalog is the
 * run's), no comeback of a lost host (a VM that cannot be reached is
 * deleted and replaced, not waited for), and a host that is gone (deleted,
 * preempted) is never contacted again, not even at the end of the run.
 *
 * Everything here runs on the loop thread. */
#ifndef SD_PROVIDER_SSH_SSH_H
#define SD_PROVIDER_SSH_SSH_H

#include "src/provider/ssh/hosts.h"
#include "src/provider/provider.h"

struct sd_ssh_hooks {
	void *ctx;
	/* The transport reported SERVER FAILED to the fleet (its host cannot
	 * be reached while its worker trains): the cloud provider deletes the
	 * VM, since the fleet does not release a server that failed. */
	void (*failed)(void *ctx, const char *server);
	/* SERVER's host cannot be reached over ssh while its worker trains
	 * (MESSAGE: one line saying so).  When set, the transport reports
	 * nothing to the fleet and calls neither failed nor this again for
	 * the server: the cloud provider judges it, since a VM that was
	 * preempted without a notice the worker heard looks exactly like a
	 * dead host from here, and only the cloud can tell the two apart.
	 * The host is cooled down as without it.  NULL: the transport reports
	 * FAILED (code HOST_UNREACHABLE) and calls failed. */
	void (*unreachable)(void *ctx, const char *server, const char *message);
};

/* A transport: env as for any provider (its settings: the ssh keys of
 * spotdeck-job(5) that ssh.c knows, host_key_checking, known_hosts,
 * connect_timeout, ssh; other keys are ignored); LABEL names the cloud
 * provider in the journal ("gce").  0 with *out, or -1 with *why. */
struct sd_ssh_transport;
int sd_ssh_transport_create(struct sd_ssh_transport **out, const struct sd_provider_env *env, const char *label,
                            const struct sd_ssh_hooks *hooks, char **why);

/* Adds a host (copied; name, host and gpu required, slots taken as 1).
 * Returns its index. */
int sd_ssh_host_add(struct sd_ssh_transport *p, const struct sd_host *h);

/* SERVER's worker will run on host HOST (an index from sd_ssh_host_add):
 * launch() may be called for it.  Nothing is reported to the fleet. */
void sd_ssh_attach(struct sd_ssh_transport *p, const char *server, int host);

/* HOST is gone (deleted or preempted): never contacted again. */
void sd_ssh_host_gone(struct sd_ssh_transport *p, int host);

/* Polls `ssh HOST true` every 2 s until sshd on HOST runs it (DONE with
 * ok 1) or TIMEOUT_S pass (ok 0, SAID: ssh's last line).  A VM that GCE
 * calls RUNNING still boots: its sshd answers tens of seconds later.  At
 * most one wait per host; DONE never runs after the transport closed. */
typedef void (*sd_ssh_ready_cb)(void *arg, int host, int ok, const char *said);
void sd_ssh_wait_ready(struct sd_ssh_transport *p, int host, double timeout_s, sd_ssh_ready_cb done, void *arg);

/* The provider operations of provider.h on P's servers: the worker's
 * launch command line, a signal to it, its session lost, the server given
 * back, whether the controller link rides the ssh session; close and
 * free.  Close never blocks the loop: signals on their way are delivered,
 * then the run's directory on every host used goes, then the shared
 * connections end, each step's ssh killed after a grace period of 10 s
 * (SPOTDECK_SSH_CLOSE_WAIT_S replaces it); DONE(ARG) is called once every
 * ssh the transport started has exited (from inside close when there is
 * none).  After close, launch is refused and signal and lost do nothing;
 * free after DONE, once the loop ran the close callbacks. */
typedef void (*sd_ssh_closed_cb)(void *arg);
int sd_ssh_launch(struct sd_ssh_transport *p, const char *server, char *const *worker_argv, char ***argv,
                  char **why);
void sd_ssh_signal(struct sd_ssh_transport *p, const char *server, int sig);
void sd_ssh_lost(struct sd_ssh_transport *p, const char *server, int worker_alive);
void sd_ssh_release(struct sd_ssh_transport *p, const char *server);
int sd_ssh_link_in_session(const struct sd_ssh_transport *p);
void sd_ssh_transport_close(struct sd_ssh_transport *p, sd_ssh_closed_cb done, void *arg);
void sd_ssh_transport_free(struct sd_ssh_transport *p);

#endif
