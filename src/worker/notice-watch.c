/* src/worker/notice-watch.c - the cloud preemption-notice watcher (see the
 * header for the three metadata services and their sources).
 *
 * One thread per watched document, each with its own libcurl easy handle
 * (libcurl's rule: a handle is used by one thread at a time).  GCE's
 * long-polls hang for up to timeout_sec; a progress callback aborts them as
 * soon as the watch is stopped, so stopping never waits on the network.
 */
#include "config.h"

#include "src/worker/notice-watch.h"

#include <cJSON.h>
#include <curl/curl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "src/base/errors.h"

#define BODY_MAX (64 * 1024)   /* bytes kept of an answer; the documents are small */
#define GCE_LONGPOLL_S 60      /* timeout_sec of a GCE long-poll */
#define GCE_PREEMPT_S 30       /* GCE Spot: ~30 s from TRUE to power-off (cloud-apis.md 1.4) */
#define GCE_MAINT_S 60         /* maintenance-event changes ~60 s ahead (cloud-apis.md 1.4) */
#define AWS_TOKEN_TTL_S 21600  /* IMDSv2 token lifetime asked for (1..21600) */
/* AWS and Azure polling period: a notice must reach the journal within 1 s,
 * which a 1 s period only meets on average (AWS suggests 5 s; a request to
 * the link-local service costs well under a millisecond). */
#define POLL_MS 500
#define RETRY_MS 2000          /* after an error (Google's client sleeps ~5 s) */

static const char *const cloud_names[] = { "none", "auto", "gce", "aws", "azure" };

const char *sd_notice_cloud_name(enum sd_notice_cloud c)
{
	return (unsigned)c < sizeof cloud_names / sizeof cloud_names[0] ? cloud_names[c] : "?";
}

int sd_notice_cloud_parse(const char *name, enum sd_notice_cloud *c)
{
	for (unsigned i = 0; i < sizeof cloud_names / sizeof cloud_names[0]; i++)
		if (!strcmp(name, cloud_names[i])) {
			*c = (enum sd_notice_cloud)i;
			return 0;
		}
	return -1;
}

/* ---- parsers ---- */

static void copy_str(char *dst, size_t len, const char *src)
{
	/* Truncation is intended: these are labels for the journal. */
	if (!len)
		return;
	size_t n = src ? strlen(src) : 0;
	if (n >= len)
		n = len - 1;
	if (n)
		memcpy(dst, src, n);
	dst[n] = '\0';
}

int sd_notice_parse_aws_action(const char *body, char *action, size_t action_len, char *time, size_t time_len,
                               char **why)
{
	cJSON *j = cJSON_Parse(body);
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return sd_why(why, "spot/instance-action: not a JSON object");
	}
	const cJSON *a = cJSON_GetObjectItemCaseSensitive(j, "action");
	const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "time");
	if (!cJSON_IsString(a) || !cJSON_IsString(t)) {
		cJSON_Delete(j);
		return sd_why(why, "spot/instance-action: expected string fields \"action\" and \"time\"");
	}
	copy_str(action, action_len, a->valuestring);
	copy_str(time, time_len, t->valuestring);
	cJSON_Delete(j);
	return 1;
}

int sd_notice_parse_azure_events(const char *body, const char *vm_name, char *event_id, size_t id_len,
                                 char *not_before, size_t nb_len, long *incarnation, char **why)
{
	cJSON *j = cJSON_Parse(body);
	if (!cJSON_IsObject(j)) {
		cJSON_Delete(j);
		return sd_why(why, "scheduledevents: not a JSON object");
	}
	const cJSON *inc = cJSON_GetObjectItemCaseSensitive(j, "DocumentIncarnation");
	const cJSON *evs = cJSON_GetObjectItemCaseSensitive(j, "Events");
	if (!cJSON_IsNumber(inc) || !cJSON_IsArray(evs)) {
		cJSON_Delete(j);
		return sd_why(why, "scheduledevents: expected \"DocumentIncarnation\" (number) and \"Events\" (array)");
	}
	*incarnation = (long)inc->valuedouble;
	const cJSON *e;
	int found = 0;
	cJSON_ArrayForEach(e, evs)
	{
		const cJSON *type = cJSON_GetObjectItemCaseSensitive(e, "EventType");
		const cJSON *id = cJSON_GetObjectItemCaseSensitive(e, "EventId");
		if (!cJSON_IsString(type) || strcmp(type->valuestring, "Preempt") != 0)
			continue;
		if (!cJSON_IsString(id)) {
			cJSON_Delete(j);
			return sd_why(why, "scheduledevents: a Preempt event without a string \"EventId\"");
		}
		int ours = !vm_name || !vm_name[0];
		const cJSON *r, *res = cJSON_GetObjectItemCaseSensitive(e, "Resources");
		cJSON_ArrayForEach(r, res)
			if (cJSON_IsString(r) && !strcmp(r->valuestring, vm_name ? vm_name : ""))
				ours = 1;
		if (!ours)
			continue;
		const cJSON *nb = cJSON_GetObjectItemCaseSensitive(e, "NotBefore");
		copy_str(event_id, id_len, id->valuestring);
		copy_str(not_before, nb_len, cJSON_IsString(nb) ? nb->valuestring : "");
		found = 1;
		break;
	}
	cJSON_Delete(j);
	return found;
}

