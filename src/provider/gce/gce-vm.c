/* src/provider/gce/gce-vm.c - a Spot VM's life on Compute Engine (see
 * gce-vm.h for the requests and their sources). */
#include "config.h"
#include "src/provider/gce/gce-vm.h"

#include <cJSON.h>
#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/provider/http/api-op.h"
#include "src/provider/http/http.h"

/* A create or a delete in progress. */
struct vm_op {
	struct sd_api_op op;         /* first: its timer, clock and place (api-op.h) */
	struct sd_gce_client *c;
	int create;
	char zone[64], name[64];
	char *body;                  /* the insert JSON */
	char request_id[37];
	char op_name[128];
	double poll_s;
	struct sd_gce_vm_result res;
	sd_gce_vm_cb cb;
	void *arg;
};

static void op_end(struct vm_op *o, int ok)
{
	o->res.ok = ok;
	o->res.seconds = sd_api_op_end(&o->op);
	o->cb(o->arg, &o->res);
	sd_api_op_close(&o->op);
}

static void op_fail(struct vm_op *o, enum sd_gce_block b, const char *code, const char *msg)
{
	o->res.block = b;
	snprintf(o->res.code, sizeof o->res.code, "%s", code);
	snprintf(o->res.message, sizeof o->res.message, "%s", msg);
	op_end(o, 0);
}

/* A failed answer: its error body's reason and message, classified. */
static void op_fail_answer(struct vm_op *o, const struct sd_http_response *r)
{
	struct sd_gce_error e;
	char err[64];
	if (r->status == 0) {
		op_fail(o, SD_GCE_BLOCK_RETRY, "http", r->error);
		return;
	}
	if (sd_gce_error_parse(r->body, r->body_len, &e, err, sizeof err) < 0) {
		snprintf(e.reason, sizeof e.reason, "http");
		snprintf(e.message, sizeof e.message, "HTTP %ld", r->status);
	}
	op_fail(o, sd_gce_classify(r->status, e.reason, e.message), e.reason[0] ? e.reason : "http", e.message);
}

/* METHOD PATH (under the project) with BODY; CB gets the answer.  Every
 * request of a create or delete is idempotent: the insert and the delete
 * carry their requestId, the rest only read. */
static void op_call(struct vm_op *o, const char *label, const char *method, const char *path, const char *body,
		    sd_http_cb cb)
{
	char url[1024], err[256];
	if (sd_gce_url(o->c, path, url, sizeof url) < 0)
		op_fail(o, SD_GCE_BLOCK_NONE, "request", "URL too long");
	else if (sd_gce_call(o->c, label, method, url, body, 1, cb, o, err, sizeof err) < 0)
		op_fail(o, SD_GCE_BLOCK_NONE, "request", err);
}

static void on_instance(void *arg, const struct sd_http_response *r);

static void poll_instance(struct vm_op *o)
{
	char path[256];
	snprintf(path, sizeof path, "zones/%s/instances/%s", o->zone, o->name);
	op_call(o, "gce instances.get", "GET", path, NULL, on_instance);
}

static void poll_again(struct sd_api_op *op)
{
	poll_instance((struct vm_op *)(void *)op);
}

static void on_instance(void *arg, const struct sd_http_response *r)
{
	struct vm_op *o = arg;
	char err[256];
	if (r->status == 404) {
		/* Gone while booting: a Spot VM with action DELETE preempted at
		 * once (SkyPilot blocks the zone for this). */
		op_fail(o, SD_GCE_BLOCK_ZONE, "NOT_FOUND", "the instance vanished while it booted");
		return;
	}
	if (r->status != 200) {
		op_fail_answer(o, r);
		return;
	}
	if (sd_gce_instance_parse(r->body, r->body_len, &o->res.vm, err, sizeof err) < 0) {
		op_fail(o, SD_GCE_BLOCK_NONE, "parse", err);
		return;
	}
	const char *st = o->res.vm.status;
	if (!strcmp(st, "RUNNING")) {
		op_end(o, 1);
	} else if (!strcmp(st, "PROVISIONING") || !strcmp(st, "STAGING") || !strcmp(st, "PENDING") ||
		   !strcmp(st, "REPAIRING")) {
		sd_api_op_wait(&o->op, o->poll_s, poll_again);
	} else {
		char m[128];
		snprintf(m, sizeof m, "the instance is %s before it ran", st);
		op_fail(o, SD_GCE_BLOCK_ZONE, "TERMINATED", m);
	}
}

