/* src/provider/ssh/transport.h - the ssh transport: workers started on
 * other hosts over OpenSSH, for every provider whose machines are reached
 * that way: the ssh provider's hosts file (ssh.c) and the clouds' VMs once
 * they run (cloud-vm.h).  Its user owns the offers and the machines; the
 * transport owns the connections.
 *
 * What it does for each host it is given: the worker started by a local
 * ssh(1) that passes the run's token on stdin (never on a command line)
 * to a short sh script on the host, which starts spotdeck-worker in a
 * session of its own (setsid), records its pid and waits for it, so the
 * local ssh lives as long as the worker and exits with its status; unless
 * workers dial the controller themselves (--advertise), the worker's
 * controller link rides that ssh as a remote forward from a Unix socket on
 * the host; signals by pid file over ssh; one shared control connection
 * per host (ControlMaster, sockets in a private directory), keep-alives
 * (ServerAliveInterval 5 s x 3), BatchMode and StrictHostKeyChecking=
 * accept-new unless the job says otherwise; probes of a host whose
 * session ended, a host that cannot be reached journaled
 * (host_unreachable) and cooled down (30 s by default, doubling up to
 * 16 min); and at the end, a close that never blocks the loop.
 *
 * What its user chooses (struct sd_ssh_hooks): what happens to a server
 * whose host cannot be reached while its worker trains (reported FAILED,
 * or judged by the user: a cloud can tell a preempted VM from a dead
 * host), and whether a host that lost servers is wanted back (the ssh
 * provider's hosts are probed after their cool-down and acquired again
 * once they answer; a cloud's VM is deleted and replaced instead).  A
 * host that is gone (a deleted or preempted VM) is never contacted again,
 * not even at the end of the run.
 *
 * Everything here runs on the loop thread. */
#ifndef SD_PROVIDER_SSH_TRANSPORT_H
#define SD_PROVIDER_SSH_TRANSPORT_H

#include "src/provider/provider.h"

/* The longest cool-down of a host that cannot be reached (16 min), and so
 * the largest first one (the setting cooldown_s) a user may allow: the
 * cool-down doubles on each failure up to it. */
#define SD_SSH_COOLDOWN_MAX_S 960.0

/* A host as the transport reaches it.  Strings are copied by
 * sd_ssh_host_add. */
struct sd_ssh_host {
	const char *name;       /* its label in the journal and the cockpit (required) */
	const char *host;       /* the DNS name or address ssh dials (required) */
	const char *user;       /* NULL: ssh's default */
	int port;               /* 0: 22 */
	const char *identity;   /* the private key file; NULL: ssh's default */
	const char *worker;     /* spotdeck-worker's path there; NULL: "spotdeck-worker" */
	const char *comm_host;  /* the address other hosts reach it at; NULL: host */
	const char *offer;      /* its offer, named in the journal's host_unreachable; NULL: none */
	int slots;              /* servers it runs at once, and at most wants back; 0: 1 */
};

struct sd_ssh_hooks {
	void *ctx;
	/* The transport reported SERVER FAILED to the fleet (its host cannot
	 * be reached while its worker trains).  NULL: nothing more to do. */
	void (*failed)(void *ctx, const char *server);
	/* SERVER's host cannot be reached over ssh while its worker trains
	 * (MESSAGE: one line saying so).  When set, the transport reports
	 * nothing to the fleet and calls neither failed nor this again for
	 * the server: the user judges it, since a VM that was preempted
	 * without a notice the worker heard looks exactly like a dead host
	 * from here, and only the cloud can tell the two apart.  The host is
	 * cooled down as without it.  NULL: the transport reports FAILED
	 * (code HOST_UNREACHABLE) and calls failed. */
	void (*unreachable)(void *ctx, const char *server, const char *message);
	/* When set, a host is wanted back once it lost a server (its session
	 * ended and the server was given back, or it failed as unreachable;
	 * at most its slots): after its cool-down it is probed (which also
	 * stops what the lost sessions left there), again and again, each
	 * cool-down twice as long, until it answers; then back(HOST, WANTED:
	 * the servers it lost, DOWN_S: seconds since the first unanswered
	 * probe).  NULL: lost hosts are never probed again (a cloud replaces
	 * its VMs). */
	void (*back)(void *ctx, int host, int wanted, double down_s);
	/* Where a host's worker path comes from, for the error of a host
	 * without it ("worker= in the hosts file"); NULL: "provider.worker in
	 * the job file". */
	const char *worker_setting;
};

/* A transport: env as for any provider (its settings: the ssh keys of
 * spotdeck-job(5), host_key_checking, known_hosts, connect_timeout,
 * cooldown_s and ssh, checked by its user; other keys are ignored; direct
 * and connect say whether the worker's link rides ssh); LABEL names its
 * user in the journal ("ssh", "gce").  Always 0 with *out today (why is
 * for what may fail later); starts with no host. */
struct sd_ssh_transport;
int sd_ssh_transport_create(struct sd_ssh_transport **out, const struct sd_provider_env *env, const char *label,
                            const struct sd_ssh_hooks *hooks, char **why);

/* Adds a host (copied; name and host required).  Returns its index. */
int sd_ssh_host_add(struct sd_ssh_transport *p, const struct sd_ssh_host *h);

/* SERVER's worker will run on host HOST (an index from sd_ssh_host_add):
 * launch() may be called for it.  Nothing is reported to the fleet. */
void sd_ssh_attach(struct sd_ssh_transport *p, const char *server, int host);

/* HOST is gone (deleted or preempted): never contacted again. */
void sd_ssh_host_gone(struct sd_ssh_transport *p, int host);

/* HOST's servers attached and not released, and the fleet clock
 * (sd_fleet_now) until which it cools down (0: it does not). */
int sd_ssh_host_live(const struct sd_ssh_transport *p, int host);
double sd_ssh_host_cool_until(const struct sd_ssh_transport *p, int host);

/* Polls `ssh HOST true` every 2 s until sshd on HOST runs it (DONE with
 * ok 1) or TIMEOUT_S pass (ok 0, SAID: ssh's last line).  A VM that its
 * cloud calls running still boots: its sshd answers tens of seconds
 * later.  At most one wait per host; DONE never runs after the transport
 * closed. */
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