int sd_notice_parse_etag(const char *line, size_t len, char *etag, size_t etag_len)
{
	if (len < 5 || strncasecmp(line, "etag:", 5) != 0)
		return 0;
	size_t b = 5, e = len;
	while (b < e && (line[b] == ' ' || line[b] == '\t'))
		b++;
	while (e > b && (line[e - 1] == '\r' || line[e - 1] == '\n' || line[e - 1] == ' '))
		e--;
	size_t n = e - b < etag_len - 1 ? e - b : etag_len - 1;
	memcpy(etag, line + b, n);
	etag[n] = '\0';
	return 1;
}

double sd_notice_parse_time(const char *s)
{
	struct tm tm;
	const char *end;
	memset(&tm, 0, sizeof tm);
	if ((end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))) {
		double frac = 0;
		if (*end == '.') {
			char *e2;
			frac = strtod(end, &e2);
			end = e2;
		}
		if (strcmp(end, "Z") != 0 && strcmp(end, "+00:00") != 0)
			return -1;
		return (double)timegm(&tm) + frac;
	}
	memset(&tm, 0, sizeof tm);
	if ((end = strptime(s, "%a, %d %b %Y %H:%M:%S GMT", &tm)) && !*end)
		return (double)timegm(&tm);
	return -1;
}

/* ---- HTTP ---- */

struct gce_arg;

struct sd_notice_watch {
	enum sd_notice_cloud cloud;
	sd_notice_cb cb;
	void *ctx;
	pthread_t threads[2];
	int nthreads;
	pthread_mutex_t mu;
	pthread_cond_t cv;       /* CLOCK_MONOTONIC; signalled on stop */
	int stop;                /* guarded by mu, read atomically by the progress callback */
	int noticed;             /* a notice was reported (guarded by mu) */
	int rebalance_warned;
	char base[512];          /* http://host[:port] of the metadata service */
	char azure_vm[256];      /* this VM's name (Azure), "" unknown */
	char azure_event[128];   /* the noticed event (Azure), for the ack */
	struct gce_arg *gce;     /* the GCE threads' arguments */
};

struct resp {
	long status;
	char *body;
	size_t len;
	char etag[128];
};

static size_t on_body(char *p, size_t size, size_t n, void *ud)
{
	struct resp *r = ud;
	size_t add = size * n;
	if (r->len + add > BODY_MAX)
		return 0;   /* too big for a metadata document: fail the transfer */
	char *nb = realloc(r->body, r->len + add + 1);
	if (!nb)
		sd_oom();
	r->body = nb;
	memcpy(r->body + r->len, p, add);
	r->len += add;
	r->body[r->len] = '\0';
	return add;
}

static size_t on_header(char *p, size_t size, size_t n, void *ud)
{
	struct resp *r = ud;
	sd_notice_parse_etag(p, size * n, r->etag, sizeof r->etag);
	return size * n;
}

static int on_progress(void *ud, curl_off_t a, curl_off_t b, curl_off_t c, curl_off_t d)
{
	(void)a, (void)b, (void)c, (void)d;
	struct sd_notice_watch *w = ud;
	return w && __atomic_load_n(&w->stop, __ATOMIC_RELAXED);   /* non-zero aborts */
}

/* One request: method "GET", "PUT" or "POST", headers (NULL-terminated
 * list), body for POST/PUT (NULL: none), timeout_ms for the whole transfer.
 * Returns 0 with r filled (caller frees r->body), or -1 with *why. */