static void on_operation(void *arg, const struct sd_http_response *r);

static void wait_operation(struct vm_op *o)
{
	char path[256];
	snprintf(path, sizeof path, "zones/%s/operations/%s/wait", o->zone, o->op_name);
	op_call(o, "gce operations.wait", "POST", path, NULL, on_operation);
}

static void on_operation(void *arg, const struct sd_http_response *r)
{
	struct vm_op *o = arg;
	struct sd_gce_op op;
	char err[256];
	if (r->status == 404 && !o->create) {
		op_end(o, 1); /* the instance and its delete are both done and gone */
		return;
	}
	if (r->status != 200) {
		op_fail_answer(o, r);
		return;
	}
	if (sd_gce_op_parse(r->body, r->body_len, &op, err, sizeof err) < 0) {
		op_fail(o, SD_GCE_BLOCK_NONE, "parse", err);
		return;
	}
	snprintf(o->op_name, sizeof o->op_name, "%s", op.name);
	if (op.target[0])
		snprintf(o->res.target, sizeof o->res.target, "%s", op.target);
	if (op.status != SD_GCE_OP_DONE) {
		wait_operation(o);
		return;
	}
	if (op.error_code[0]) {
		op_fail(o, sd_gce_classify(0, op.error_code, op.error_message), op.error_code, op.error_message);
		return;
	}
	if (o->create) {
		poll_instance(o);
	} else {
		o->res.ended_at = op.end_time;
		op_end(o, 1);
	}
}

static void on_request(void *arg, const struct sd_http_response *r)
{
	struct vm_op *o = arg;
	if (r->status == 404 && !o->create) {
		o->res.absent = 1;
		op_end(o, 1); /* nothing to delete */
		return;
	}
	on_operation(arg, r);
}

static void op_cancelled(struct sd_api_op *op)
{
	op_fail((struct vm_op *)(void *)op, SD_GCE_BLOCK_RETRY, "cancelled", "cancelled");
}

static void op_freed(struct sd_api_op *op)
{
	struct vm_op *o = (struct vm_op *)(void *)op;
	free(o->body);
	free(o);
}

static const struct sd_api_op_class op_class = { .cancelled = op_cancelled, .freed = op_freed };

static struct vm_op *op_new(struct sd_gce_client *c, int create, const char *zone, const char *name,
			    sd_gce_vm_cb cb, void *arg, char *err, size_t errlen)
{
	if (!sd_gce_name_ok(zone) || !sd_gce_name_ok(name)) {
		snprintf(err, errlen, "gce: zone '%s' or instance '%s' is not a resource name", zone, name);
		return NULL;
	}
	struct vm_op *o = calloc(1, sizeof *o);
	if (!o) {
		snprintf(err, errlen, "gce: out of memory");
		return NULL;
	}
	if (sd_http_request_id(o->request_id) < 0) {
		free(o);
		snprintf(err, errlen, "gce: no random bytes for a requestId");
		return NULL;
	}
	o->c = c;
	o->create = create;
	snprintf(o->zone, sizeof o->zone, "%s", zone);
	snprintf(o->name, sizeof o->name, "%s", name);
	o->cb = cb;
	o->arg = arg;
	sd_api_op_init(&o->op, &op_class);
	return o;
}

static void op_start(struct vm_op *o, const char *label, const char *method, const char *path)
{
	char p[256];
	sd_api_op_start(&o->op, sd_gce_client_http(o->c));
	snprintf(p, sizeof p, "%s?requestId=%s", path, o->request_id);
	memcpy(o->res.request_id, o->request_id, sizeof o->request_id);
	op_call(o, label, method, p, o->body, on_request);
}

