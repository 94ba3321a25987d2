/* src/controller/commands.c - the operator's command table (add, drop, swap,
 * checkpoint, pause, resume, quit, autopilot, help).  The autopilot runs its
 * actions through this table too; c->cmd_by says who runs the command being
 * dispatched, so the operator's add, swap and drop are told to the
 * autopilot, which never undoes them. */
#include "config.h"

#include "src/controller/internal.h"

/* The fleet's messages name the problem, not the command (the fleet has
 * other callers): each command puts its own name before them. */
#define FLEET_WHY (why && *why ? *why : "?")

/* add [N | OFFER]: N local workers, or one server of a market offer. */
static int cmd_add(struct sd_controller *c, int argc, char **argv, char **why)
{
	long n = 1;
	const char *offer = "local";
	if (argc == 2) {
		char *end;
		n = strtol(argv[1], &end, 10);
		if (*end || end == argv[1]) {
			n = 1;
			offer = argv[1];
		} else if (n < 1 || n > 64) {
			return sd_why(why, "add: expected a count from 1 to 64, got '%s'", argv[1]);
		}
	}
	char id[16];
	for (long i = 0; i < n; i++) {
		if (sd_fleet_acquire(c->fleet, offer, id, sizeof id, why) < 0)
			return sd_why(why, "add %s", FLEET_WHY);
		if (!strcmp(c->cmd_by, "operator"))
			ctl_ap_operator_added(c, id);
	}
	return 0;
}

static int cmd_drop(struct sd_controller *c, int argc, char **argv, char **why)
{
	(void)argc;
	bool operator = !strcmp(c->cmd_by, "operator");
	if (sd_fleet_release(c->fleet, argv[1], operator ? "operator" : c->cmd_by, why) < 0)
		return sd_why(why, "drop %s: %s", argv[1], FLEET_WHY);
	if (operator)
		ctl_ap_operator_dropped(c, argv[1]);
	return 0;
}

/* swap SERVER OFFER: acquire the replacement now, drop SERVER once the
 * replacement trains, so the cluster never shrinks in between. */
static int cmd_swap(struct sd_controller *c, int argc, char **argv, char **why)
{
	(void)argc;
	char id[16];
	if (!sd_fleet_has_server(c->fleet, argv[1]))
		return sd_why(why, "swap: no server '%s'", argv[1]);
	if (sd_fleet_swap(c->fleet, argv[1], argv[2], id, sizeof id, why) < 0)
		return sd_why(why, "swap %s for %s", argv[1], FLEET_WHY);
	if (!strcmp(c->cmd_by, "operator"))
		ctl_ap_operator_added(c, id);
	return 0;
}

/* orphans adopt|delete|keep: the answer to the cloud provider's question
 * about the VMs an earlier controller of the run left. */
static int cmd_orphans(struct sd_controller *c, int argc, char **argv, char **why)
{
	(void)argc;
	if (sd_fleet_answer_orphans(c->fleet, argv[1], why) < 0)
		return sd_why(why, "orphans: %s", FLEET_WHY);
	return 0;
}

static int cmd_checkpoint(struct sd_controller *c, int argc, char **argv, char **why)
{
	for (struct conn *k = c->conns; k; k = k->next)
		if (k->member && k->rank == 0) {
			ctl_conn_send(k, sd_msg_new(SD_MSG_CHECKPOINT));
			return 0;
		}
	return sd_why(why, "checkpoint: no worker is training");
}

static int cmd_pause(struct sd_controller *c, int argc, char **argv, char **why)
{
	if (c->paused)
		return sd_why(why, "pause: already paused");
	c->paused = 1;
	for (struct conn *k = c->conns; k; k = k->next)
		if (k->member)
			ctl_conn_send(k, sd_msg_new(SD_MSG_PAUSE));
	/* An empty generation records the pause; nobody is sent one. */
	ctl_schedule_generation(c, "paused");
	return 0;
}

static int cmd_resume(struct sd_controller *c, int argc, char **argv, char **why)
{
	if (!c->paused)
		return sd_why(why, "resume: not paused");
	c->paused = 0;
	ctl_schedule_generation(c, "resumed");
	return 0;
}

static void on_quit_timeout(uv_timer_t *t)
{
	struct sd_controller *c = t->data;
	ctl_journal_kv(c, SD_EV_ERROR, "reason",
	               "quit: no final checkpoint within 15 s; --resume continues from the latest one",
	               "path", c->latest_ckpt[0] ? c->latest_ckpt : "none");
	ctl_finish(c, 1);
}

/* While quitting: asks the current generation's rank 0 for the final
 * checkpoint.  Called again for each generation formed before it comes: a
 * request to a worker that is no longer rank 0 is never answered.  The
 * worker takes it at its next step boundary. */
void ctl_quit_request_final(struct sd_controller *c)
{
	if (!c->quitting || c->exiting || c->paused)
		return;
	for (struct conn *k = c->conns; k; k = k->next)
		if (k->member && k->rank == 0) {
			cJSON *ck = sd_msg_new(SD_MSG_CHECKPOINT);
			cJSON_AddStringToObject(ck, "reason", "final");
			ctl_conn_send(k, ck);
			return;
		}
}

/* quit: checkpoint first when a worker holds the run's state (rank 0
 * streams it; a generation still forming gets the request once formed),
 * then stop the workers and release the servers; gives up waiting after
 * 15 s.  Nothing to save when paused or before any worker joined. */
int ctl_cmd_quit(struct sd_controller *c, int argc, char **argv, char **why)
{
	if (c->quitting || c->exiting)
		return 0;
	int holders = 0;
	for (struct conn *k = c->conns; k; k = k->next)
		holders += k->authed && k->has_state && !k->closing;
	if (!holders || c->paused) {
		ctl_finish(c, 1);
		return 0;
	}
	c->quitting = 1;
	uv_timer_start(&c->grace_timer, on_quit_timeout, 15000, 0);
	ctl_quit_request_final(c);
	return 0;
}