static int http(struct sd_notice_watch *w, CURL *h, const char *method, const char *url, const char *const *headers,
                const char *body, long timeout_ms, struct resp *r, char **why)
{
	memset(r, 0, sizeof *r);
	struct curl_slist *hl = NULL;
	for (int i = 0; headers && headers[i]; i++) {
		struct curl_slist *n = curl_slist_append(hl, headers[i]);
		if (!n)
			sd_oom();
		hl = n;
	}
	curl_easy_reset(h);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
	if (body) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
	} else if (strcmp(method, "GET") != 0) {
		curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
		curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE, 0L);
	}
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_PROXY, "");   /* link-local: never via a proxy */
	curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
	curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 0L);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms < 1000 ? timeout_ms : 1000L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, timeout_ms);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
	curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
	curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
	curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
	curl_easy_setopt(h, CURLOPT_XFERINFODATA, w);
	CURLcode rc = curl_easy_perform(h);
	curl_slist_free_all(hl);
	if (rc != CURLE_OK) {
		free(r->body);
		r->body = NULL;
		return sd_why(why, "%s %s: %s", method, url, curl_easy_strerror(rc));
	}
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
	if (!r->body)
		r->body = calloc(1, 1);
	if (!r->body)
		sd_oom();
	return 0;
}

/* Waits ms or until stopped; returns 1 when stopped. */
static int nap(struct sd_notice_watch *w, long ms)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += ms / 1000;
	ts.tv_nsec += (ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&w->mu);
	while (!w->stop && pthread_cond_timedwait(&w->cv, &w->mu, &ts) == 0)
		;
	int s = w->stop;
	pthread_mutex_unlock(&w->mu);
	return s;
}

static int stopped(struct sd_notice_watch *w)
{
	return __atomic_load_n(&w->stop, __ATOMIC_RELAXED);
}

/* Reports n once (a notice) through the callback. */
static void report(struct sd_notice_watch *w, struct sd_notice *n)
{
	pthread_mutex_lock(&w->mu);
	int first = n->warning || !w->noticed;
	if (!n->warning)
		w->noticed = 1;
	pthread_mutex_unlock(&w->mu);
	if (first && !stopped(w))
		w->cb(n, w->ctx);
}

static double wall_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Seconds from now to the cloud's time string, -1 when unreadable. */
static double seconds_until(const char *when)
{
	double t = sd_notice_parse_time(when);
	if (t < 0)
		return -1;
	double s = t - wall_now();
	return s > 0 ? s : 0;
}

static void log_error(struct sd_notice_watch *w, const char *what)
{
	/* The worker's stderr goes to its log in the run directory. */
	fprintf(stderr, "spotdeck-worker: notice watcher (%s): %s\n", sd_notice_cloud_name(w->cloud), what);
}

/* ---- GCE ---- */

struct gce_arg {
	struct sd_notice_watch *w;
	const char *path;       /* under computeMetadata/v1/instance/ */
	const char *trigger;    /* the value that is a notice */
	const char *event;
	double seconds;
};

static const char *const gce_headers[] = { "Metadata-Flavor: Google", NULL };

static void *gce_main(void *arg)
{
	struct gce_arg *g = arg;
	struct sd_notice_watch *w = g->w;
	CURL *h = curl_easy_init();
	char etag[128] = "", url[1024], *why = NULL;
	int errors = 0;
	while (h && !stopped(w)) {
		/* The first answer gives the value now and its ETag; later ones
		 * hang until the value differs from the one with that ETag (at
		 * once if it already does), so no change is missed between polls. */
		if (etag[0])
			snprintf(url, sizeof url, "%s/computeMetadata/v1/instance/%s?wait_for_change=true&timeout_sec=%d"
			         "&last_etag=%s", w->base, g->path, GCE_LONGPOLL_S, etag);
		else
			snprintf(url, sizeof url, "%s/computeMetadata/v1/instance/%s", w->base, g->path);
		struct resp r;
		if (http(w, h, "GET", url, gce_headers, NULL, (GCE_LONGPOLL_S + 10) * 1000L, &r, &why) < 0 ||
		    r.status != 200) {
			if (!stopped(w) && errors++ < 3) {
				if (why)
					log_error(w, why);
				else
					fprintf(stderr, "spotdeck-worker: notice watcher (gce): %s: HTTP %ld\n", url, r.status);
			}
			free(r.body);
			free(why);
			why = NULL;
			etag[0] = '\0';
			nap(w, RETRY_MS);
			continue;
		}
		errors = 0;
		snprintf(etag, sizeof etag, "%s", r.etag);
		size_t n = strlen(r.body);
		while (n && (r.body[n - 1] == '\n' || r.body[n - 1] == ' '))
			r.body[--n] = '\0';
		if (!strcmp(r.body, g->trigger)) {
			struct sd_notice nt = { .source = "gce", .event = g->event, .seconds = g->seconds };
			copy_str(nt.detail, sizeof nt.detail, r.body);
			report(w, &nt);
		}
		free(r.body);
	}
	if (h)
		curl_easy_cleanup(h);
	return NULL;
}