int sd_gce_vm_create(struct sd_gce_client *c, const struct sd_gce_instance_spec *spec, double poll_s,
		     sd_gce_vm_cb cb, void *arg, char *err, size_t errlen)
{
	char *body = sd_gce_instance_json(spec, err, errlen);
	if (!body)
		return -1;
	struct vm_op *o = op_new(c, 1, spec->zone, spec->name, cb, arg, err, errlen);
	if (!o) {
		cJSON_free(body);
		return -1;
	}
	o->body = strdup(body);
	cJSON_free(body);
	if (!o->body) {
		free(o);
		snprintf(err, errlen, "gce: out of memory");
		return -1;
	}
	o->poll_s = poll_s > 0 ? poll_s : 2;
	char path[128];
	snprintf(path, sizeof path, "zones/%s/instances", spec->zone);
	op_start(o, "gce instances.insert", "POST", path);
	return 0;
}

int sd_gce_vm_delete(struct sd_gce_client *c, const char *zone, const char *name, sd_gce_vm_cb cb,
		     void *arg, char *err, size_t errlen)
{
	return sd_gce_vm_delete_id(c, zone, name, NULL, cb, arg, err, errlen);
}

int sd_gce_vm_delete_id(struct sd_gce_client *c, const char *zone, const char *name, const char *request_id,
			sd_gce_vm_cb cb, void *arg, char *err, size_t errlen)
{
	if (request_id && request_id[0] && strlen(request_id) != 36) {
		snprintf(err, errlen, "gce: requestId '%.40s' is not a UUID", request_id);
		return -1;
	}
	struct vm_op *o = op_new(c, 0, zone, name, cb, arg, err, errlen);
	if (!o)
		return -1;
	if (request_id && request_id[0])
		memcpy(o->request_id, request_id, 37);
	char path[256];
	snprintf(path, sizeof path, "zones/%s/instances/%s", zone, name);
	op_start(o, "gce instances.delete", "DELETE", path);
	return 0;
}

/* Listing, zone after zone and page after page. */
struct vm_list {
	struct sd_gce_client *c;
	char **zones;
	int nzones, zi, n;
	char filter[256];      /* URL-encoded */
	char token[512];
	void (*each)(void *arg, const struct sd_gce_instance *in);
	sd_gce_vm_list_done done;
	void *arg;
};

static void list_free(struct vm_list *l)
{
	for (int i = 0; i < l->nzones; i++)
		free(l->zones[i]);
	free(l->zones);
	free(l);
}

static void list_next(struct vm_list *l);

static void on_list_page(void *arg, const struct sd_http_response *r)
{
	struct vm_list *l = arg;
	char err[300], msg[700];
	if (r->status != 200) {
		struct sd_gce_error e;
		if (r->status && sd_gce_error_parse(r->body, r->body_len, &e, err, sizeof err) == 0)
			snprintf(msg, sizeof msg, "zone %s: HTTP %ld: %s", l->zones[l->zi], r->status, e.message);
		else
			snprintf(msg, sizeof msg, "zone %s: %s", l->zones[l->zi], r->status ? "HTTP error" : r->error);
		l->done(l->arg, -1, msg);
		list_free(l);
		return;
	}
	int n = sd_gce_list_parse(r->body, r->body_len, l->each, l->arg, l->token, sizeof l->token, err, sizeof err);
	if (n < 0) {
		snprintf(msg, sizeof msg, "zone %s: %s", l->zones[l->zi], err);
		l->done(l->arg, -1, msg);
		list_free(l);
		return;
	}
	l->n += n;
	if (!l->token[0])
		l->zi++;
	list_next(l);
}

static void list_next(struct vm_list *l)
{
	char url[2048], path[1024], err[256];
	if (l->zi >= l->nzones) {
		l->done(l->arg, l->n, NULL);
		list_free(l);
		return;
	}
	char *tok = l->token[0] ? curl_easy_escape(NULL, l->token, 0) : NULL;
	snprintf(path, sizeof path, "zones/%s/instances?filter=%s&maxResults=500%s%s", l->zones[l->zi], l->filter,
		 tok ? "&pageToken=" : "", tok ? tok : "");
	curl_free(tok);
	if (sd_gce_url(l->c, path, url, sizeof url) < 0 ||
	    sd_gce_call(l->c, "gce instances.list", "GET", url, NULL, 1, on_list_page, l, err, sizeof err) < 0) {
		l->done(l->arg, -1, "the list URL does not fit");
		list_free(l);
	}
}

