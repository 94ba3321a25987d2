/* ui/view.h - what the cockpit shows: a read-only snapshot of the run that
 * src/ fills (from the controller, the provider and the market) and ui/
 * renders.  ui/ never sees sockets, processes, providers or the engine; it
 * reads this and sends command lines back (the same command table as the
 * headless input: "add OFFER", "swap SERVER OFFER", "drop SERVER",
 * "checkpoint", "pause", "resume", "quit").
 *
 * Units: seconds, USD, USD/hour, images/s.  Strings are NUL-terminated and
 * owned by the view.  Figures that are simulated or emulated say so through
 * the flags below, and the UI must label them on screen.
 */
#ifndef SD_UI_VIEW_H
#define SD_UI_VIEW_H

#include <stdint.h>

#define SD_VIEW_HIST 120        /* samples kept per time series */

/* A fixed ring of samples, oldest first when read from head. */
struct sd_view_series {
	float v[SD_VIEW_HIST];
	double t[SD_VIEW_HIST];     /* seconds since the run started */
	int len;                    /* valid samples, <= SD_VIEW_HIST */
	int head;                   /* index of the oldest sample */
};

struct sd_view_offer {
	char id[64];                /* "gce/us-west1-b/v100/spot" */
	char provider[16];          /* "gce" */
	char region[32], zone[32];
	char gpu[16];               /* "V100" */
	int gpus;                   /* GPUs per server */
	int transient;              /* 1 = spot/preemptible, 0 = on-demand */
	double usd_per_hour;
	double images_per_sec;      /* the offer's speed on the job's model (catalog) */
	double usd_per_mimage;      /* USD per million images = cost-efficiency */
	double p_revoked_1h;        /* P(revoked within 1 h) from the market model */
	int p_revoked_modelled;     /* 1: a real cloud's offer, P(revoked) the calibrated
	                             * market's estimate, not the market it runs on */
	int available;              /* servers that can still be acquired, -1 unknown */
	int price_estimated;        /* price is an estimate, not measured/quoted */
	int speed_estimated;        /* images_per_sec is the catalog's ResNet-32 speed
	                             * scaled to the job's model by training FLOPs
	                             * (CM-DARE's model), an estimate: shown '~' */
};

struct sd_view_server {
	char id[32];                /* "s3" */
	char offer[64];
	char zone[32];
	char gpu[16];
	char precision[8];          /* "fp32" or "bf16": what its worker computes in
	                             * (the job's "precision" resolved there); ""
	                             * until a worker says */
	int transient;              /* 1 = spot, 0 = on-demand (meaningless when local) */
	int local;                  /* no market offer: no type and no price, so its
	                             * usd figures are unknown (shown "-"), not $0 */
	char state[16];             /* requested provisioning booting joining training paused
	                             * (training, run paused) notice revoked released failed */
	int rank;                   /* -1 when not in the current generation */
	double images_per_sec;
	struct sd_view_series ips;  /* images/s history */
	double compute_ms, comm_ms; /* last step's split */
	double uptime_s;
	double usd_per_hour;        /* the rate it is billed at (its offer's price when
	                             * acquired, not today's); 0 once gone */
	int price_estimated;        /* that rate is an estimate: shown with '*' */
	double usd_so_far;
	int emulated;               /* speed paced to an emulated GPU */
	double notice_left_s;       /* > 0 while under notice */
};

struct sd_view_revocation {
	double t;                   /* seconds since run start */
	char server[32], zone[32], gpu[16];
	double lifetime_s;
	double notice_s;            /* notice given before the kill */
	long steps_lost;
	double recovery_s;          /* -1 until training continued */
	char replaced_by[64];       /* the offer of the server the autopilot added or
	                             * swapped in after it, "" none (the pane marks
	                             * the autopilot's replacements) */
};

/* One row of the what-if view (key w; src/app/whatif.c): a cluster the run
 * could switch to, with the planner's simulated time and cost for the
 * job's remaining work.  Every figure here is simulated; the UI says so. */
struct sd_view_whatif {
	char label[64];             /* "8x V100 spot"; the running cluster: "now: 4x K80 spot" */
	int current;                /* 1 for the cluster as it runs now */
	int servers;
	int transient;
	double time_p50_s, time_p90_s;    /* from now to the end of the job */
	double cost_p50_usd, cost_p90_usd;/* of the remaining work */
	double revocations;         /* per run */
	double failed;              /* share of runs that never finish */
	int pareto;                 /* on the time/cost frontier (medians) */
	char summary[160];          /* "add 8 x gce/us-west1-b/v100/spot; drop s1 s2" */
	char commands[1024];        /* the command lines (one per line) that switch to it */
};