/* ---- AWS ---- */

static void *aws_main(void *arg)
{
	struct sd_notice_watch *w = arg;
	CURL *h = curl_easy_init();
	char token[512] = "", url[1024], tokhdr[600], *why = NULL;
	double token_at = 0;
	int errors = 0;
	while (h && !stopped(w)) {
		struct resp r;
		double now = wall_now();
		/* A fresh token well before the old one expires (IMDSv2 answers
		 * 401 to an expired one: then too). */
		if (!token[0] || now - token_at > AWS_TOKEN_TTL_S - 60) {
			static const char *const ttl_hdr[] = { "X-aws-ec2-metadata-token-ttl-seconds: 21600", NULL };
			snprintf(url, sizeof url, "%s/latest/api/token", w->base);
			if (http(w, h, "PUT", url, ttl_hdr, NULL, 2000, &r, &why) < 0 || r.status != 200 || !r.body[0]) {
				if (!stopped(w) && errors++ < 3) {
					if (why)
						log_error(w, why);
					else
						fprintf(stderr, "spotdeck-worker: notice watcher (aws): PUT %s: HTTP %ld\n", url,
						        r.status);
				}
				free(r.body);
				free(why);
				why = NULL;
				nap(w, RETRY_MS);
				continue;
			}
			snprintf(token, sizeof token, "%s", r.body);
			token_at = now;
			free(r.body);
		}
		snprintf(tokhdr, sizeof tokhdr, "X-aws-ec2-metadata-token: %s", token);
		const char *const hdrs[] = { tokhdr, NULL };
		snprintf(url, sizeof url, "%s/latest/meta-data/spot/instance-action", w->base);
		if (http(w, h, "GET", url, hdrs, NULL, 2000, &r, &why) == 0) {
			if (r.status == 200) {
				char action[32], when[64];
				if (sd_notice_parse_aws_action(r.body, action, sizeof action, when, sizeof when, &why) == 1) {
					struct sd_notice nt = { .source = "aws", .event = "instance-action",
					                        .seconds = seconds_until(when) };
					copy_str(nt.deadline, sizeof nt.deadline, when);
					copy_str(nt.detail, sizeof nt.detail, action);
					report(w, &nt);
				}
			} else if (r.status == 401) {
				token[0] = '\0';   /* expired or refused: a new one next turn */
			}
			free(r.body);
		}
		if (why && errors++ < 3)
			log_error(w, why);
		free(why);
		why = NULL;
		if (!w->rebalance_warned && token[0]) {
			snprintf(url, sizeof url, "%s/latest/meta-data/events/recommendations/rebalance", w->base);
			if (http(w, h, "GET", url, hdrs, NULL, 2000, &r, &why) == 0) {
				if (r.status == 200) {
					cJSON *j = cJSON_Parse(r.body);
					const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "noticeTime");
					struct sd_notice nt = { .warning = 1, .source = "aws", .event = "rebalance", .seconds = -1 };
					copy_str(nt.deadline, sizeof nt.deadline, cJSON_IsString(t) ? t->valuestring : "");
					w->rebalance_warned = 1;
					report(w, &nt);
					cJSON_Delete(j);
				}
				free(r.body);
			}
			free(why);
			why = NULL;
		}
		nap(w, POLL_MS);
	}
	if (h)
		curl_easy_cleanup(h);
	return NULL;
}

/* ---- Azure ---- */

static const char *const azure_headers[] = { "Metadata: true", NULL };