static int cmd_help(struct sd_controller *c, int argc, char **argv, char **why);

const struct sd_command sd_commands[] = {
	{ "add", "[N|OFFER]", 0, 1, "start N local workers (default 1) or acquire a server of OFFER", cmd_add },
	{ "drop", "SERVER", 1, 1, "release SERVER: its worker leaves at the next step boundary", cmd_drop },
	{ "swap", "SERVER OFFER", 2, 2, "acquire OFFER, then drop SERVER once the new one trains", cmd_swap },
	{ "checkpoint", "", 0, 0, "checkpoint now (rank 0 streams it to the run directory)", cmd_checkpoint },
	{ "pause", "", 0, 0, "stop training at the next step boundary", cmd_pause },
	{ "resume", "", 0, 0, "continue after pause", cmd_resume },
	{ "quit", "", 0, 0, "stop the workers and exit", ctl_cmd_quit },
	{ "orphans", "adopt|delete|keep", 1, 1, "what becomes of the VMs an earlier controller of the run left",
	  cmd_orphans },
	{ "autopilot", "on|off|hold|deadline DURATION|budget USD", 1, 2,
	  "the autopilot: switch it, hold its announced action, or give its goal (it switches on)",
	  ctl_cmd_autopilot },
	{ "help", "", 0, 0, "list the commands", cmd_help },
	{ NULL, NULL, 0, 0, NULL, NULL },
};

static int cmd_help(struct sd_controller *c, int argc, char **argv, char **why)
{
	cJSON *ev = cJSON_CreateObject();
	cJSON *list = cJSON_AddArrayToObject(ev, "commands");
	for (const struct sd_command *k = sd_commands; k->name; k++) {
		char line[160];
		snprintf(line, sizeof line, "%s %s - %s", k->name, k->args, k->help);
		cJSON_AddItemToArray(list, cJSON_CreateString(line));
	}
	for (const struct sd_app_command *k = c->opts.app_commands; k && k->name; k++) {
		char line[160];
		snprintf(line, sizeof line, "%s %s - %s", k->name, k->args, k->help);
		cJSON_AddItemToArray(list, cJSON_CreateString(line));
	}
	ctl_journal(c, SD_EV_HELP, ev);
	return 0;
}

/* The usage checks every command gets, whichever table holds it: 0, or -1
 * with *why naming the command and its usage. */
static int check_args(const char *name, const char *args, int min_args, int max_args, int argc, char **why)
{
	if (argc - 1 > max_args)
		return max_args ? sd_why(why, "%s: too many arguments (usage: %s %s)", name, name, args)
		                : sd_why(why, "%s: takes no arguments", name);
	if (argc - 1 < min_args)
		return sd_why(why, "%s: too few arguments (usage: %s %s)", name, name, args);
	return 0;
}

/* Runs argv through the controller's table, then the program's. */
static int dispatch(struct sd_controller *c, int argc, char **argv, char **why)
{
	for (const struct sd_command *k = sd_commands; k->name; k++)
		if (!strcmp(k->name, argv[0])) {
			if (check_args(k->name, k->args, k->min_args, k->max_args, argc, why) < 0)
				return -1;
			return k->run(c, argc, argv, why);
		}
	for (const struct sd_app_command *k = c->opts.app_commands; k && k->name; k++)
		if (!strcmp(k->name, argv[0])) {
			if (check_args(k->name, k->args, k->min_args, k->max_args, argc, why) < 0)
				return -1;
			return k->run(c->opts.ctx, argc, argv, why);
		}
	return sd_why(why, "unknown command '%s' (try help)", argv[0]);
}

/* Runs and journals one line; operator: typed by the operator (the cockpit,
 * stdin, an attached client), not a trace's. */
int ctl_command(struct sd_controller *c, const char *line, int operator, char **why)
{
	return ctl_command_by(c, line, operator ? "operator" : "trace", why);
}

int ctl_command_by(struct sd_controller *c, const char *line, const char *by, char **why)
{
	char buf[512];
	snprintf(buf, sizeof buf, "%s", line);
	char *argv[8];
	int argc = 0;
	for (char *tok = strtok(buf, " \t\r\n"); tok && argc < 8; tok = strtok(NULL, " \t\r\n"))
		argv[argc++] = tok;
	if (!argc)
		return 0;
	const char *was = c->cmd_by;
	c->cmd_by = by;
	/* While the provider gives its machines back (sd_controller_close)
	 * the loop runs on and the control socket still reads lines, but
	 * there is no run left for a command to act on; help, which acts on
	 * nothing, still answers. */
	int rc = c->closing && strcmp(argv[0], "help") ? sd_why(why, "%s: the run has ended; its machines are being given back", argv[0])
	                    : dispatch(c, argc, argv, why);
	c->cmd_by = was;
	if (!strcmp(by, "operator") && rc == 0 && !strcmp(argv[0], "quit"))
		c->operator_quit = 1;
	cJSON *ev = cJSON_CreateObject();
	cJSON_AddStringToObject(ev, "command", line);
	cJSON_AddBoolToObject(ev, "ok", rc == 0);
	cJSON_AddStringToObject(ev, "by", by);
	if (rc < 0 && why && *why)
		cJSON_AddStringToObject(ev, "error", *why);
	ctl_journal(c, SD_EV_COMMAND, ev);
	return rc;
}

int sd_controller_command(struct sd_controller *c, const char *line, char **why)
{
	return ctl_command(c, line, 1, why);
}

int sd_controller_operator_quit(const struct sd_controller *c)
{
	return c->operator_quit;
}