struct sd_view {
	unsigned long version;      /* bumped on every change; redraw when it moves */
	/* header */
	char job[96];               /* "cnn on fashion-mnist, batch 256" */
	long step, total_steps;
	int epoch, epochs;
	double loss, test_accuracy; /* test_accuracy < 0 until the first evaluation */
	/* A language model's run (the journal's run_start says "unit":
	 * "tokens"): every images_per_sec of this view (header, charts,
	 * servers, offers) and usd_per_mimage count tokens, not images;
	 * val_loss (nats per token, < 0 until the first evaluation) and
	 * perplexity exp(val_loss) replace test_accuracy, and acc_hist holds
	 * the validation losses. */
	int unit_tokens;
	double val_loss;
	double images_per_sec;
	double elapsed_s, eta_s;    /* eta_s < 0 when unknown */
	double usd_spent, usd_per_hour;
	/* What those totals leave out or only estimate: servers without a price
	 * (local) that ran / that are live now, whose cost is unknown (shown
	 * "+?", never counted as $0); and servers billed at an estimated price
	 * (shown "*"). */
	int spent_unpriced, rate_unpriced;
	int spent_estimated, rate_estimated;
	double usd_saved;           /* billed so far against the same servers on-demand */
	int usd_saved_estimated;    /* an on-demand price behind it is an estimate */
	int paused;
	long generation;
	int world_size;
	/* market settings */
	int simulated;              /* market is the simulator */
	char provider[16], catalog[64];
	double hazard_scale, boot_scale;
	uint64_t seed;
	/* panes */
	struct sd_view_offer *offers;   int noffers;      /* sorted by usd_per_mimage */
	struct sd_view_server *servers; int nservers;
	struct sd_view_revocation *revocations; int nrevocations;  /* newest last */
	struct sd_view_series throughput;   /* global images/s */
	struct sd_view_series loss_hist;
	struct sd_view_series acc_hist;
	double revocation_marks[64]; int nmarks;   /* times of revocations */
	/* status line */
	char message[160];          /* last event or command result */
	char suggestion[64];        /* offer id suggested as replacement, "" none */
	char suggestion_for[32];    /* the revoked server it would replace */
	char suggestion_why[96];    /* why that offer, in a few words: "cheapest
	                             * $/Mimg; us-east1-c revoked 18s ago"; "" none */
	/* what-if view: rows sorted by median cost (NULL/0 until planned) */
	struct sd_view_whatif *whatif; int nwhatif;
	int whatif_busy;            /* a plan is being computed */
	unsigned long whatif_version;   /* bumped whenever the rows or note change */
	char whatif_note[192];      /* what was planned, or why it could not be */
	/* the background run (src/app/control.h): cockpits attached to it, 0
	 * when the cockpit runs the run itself (--foreground); this cockpit
	 * only watches (attach --read-only, or a finished run); and the run's
	 * end, "" while it runs ("finished: test accuracy 91.2 %", "quit"). */
	int clients;
	int read_only;
	char ended[160];
	/* A cloud provider's question (provider.orphans "ask"): the VMs an
	 * earlier controller of this run left, which wait for "orphans adopt",
	 * "orphans delete" or "orphans keep" ("2 VMs ...: sd-x-s1 in
	 * us-central1-a, ..."); "" when none is open. */
	char orphans_question[400];
	int orphans_asked;          /* how many it names */
	/* The autopilot (src/controller/autopilot.c): the header shows its goal
	 * and P(on time), the status line the action it announced. */
	int autopilot_on;
	char autopilot_goal[48];    /* "deadline 06:00" (local time), "budget $40.00"; "" never set */
	double autopilot_p;         /* P(done by the deadline) of its last decision; < 0 none */
	char autopilot_pending[160];  /* the announced command ("swap s3 OFFER"), "" none */
	double autopilot_pending_at;  /* elapsed_s when it runs */
};

/* Appends a sample to a series (drops the oldest when full). */
static inline void sd_view_series_push(struct sd_view_series *s, double t, float v)
{
	int i = (s->head + s->len) % SD_VIEW_HIST;
	if (s->len == SD_VIEW_HIST) {
		s->head = (s->head + 1) % SD_VIEW_HIST;
		i = (s->head + SD_VIEW_HIST - 1) % SD_VIEW_HIST;
	} else {
		s->len++;
	}
	s->v[i] = v;
	s->t[i] = t;
}

#endif