static void *azure_main(void *arg)
{
	struct sd_notice_watch *w = arg;
	CURL *h = curl_easy_init();
	char url[1024], *why = NULL;
	int errors = 0;
	snprintf(url, sizeof url, "%s/metadata/scheduledevents?api-version=2020-07-01", w->base);
	while (h && !stopped(w)) {
		struct resp r;
		if (http(w, h, "GET", url, azure_headers, NULL, 2000, &r, &why) == 0 && r.status == 200) {
			char id[128], nb[64];
			long inc = 0;
			int found = sd_notice_parse_azure_events(r.body, w->azure_vm, id, sizeof id, nb, sizeof nb, &inc, &why);
			if (found == 1) {
				pthread_mutex_lock(&w->mu);
				snprintf(w->azure_event, sizeof w->azure_event, "%s", id);
				pthread_mutex_unlock(&w->mu);
				struct sd_notice nt = { .source = "azure", .event = "Preempt", .seconds = seconds_until(nb) };
				copy_str(nt.deadline, sizeof nt.deadline, nb);
				copy_str(nt.detail, sizeof nt.detail, id);
				report(w, &nt);
			}
		} else if (!why) {
			sd_why(&why, "GET %s: HTTP %ld", url, r.status);
		}
		free(r.body);
		if (why && errors++ < 3)
			log_error(w, why);
		free(why);
		why = NULL;
		nap(w, POLL_MS);
	}
	if (h)
		curl_easy_cleanup(h);
	return NULL;
}

/* This VM's name, which Azure's events list in Resources. */
static void azure_vm_name(struct sd_notice_watch *w)
{
	CURL *h = curl_easy_init();
	char url[1024], *why = NULL;
	struct resp r;
	snprintf(url, sizeof url, "%s/metadata/instance/compute/name?api-version=2021-02-01&format=text", w->base);
	if (h && http(w, h, "GET", url, azure_headers, NULL, 2000, &r, &why) == 0) {
		if (r.status == 200)
			snprintf(w->azure_vm, sizeof w->azure_vm, "%s", r.body);
		free(r.body);
	}
	if (!w->azure_vm[0])
		log_error(w, "this VM's name is unknown: a Preempt event for any VM counts");
	free(why);
	if (h)
		curl_easy_cleanup(h);
}

int sd_notice_watch_ack(struct sd_notice_watch *w, char **why)
{
	if (!w || w->cloud != SD_NOTICE_AZURE)
		return 0;
	char id[128];
	pthread_mutex_lock(&w->mu);
	snprintf(id, sizeof id, "%s", w->azure_event);
	pthread_mutex_unlock(&w->mu);
	if (!id[0])
		return 0;
	cJSON *b = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(b, "StartRequests"), *e = cJSON_CreateObject();
	if (!b || !arr || !e || !cJSON_AddStringToObject(e, "EventId", id))
		sd_oom();
	cJSON_AddItemToArray(arr, e);
	char *body = cJSON_PrintUnformatted(b);
	cJSON_Delete(b);
	if (!body)
		sd_oom();
	char url[1024];
	snprintf(url, sizeof url, "%s/metadata/scheduledevents?api-version=2020-07-01", w->base);
	static const char *const hdrs[] = { "Metadata: true", "Content-Type: application/json", NULL };
	CURL *h = curl_easy_init();
	struct resp r;
	int rc = -1;
	if (!h)
		sd_why(why, "libcurl: cannot create a handle");
	else if (http(NULL, h, "POST", url, hdrs, body, 2000, &r, why) == 0) {
		rc = r.status / 100 == 2 ? 0 : sd_why(why, "POST %s: HTTP %ld", url, r.status);
		free(r.body);
	}
	if (h)
		curl_easy_cleanup(h);
	free(body);
	return rc;
}

/* ---- start, probe, stop ---- */

static void set_base(struct sd_notice_watch *w, enum sd_notice_cloud c)
{
	const char *v;
	if (c == SD_NOTICE_GCE) {
		/* Google's libraries take a host[:port], no scheme. */
		v = getenv("GCE_METADATA_HOST");
		snprintf(w->base, sizeof w->base, "http://%s", v && *v ? v : "169.254.169.254");
	} else {
		v = getenv(c == SD_NOTICE_AWS ? "AWS_EC2_METADATA_SERVICE_ENDPOINT" : "SPOTDECK_AZURE_METADATA_ENDPOINT");
		snprintf(w->base, sizeof w->base, "%s", v && *v ? v : "http://169.254.169.254");
	}
	size_t n = strlen(w->base);
	while (n > 7 && w->base[n - 1] == '/')
		w->base[--n] = '\0';
}

