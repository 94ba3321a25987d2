/* tests/ui-fixture.c - the made-up run of tests/ui-fixture.h. */
#include "config.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/ui-fixture.h"

static const struct {
	const char *id, *region, *zone, *gpu;
	int gpus, transient;
	double usd_h, ips, prev;
	int avail, estimated;
} offer_table[] = {
	{ "gce/us-west1-b/k80x1/spot", "us-west1", "us-west1-b", "K80", 1, 1, 0.135, 290, 0.08, 12, 0 },
	{ "gce/us-central1-c/p100x1/spot", "us-central1", "us-central1-c", "P100", 1, 1, 0.43, 1050, 0.21, 6, 0 },
	{ "gce/us-west1-b/v100x1/spot", "us-west1", "us-west1-b", "V100", 1, 1, 0.74, 1880, 0.34, 3, 0 },
	{ "gce/europe-west4-a/v100x1/spot", "europe-west4", "europe-west4-a", "V100", 1, 1, 0.81, 1880, 0.12, -1, 1 },
	{ "gce/us-east1-c/k80x1/spot", "us-east1", "us-east1-c", "K80", 1, 1, 0.135, 290, 0.41, 0, 0 },
	{ "gce/us-west1-b/v100x8/spot", "us-west1", "us-west1-b", "V100", 8, 1, 5.92, 13900, 0.34, 1, 0 },
	{ "gce/us-central1-c/p100x1/ondemand", "us-central1", "us-central1-c", "P100", 1, 0, 1.46, 1050, 0, 20, 0 },
	{ "gce/us-west1-b/v100x1/ondemand", "us-west1", "us-west1-b", "V100", 1, 0, 2.48, 1880, 0, 20, 0 },
	{ "gce/us-west1-b/k80x1/ondemand", "us-west1", "us-west1-b", "K80", 1, 0, 0.45, 290, 0, 20, 0 },
};
#define NOFFER_TABLE ((int)(sizeof offer_table / sizeof offer_table[0]))

static int by_cost(const void *a, const void *b)
{
	const struct sd_view_offer *x = a, *y = b;
	return (x->usd_per_mimage > y->usd_per_mimage) - (x->usd_per_mimage < y->usd_per_mimage);
}

static void fill_series(struct sd_view_series *s, double t_end, double step, double (*fn)(double, int), int seed)
{
	memset(s, 0, sizeof *s);
	for (int i = 0; i < SD_VIEW_HIST; i++) {
		double t = t_end - (SD_VIEW_HIST - 1 - i) * step;
		sd_view_series_push(s, t, (float)fn(t, seed));
	}
}

static double f_ips(double t, int seed)
{
	double base = seed == 1 ? 290 : seed == 2 ? 1050 : 1880;
	return base * (0.9 + 0.1 * sin(t / 40.0 + seed));
}

static double f_throughput(double t, int seed)
{
	double v = 4300 + 600 * sin(t / 60.0);
	/* A dip at each revocation of the fixture. */
	if ((t > 300 && t < 330) || (t > 480 && t < 500))
		v *= 0.55;
	return v;
}

static double f_loss(double t, int seed)
{
	return 0.35 + 2.0 * exp(-t / 200.0) + 0.02 * sin(t);
}

static double f_acc(double t, int seed)
{
	return 0.88 - 0.78 * exp(-t / 180.0);
}

static struct sd_view_offer *find_offer(struct ui_fixture *f, const char *id)
{
	for (int i = 0; i < f->view.noffers; i++) {
		if (strcmp(f->offers[i].id, id) == 0)
			return &f->offers[i];
	}
	return NULL;
}

static struct sd_view_server *find_server(struct ui_fixture *f, const char *id)
{
	for (int i = 0; i < f->view.nservers; i++) {
		if (strcmp(f->servers[i].id, id) == 0)
			return &f->servers[i];
	}
	return NULL;
}

static void set_server(struct ui_fixture *f, struct sd_view_server *s, const struct sd_view_offer *o,
                       const char *state, int rank)
{
	memset(s, 0, sizeof *s);
	snprintf(s->id, sizeof s->id, "s%d", ++f->next_id);
	snprintf(s->offer, sizeof s->offer, "%s", o->id);
	snprintf(s->zone, sizeof s->zone, "%s", o->zone);
	snprintf(s->gpu, sizeof s->gpu, "%s", o->gpu);
	snprintf(s->state, sizeof s->state, "%s", state);
	s->transient = o->transient;
	s->rank = rank;
	s->usd_per_hour = o->usd_per_hour;
	s->notice_left_s = 0;
	s->emulated = strcmp(o->gpu, "K80") == 0;
}