int sd_gce_vm_list(struct sd_gce_client *c, const char *const *zones, int nzones, const char *run,
		   void (*each)(void *arg, const struct sd_gce_instance *in), sd_gce_vm_list_done done,
		   void *arg, char *err, size_t errlen)
{
	char f[256];
	if (sd_gce_run_filter(run, 1, f, sizeof f) < 0) {
		snprintf(err, errlen, "gce: run id '%s' is not a label value", run);
		return -1;
	}
	struct vm_list *l = calloc(1, sizeof *l);
	char *enc = curl_easy_escape(NULL, f, 0);
	if (!l || !enc || strlen(enc) >= sizeof l->filter || !(l->zones = calloc((size_t)nzones + 1, sizeof *l->zones))) {
		curl_free(enc);
		free(l);
		snprintf(err, errlen, "gce: out of memory");
		return -1;
	}
	snprintf(l->filter, sizeof l->filter, "%s", enc);
	curl_free(enc);
	for (int i = 0; i < nzones; i++) {
		if (!sd_gce_name_ok(zones[i]) || !(l->zones[i] = strdup(zones[i]))) {
			l->nzones = i;
			list_free(l);
			snprintf(err, errlen, "gce: zone '%s' is not a resource name", zones[i]);
			return -1;
		}
	}
	l->nzones = nzones;
	l->c = c;
	l->each = each;
	l->done = done;
	l->arg = arg;
	list_next(l);
	return 0;
}

struct vm_fate {
	sd_gce_vm_fate_done done;
	void *arg;
};

static void on_fate(void *arg, const struct sd_http_response *r)
{
	struct vm_fate *f = arg;
	if (r->status != 200) {
		char m[600];
		if (r->status)
			snprintf(m, sizeof m, "operations.list: HTTP %ld", r->status);
		else
			snprintf(m, sizeof m, "operations.list: %s", r->error);
		f->done(f->arg, -1, 0, m);
	} else {
		cJSON *j = cJSON_ParseWithLength(r->body, r->body_len);
		const cJSON *items = cJSON_GetObjectItemCaseSensitive(j, "items");
		const cJSON *first = cJSON_GetArrayItem(items, 0);
		double end = first ? sd_gce_time_parse(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(first,
		                                                                                               "endTime")))
		                   : 0;
		if (!cJSON_IsObject(j))
			f->done(f->arg, -1, 0, "operations.list: not a JSON object");
		else
			f->done(f->arg, cJSON_GetArraySize(items) > 0, end > 0 ? end : 0, NULL);
		cJSON_Delete(j);
	}
	free(f);
}

int sd_gce_vm_fate(struct sd_gce_client *c, const char *zone, const char *target, sd_gce_vm_fate_done done,
		   void *arg, char *err, size_t errlen)
{
	char f[1024], path[2048], url[2300];
	if (!sd_gce_name_ok(zone) || sd_gce_preempted_filter(target, f, sizeof f) < 0) {
		snprintf(err, errlen, "gce: zone '%s' or instance URL not usable in a filter", zone);
		return -1;
	}
	char *enc = curl_easy_escape(NULL, f, 0);
	struct vm_fate *fa = malloc(sizeof *fa);
	int n = enc ? snprintf(path, sizeof path, "zones/%s/operations?filter=%s", zone, enc) : -1;
	curl_free(enc);
	if (!fa || n < 0 || (size_t)n >= sizeof path || sd_gce_url(c, path, url, sizeof url) < 0) {
		free(fa);
		snprintf(err, errlen, "gce: the operations filter does not fit");
		return -1;
	}
	fa->done = done;
	fa->arg = arg;
	if (sd_gce_call(c, "gce operations.list", "GET", url, NULL, 1, on_fate, fa, err, errlen) < 0) {
		free(fa);
		return -1;
	}
	return 0;
}

void sd_gce_vm_cancel_waiting(struct sd_gce_client *c)
{
	sd_api_op_cancel_waiting(sd_gce_client_http(c));
}