/* Whether cloud c's metadata service answers here (1 s, its header). */
static int probe(struct sd_notice_watch *w, enum sd_notice_cloud c)
{
	set_base(w, c);
	CURL *h = curl_easy_init();
	if (!h)
		return 0;
	char url[1024], *why = NULL;
	struct resp r = { 0 };
	int ok = 0;
	if (c == SD_NOTICE_GCE) {
		snprintf(url, sizeof url, "%s/computeMetadata/v1/instance/preempted", w->base);
		ok = http(NULL, h, "GET", url, gce_headers, NULL, 1000, &r, &why) == 0 && r.status == 200;
	} else if (c == SD_NOTICE_AWS) {
		static const char *const ttl_hdr[] = { "X-aws-ec2-metadata-token-ttl-seconds: 60", NULL };
		snprintf(url, sizeof url, "%s/latest/api/token", w->base);
		ok = http(NULL, h, "PUT", url, ttl_hdr, NULL, 1000, &r, &why) == 0 && r.status == 200;
	} else {
		snprintf(url, sizeof url, "%s/metadata/scheduledevents?api-version=2020-07-01", w->base);
		ok = http(NULL, h, "GET", url, azure_headers, NULL, 1000, &r, &why) == 0 && r.status == 200;
	}
	free(r.body);
	free(why);
	curl_easy_cleanup(h);
	return ok;
}

static struct gce_arg gce_args[2] = {
	{ NULL, "preempted", "TRUE", "preempted", GCE_PREEMPT_S },
	{ NULL, "maintenance-event", "TERMINATE_ON_HOST_MAINTENANCE", "maintenance-event", GCE_MAINT_S },
};

int sd_notice_watch_start(struct sd_notice_watch **out, enum sd_notice_cloud c, sd_notice_cb cb, void *ctx,
                          char **why)
{
	*out = NULL;
	if (c == SD_NOTICE_NONE)
		return 0;
	if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
		return sd_why(why, "notice watcher: libcurl failed to initialise");
	struct sd_notice_watch *w = sd_calloc(1, sizeof *w);
	w->cb = cb;
	w->ctx = ctx;
	if (c == SD_NOTICE_AUTO) {
		static const enum sd_notice_cloud order[] = { SD_NOTICE_GCE, SD_NOTICE_AWS, SD_NOTICE_AZURE };
		for (int i = 0; i < 3 && c == SD_NOTICE_AUTO; i++)
			if (probe(w, order[i]))
				c = order[i];
		if (c == SD_NOTICE_AUTO) {
			free(w);
			curl_global_cleanup();
			sd_why(why, "notice auto: no metadata service answered (gce, aws, azure): not watching");
			return 0;
		}
	}
	w->cloud = c;
	set_base(w, c);
	pthread_mutex_init(&w->mu, NULL);
	pthread_condattr_t ca;
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&w->cv, &ca);
	pthread_condattr_destroy(&ca);
	if (c == SD_NOTICE_AZURE)
		azure_vm_name(w);
	/* The watcher's threads take no signals: SIGTERM is the training
	 * thread's to see. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	int err = 0;
	if (c == SD_NOTICE_GCE) {
		/* Two long-polls: one handle each. */
		struct gce_arg *ga = sd_malloc(2 * sizeof *ga);
		memcpy(ga, gce_args, sizeof gce_args);
		for (int i = 0; i < 2 && !err; i++) {
			ga[i].w = w;
			err = pthread_create(&w->threads[i], NULL, gce_main, &ga[i]);
			w->nthreads += !err;
		}
		w->gce = ga;   /* lives as long as the threads: freed with w */
	} else {
		err = pthread_create(&w->threads[0], NULL, c == SD_NOTICE_AWS ? aws_main : azure_main, w);
		w->nthreads += !err;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (err) {
		sd_notice_watch_stop(w);
		return sd_why(why, "notice watcher: cannot start a thread");
	}
	*out = w;
	return 0;
}

enum sd_notice_cloud sd_notice_watch_cloud(const struct sd_notice_watch *w)
{
	return w ? w->cloud : SD_NOTICE_NONE;
}

void sd_notice_watch_stop(struct sd_notice_watch *w)
{
	if (!w)
		return;
	pthread_mutex_lock(&w->mu);
	__atomic_store_n(&w->stop, 1, __ATOMIC_RELAXED);
	pthread_cond_broadcast(&w->cv);
	pthread_mutex_unlock(&w->mu);
	for (int i = 0; i < w->nthreads; i++)
		pthread_join(w->threads[i], NULL);
	free(w->gce);
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	free(w);
	curl_global_cleanup();   /* pairs with the start's curl_global_init */
}