void ui_fixture_init(struct ui_fixture *f, int nservers)
{
	memset(f, 0, sizeof *f);
	struct sd_view *v = &f->view;
	if (nservers > UI_FIXTURE_MAX_SERVERS)
		nservers = UI_FIXTURE_MAX_SERVERS;
	v->version = 1;
	snprintf(v->job, sizeof v->job, "cnn on fashion-mnist, batch 256");
	v->step = 1234;
	v->total_steps = 23400;
	v->epoch = 3;
	v->epochs = 10;
	v->loss = 0.4123;
	v->test_accuracy = 0.8521;
	v->images_per_sec = 4321;
	v->elapsed_s = 754;
	v->eta_s = 3723;
	v->usd_spent = 1.23;
	v->usd_per_hour = 4.56;
	v->generation = 5;
	v->world_size = 3;
	v->simulated = 1;
	snprintf(v->provider, sizeof v->provider, "sim");
	snprintf(v->catalog, sizeof v->catalog, "gce-2019");
	v->hazard_scale = 30;
	v->boot_scale = 0.1;
	v->seed = 42;

	for (int i = 0; i < NOFFER_TABLE && i < UI_FIXTURE_MAX_OFFERS; i++) {
		struct sd_view_offer *o = &f->offers[i];
		snprintf(o->id, sizeof o->id, "%s", offer_table[i].id);
		snprintf(o->provider, sizeof o->provider, "gce");
		snprintf(o->region, sizeof o->region, "%s", offer_table[i].region);
		snprintf(o->zone, sizeof o->zone, "%s", offer_table[i].zone);
		snprintf(o->gpu, sizeof o->gpu, "%s", offer_table[i].gpu);
		o->gpus = offer_table[i].gpus;
		o->transient = offer_table[i].transient;
		o->usd_per_hour = offer_table[i].usd_h;
		o->images_per_sec = offer_table[i].ips;
		o->usd_per_mimage = o->usd_per_hour / (o->images_per_sec * 3600 / 1e6);
		o->p_revoked_1h = offer_table[i].prev;
		o->available = offer_table[i].avail;
		o->price_estimated = offer_table[i].estimated;
		v->noffers++;
	}
	qsort(f->offers, (size_t)v->noffers, sizeof f->offers[0], by_cost);
	v->offers = f->offers;

	/* The first four servers tell a story; the rest cycle through the offers. */
	static const char *const story[4][2] = {
		{ "gce/us-west1-b/v100x1/spot", "training" },
		{ "gce/us-west1-b/k80x1/spot", "training" },
		{ "gce/us-central1-c/p100x1/spot", "notice" },
		{ "gce/us-west1-b/v100x1/ondemand", "booting" },
	};
	v->servers = f->servers;
	for (int i = 0; i < nservers; i++) {
		const struct sd_view_offer *o;
		const char *state;
		if (i < 4) {
			o = find_offer(f, story[i][0]);
			state = story[i][1];
		} else {
			o = &f->offers[i % v->noffers];
			state = i % 7 == 0 ? "joining" : "training";
		}
		struct sd_view_server *s = &f->servers[v->nservers++];
		int rank = strcmp(state, "training") == 0 || strcmp(state, "notice") == 0 ? i : -1;
		set_server(f, s, o, state, rank);
		int kind = strcmp(o->gpu, "K80") == 0 ? 1 : strcmp(o->gpu, "P100") == 0 ? 2 : 3;
		if (rank >= 0) {
			fill_series(&s->ips, v->elapsed_s, 5, f_ips, kind);
			s->images_per_sec = s->ips.v[(s->ips.head + s->ips.len - 1) % SD_VIEW_HIST];
			s->compute_ms = kind == 1 ? 402 : kind == 2 ? 118 : 66;
			s->comm_ms = 21 + i % 5;
		}
		s->uptime_s = 600 + 37 * i;
		s->usd_so_far = s->usd_per_hour * s->uptime_s / 3600;
		if (strcmp(state, "notice") == 0)
			s->notice_left_s = 23;
	}
	v->world_size = 0;
	for (int i = 0; i < v->nservers; i++)
		v->world_size += f->servers[i].rank >= 0;

	static const struct { double t; const char *server, *zone, *gpu; double life, notice; long lost; double rec; } revs[] = {
		{ 300, "s90", "us-west1-b", "V100", 3720, 30, 12, 8.2 },
		{ 480, "s91", "us-east1-c", "K80", 1250, 30, 0, 5.1 },
		{ 700, "s92", "us-west1-b", "V100", 2480, 30, 3, -1 },
	};
	v->revocations = f->revocations;
	for (size_t i = 0; i < sizeof revs / sizeof revs[0]; i++) {
		struct sd_view_revocation *r = &f->revocations[v->nrevocations++];
		r->t = revs[i].t;
		snprintf(r->server, sizeof r->server, "%s", revs[i].server);
		snprintf(r->zone, sizeof r->zone, "%s", revs[i].zone);
		snprintf(r->gpu, sizeof r->gpu, "%s", revs[i].gpu);
		r->lifetime_s = revs[i].life;
		r->notice_s = revs[i].notice;
		r->steps_lost = revs[i].lost;
		r->recovery_s = revs[i].rec;
		v->revocation_marks[v->nmarks++] = r->t;
	}
	fill_series(&v->throughput, v->elapsed_s, 6, f_throughput, 0);
	fill_series(&v->loss_hist, v->elapsed_s, 6, f_loss, 0);
	fill_series(&v->acc_hist, v->elapsed_s, 6, f_acc, 0);
	snprintf(v->message, sizeof v->message, "step 1234: loss 0.4123, 4321 img/s");
}

void ui_fixture_tick(struct ui_fixture *f, double dt)
{
	static const char *const walk[] = { "requested", "provisioning", "booting", "joining", "training" };
	struct sd_view *v = &f->view;
	f->tick++;
	v->version++;
	v->step += 7;
	v->elapsed_s += dt;
	if (v->eta_s > dt)
		v->eta_s -= dt;
	v->loss = f_loss(v->elapsed_s, 0);
	v->images_per_sec = f_throughput(v->elapsed_s, 0);
	v->usd_spent += v->usd_per_hour * dt / 3600;
	sd_view_series_push(&v->throughput, v->elapsed_s, (float)v->images_per_sec);
	sd_view_series_push(&v->loss_hist, v->elapsed_s, (float)v->loss);
	if (f->tick % 4 == 0) {
		v->test_accuracy = f_acc(v->elapsed_s, 0);
		sd_view_series_push(&v->acc_hist, v->elapsed_s, (float)v->test_accuracy);
	}
	v->world_size = 0;
	for (int i = 0; i < v->nservers; i++) {
		struct sd_view_server *s = &f->servers[i];
		for (int k = 0; k < 4; k++) {
			if (strcmp(s->state, walk[k]) == 0) {
				snprintf(s->state, sizeof s->state, "%s", walk[k + 1]);
				break;
			}
		}
		if (strcmp(s->state, "training") == 0 || strcmp(s->state, "notice") == 0) {
			int kind = strcmp(s->gpu, "K80") == 0 ? 1 : strcmp(s->gpu, "P100") == 0 ? 2 : 3;
			if (s->rank < 0)
				s->rank = v->world_size;
			s->images_per_sec = f_ips(v->elapsed_s, kind);
			sd_view_series_push(&s->ips, v->elapsed_s, (float)s->images_per_sec);
			if (s->compute_ms <= 0) {
				s->compute_ms = kind == 1 ? 402 : kind == 2 ? 118 : 66;
				s->comm_ms = 24;
			}
			v->world_size++;
		}
		if (strcmp(s->state, "released") != 0 && strcmp(s->state, "revoked") != 0) {
			s->uptime_s += dt;
			s->usd_so_far += s->usd_per_hour * dt / 3600;
		}
		if (s->notice_left_s > dt)
			s->notice_left_s -= dt;
	}
	snprintf(v->message, sizeof v->message, "step %ld: loss %.4f, %.0f img/s", v->step, v->loss, v->images_per_sec);
}

const char *ui_fixture_add(struct ui_fixture *f, const char *offer_id)
{
	struct sd_view_offer *o = find_offer(f, offer_id);
	if (!o || f->view.nservers >= UI_FIXTURE_MAX_SERVERS)
		return NULL;
	struct sd_view_server *s = &f->servers[f->view.nservers++];
	set_server(f, s, o, "requested", -1);
	f->view.version++;
	return s->id;
}

int ui_fixture_set_state(struct ui_fixture *f, const char *id, const char *state)
{
	struct sd_view_server *s = find_server(f, id);
	if (!s)
		return -1;
	snprintf(s->state, sizeof s->state, "%s", state);
	if (strcmp(state, "training") != 0) {
		s->rank = -1;
		s->images_per_sec = 0;
	}
	f->view.version++;
	return 0;
}

int ui_fixture_revoke(struct ui_fixture *f, const char *id)
{
	struct sd_view *v = &f->view;
	struct sd_view_server *s = find_server(f, id);
	if (!s || v->nrevocations >= UI_FIXTURE_MAX_REVOCATIONS)
		return -1;
	snprintf(s->state, sizeof s->state, "revoked");
	s->rank = -1;
	s->images_per_sec = 0;
	s->notice_left_s = 0;
	struct sd_view_revocation *r = &f->revocations[v->nrevocations++];
	memset(r, 0, sizeof *r);
	r->t = v->elapsed_s;
	snprintf(r->server, sizeof r->server, "%s", s->id);
	snprintf(r->zone, sizeof r->zone, "%s", s->zone);
	snprintf(r->gpu, sizeof r->gpu, "%s", s->gpu);
	r->lifetime_s = s->uptime_s;
	r->notice_s = 30;
	r->steps_lost = 4;
	r->recovery_s = -1;
	if (v->nmarks < 64)
		v->revocation_marks[v->nmarks++] = r->t;
	snprintf(v->suggestion, sizeof v->suggestion, "%s", f->offers[0].id);
	snprintf(v->suggestion_for, sizeof v->suggestion_for, "%s", s->id);
	snprintf(v->message, sizeof v->message, "%s revoked after %.0f s (30 s notice)", s->id, s->uptime_s);
	v->version++;
	return 0;
}
