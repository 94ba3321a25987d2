/* src/app/doctor-aws.c - `spotdeck doctor` for provider aws (doctor.h):
 * the credentials and the zones (DescribeAvailabilityZones), a launch as
 * EC2 would judge it without making it (RunInstances with DryRun: the
 * answer DryRunOperation means it would have been allowed), and the Spot
 * price (DescribeSpotPriceHistory).  cloud-apis.md section 2. */
#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "src/app/doctor-internal.h"
#include "src/provider/aws/aws-client.h"
#include "src/provider/http/secret-file.h"
#include "src/provider/aws/aws-api.h"

#define MAX_ZONES 32

enum step { ST_ZONES, ST_LAUNCH, ST_TYPE, ST_QUOTA, ST_PRICES, ST_END };

struct doctor_aws {
	uv_loop_t loop;
	struct sd_http *http;
	struct sd_aws_client *aws;
	char *region, *type, *image, *endpoint, *profile, *quotas_endpoint, *identity;
	int vcpus;                /* the instance type's (DescribeInstanceTypes) */
	const char *quota_code, *quota_name;
	char *zones[MAX_ZONES];
	int zone_ok[MAX_ZONES];
	int nzones;
	enum step step;
	int failed, done;
};

#define say(d, ...) sd_doctor_say(&(d)->failed, __VA_ARGS__)

/* The first available zone of the job's list (the launch is tried there). */
static const char *first_zone(const struct doctor_aws *d)
{
	for (int i = 0; i < d->nzones; i++)
		if (d->zone_ok[i])
			return d->zones[i];
	return d->zones[0];
}

/* The error document's code and message, or the transport's words. */
static void answer_error(const struct sd_http_response *r, struct sd_ec2_error *e)
{
	char err[128];
	memset(e, 0, sizeof *e);
	if (r->status == 0) {
		snprintf(e->code, sizeof e->code, "http");
		snprintf(e->message, sizeof e->message, "%s", r->error);
	} else if (sd_ec2_error_parse(r->body, r->body_len, e, err, sizeof err) != 1) {
		snprintf(e->code, sizeof e->code, "http");
		snprintf(e->message, sizeof e->message, "HTTP %ld", r->status);
	}
	/* One line: SignatureDoesNotMatch goes on with the canonical request
	 * EC2 expected, which belongs in a debugging session, not here. */
	e->message[strcspn(e->message, "\r\n")] = '\0';
}

static void next(struct doctor_aws *d);

/* DescribeAvailabilityZones: the key works, and which of the job's zones are available. */
static void on_zones(struct doctor_aws *d, const struct sd_http_response *r)
{
	struct sd_ec2_error e;
	char err[700];
	struct sd_ec2_zone z[64];
	int n = r->status == 200 ? sd_ec2_zones_parse(r->body, r->body_len, z, 64, err, sizeof err) : -1;
	if (r->no_credentials) {
		/* No key in the chain, and the instance role's could not be had. */
		say(d, "FAIL", "credentials", "%s", r->error + 13);
		d->step = ST_END;
		return;
	}
	if (r->status != 200) {
		answer_error(r, &e);
		say(d, "FAIL", "credentials", "key %s in %s: %s: %s", sd_aws_client_identity(d->aws), d->region,
		    e.code, e.message);
		d->step = ST_END;
		return;
	}
	if (n < 0) {
		say(d, "FAIL", "credentials", "DescribeAvailabilityZones: %s", err);
		d->step = ST_END;
		return;
	}
	if (n == 0) {
		say(d, "FAIL", "credentials", "DescribeAvailabilityZones answered no zone: is endpoint EC2?");
		d->step = ST_END;
		return;
	}
	say(d, "ok", "credentials", "key %s (from %s) accepted in %s", sd_aws_client_identity(d->aws),
	    sd_aws_client_where(d->aws), d->region);
	int any = 0;
	for (int i = 0; i < d->nzones; i++) {
		const struct sd_ec2_zone *hit = NULL;
		for (int k = 0; k < n; k++)
			if (!strcmp(z[k].name, d->zones[i]))
				hit = &z[k];
		if (!hit)
			say(d, "warn", "zone", "%s is not a zone of %s", d->zones[i], d->region);
		else if (strcmp(hit->state, "available") != 0)
			say(d, "warn", "zone", "%s is %s", d->zones[i], hit->state);
		else
			say(d, "ok", "zone", "%s is available", d->zones[i]);
		d->zone_ok[i] = hit && !strcmp(hit->state, "available");
		any |= d->zone_ok[i];
	}
	if (!any) {
		say(d, "FAIL", "zones", "none of the %d zones is available in %s", d->nzones, d->region);
		d->step = ST_END;
	} else {
		d->step = ST_LAUNCH;
	}
}

/* RunInstances with DryRun: whether a Spot launch would be allowed; then which
 * quota to check, if any. */
static void on_launch(struct doctor_aws *d, const struct sd_http_response *r)
{
	struct sd_ec2_error e;
	const char *zone = first_zone(d);
	answer_error(r, &e);
	if (!strcmp(e.code, "DryRunOperation"))
		say(d, "ok", "launch", "a Spot %s from %s in %s would be allowed (DryRun)", d->type, d->image, zone);
	else if (!strcmp(e.code, "InvalidAMIID.NotFound") || !strcmp(e.code, "InvalidAMIID.Malformed"))
		say(d, "FAIL", "image", "%s: %s: %s", d->image, e.code, e.message);
	else if (!strcmp(sd_ec2_classify(e.code), "zone"))
		say(d, "warn", "launch", "%s in %s: %s: %s", d->type, zone, e.code, e.message);
	else if (r->status == 200)
		say(d, "FAIL", "launch", "EC2 launched an instance for a DryRun (status 200): terminate it");
	else
		say(d, "FAIL", "launch", "a Spot %s in %s: %s: %s", d->type, zone, e.code, e.message);
	d->quota_code = sd_ec2_spot_quota_code(d->type, &d->quota_name);
	if (!d->quota_code) {
		say(d, "warn", "quota", "%s: no Spot vCPU quota code known for its family; not checked", d->type);
		d->step = ST_PRICES;
	} else if (d->endpoint && !d->quotas_endpoint) {
		/* EC2 elsewhere (a VPC endpoint, a fake): Amazon's own
		 * Service Quotas host is not asked in its place. */
		say(d, "warn", "quota", "not checked: provider.endpoint sends EC2 to %s and no "
		    "provider.quotas_endpoint says where Service Quotas is", d->endpoint);
		d->step = ST_PRICES;
	} else {
		d->step = ST_TYPE;
	}
}

/* DescribeInstanceTypes: the type's vCPUs, which the quota counts. */
static void on_type(struct doctor_aws *d, const struct sd_http_response *r)
{
	struct sd_ec2_error e;
	char err[700];
	struct sd_ec2_instance_type it[4];
	int n = r->status == 200 ? sd_ec2_instance_types_parse(r->body, r->body_len, it, 4, err, sizeof err)
				 : -1;
	if (r->status != 200) {
		answer_error(r, &e);
		snprintf(err, sizeof err, "%s: %s", e.code, e.message);
	}
	d->vcpus = n == 1 && !strcmp(it[0].type, d->type) ? it[0].vcpus : 0;
	if (d->vcpus <= 0) {
		say(d, "warn", "quota", "%s: its vCPUs unknown (DescribeInstanceTypes: %s); not checked", d->type,
		    n < 0 ? err : "no such type in the answer");
		d->step = ST_PRICES;
	} else {
		d->step = ST_QUOTA;
	}
}

/* GetServiceQuota: the Spot vCPU quota against one server's vCPUs. */
static void on_quota(struct doctor_aws *d, const struct sd_http_response *r)
{
	char err[700];
	cJSON *j = r->body_len ? cJSON_ParseWithLength(r->body, r->body_len) : NULL;
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(j, "Quota"), "Value");
	if (r->status == 200 && cJSON_IsNumber(v)) {
		double limit = v->valuedouble;
		if (limit >= d->vcpus)
			say(d, "ok", "quota", "%s (%s) allows %.0f vCPUs in %s; a Spot %s takes %d", d->quota_name,
			    d->quota_code, limit, d->region, d->type, d->vcpus);
		else
			say(d, "FAIL", "quota", "%s (%s) allows %.0f vCPUs in %s, a Spot %s takes %d: ask for more "
			    "in the Service Quotas console", d->quota_name, d->quota_code, limit, d->region, d->type,
			    d->vcpus);
	} else {
		/* {"__type": "...#AccessDeniedException", "message": "..."} or the transport's words. */
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(j, "__type");
		const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "message");
		if (cJSON_IsString(t))
			snprintf(err, sizeof err, "%s: %s", t->valuestring, cJSON_IsString(m) ? m->valuestring : "");
		else if (r->status == 0)
			snprintf(err, sizeof err, "%s", r->error);
		else
			snprintf(err, sizeof err, "HTTP %ld, no quota in the answer", r->status);
		err[strcspn(err, "\r\n")] = '\0';
		say(d, "warn", "quota", "%s: GetServiceQuota: %s; not checked", d->quota_code, err);
	}
	cJSON_Delete(j);
	d->step = ST_PRICES;
}

/* DescribeSpotPriceHistory: each zone's latest Spot price. */
static void on_prices(struct doctor_aws *d, const struct sd_http_response *r)
{
	struct sd_ec2_error e;
	char err[700];
	struct sd_ec2_spot_price p[128];
	int n = r->status == 200 ? sd_ec2_spot_prices_parse(r->body, r->body_len, p, 128, NULL, 0, err,
							   sizeof err) : -1;
	if (n < 0) {
		if (r->status != 200) {
			answer_error(r, &e);
			snprintf(err, sizeof err, "%s: %s", e.code, e.message);
		}
		say(d, "warn", "prices", "DescribeSpotPriceHistory: %s", err);
		d->step = ST_END;
		return;
	}
	for (int i = 0; i < d->nzones; i++) {
		const struct sd_ec2_spot_price *latest = NULL;
		for (int k = 0; k < n; k++)
			if (!strcmp(p[k].az, d->zones[i]) && !strcmp(p[k].type, d->type) &&
			    (!latest || strcmp(p[k].timestamp, latest->timestamp) > 0))
				latest = &p[k];
		if (latest)
			say(d, "ok", "prices", "%s: $%.4f/h for a Spot %s (as of %s)", d->zones[i],
			    latest->usd_per_hour, d->type, latest->timestamp);
		else
			say(d, "warn", "prices", "%s: no Spot price for %s", d->zones[i], d->type);
	}
	d->step = ST_END;
}

/* What each step does with its reply; each sets the step that follows. */
static void (*const on_step[])(struct doctor_aws *, const struct sd_http_response *) = {
	[ST_ZONES] = on_zones,
	[ST_LAUNCH] = on_launch,
	[ST_TYPE] = on_type,
	[ST_QUOTA] = on_quota,
	[ST_PRICES] = on_prices,
};

static void on_reply(void *arg, const struct sd_http_response *r)
{
	struct doctor_aws *d = arg;
	if (d->step < ST_END)
		on_step[d->step](d, r);
	next(d);
}

static void next(struct doctor_aws *d)
{
	char err[256], now[32];
	int rc = 0;
	switch (d->step) {
	case ST_ZONES:
		rc = sd_aws_call(d->aws, "DescribeAvailabilityZones", NULL, 0, 1, on_reply, d, err, sizeof err);
		break;
	case ST_LAUNCH: {
		const char *zone = first_zone(d);
		struct sd_sigv4_pair prm[] = {
			{"DryRun", "true"}, {"ImageId", d->image}, {"InstanceType", d->type}, {"MinCount", "1"},
			{"MaxCount", "1"}, {"InstanceMarketOptions.MarketType", "spot"},
			{"InstanceMarketOptions.SpotOptions.SpotInstanceType", "one-time"},
			{"InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior", "terminate"},
			{"Placement.AvailabilityZone", zone},
		};
		rc = sd_aws_call(d->aws, "RunInstances", prm, sizeof prm / sizeof prm[0], 1, on_reply, d, err,
				 sizeof err);
		break;
	}
	case ST_TYPE: {
		struct sd_sigv4_pair prm[] = {{"InstanceType.1", d->type}};
		rc = sd_aws_call(d->aws, "DescribeInstanceTypes", prm, 1, 1, on_reply, d, err, sizeof err);
		break;
	}
	case ST_QUOTA: {
		char body[128];
		snprintf(body, sizeof body, "{\"ServiceCode\": \"ec2\", \"QuotaCode\": \"%s\"}", d->quota_code);
		rc = sd_aws_json_call(d->aws, "ServiceQuotasV20190624.GetServiceQuota", body, on_reply, d, err,
				      sizeof err);
		break;
	}
	case ST_PRICES: {
		time_t t = time(NULL);
		strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
		struct sd_sigv4_pair prm[] = {
			{"InstanceType.1", d->type}, {"ProductDescription.1", "Linux/UNIX"}, {"StartTime", now},
		};
		rc = sd_aws_call(d->aws, "DescribeSpotPriceHistory", prm, sizeof prm / sizeof prm[0], 1, on_reply, d,
				 err, sizeof err);
		break;
	}
	case ST_END:
		d->done = 1;
		return;
	}
	if (rc < 0) {
		say(d, "FAIL", "request", "%s", err);
		d->done = 1;
	}
}

static const char *const aws_keys[] = {"name", "region", "zones", "instance_type", "image", "endpoint",
				       "profile", "quotas_endpoint", "identity",
				       /* the run's own (spotdeck-job(5)), not checked here */
				       "ssh_user", "worker", "ssh_port", "poll_s", "boot_poll_s", "boot_timeout_s",
				       "block_s", "usd_per_hour", "max_price", "gpu_count", "orphans",
				       "host_key_checking", "known_hosts", "connect_timeout", "ssh", NULL};

static int load(struct doctor_aws *d, const cJSON *p, const char *file)
{
	int bad = sd_doctor_known_keys(p, aws_keys, "aws", file) < 0;
	d->region = sd_doctor_opt_str(p, "region", NULL, file, &bad);
	d->type = sd_doctor_opt_str(p, "instance_type", "g4dn.xlarge", file, &bad);
	d->image = sd_doctor_opt_str(p, "image", NULL, file, &bad);
	d->endpoint = sd_doctor_opt_str(p, "endpoint", NULL, file, &bad);
	d->profile = sd_doctor_opt_str(p, "profile", NULL, file, &bad);
	d->quotas_endpoint = sd_doctor_opt_str(p, "quotas_endpoint", NULL, file, &bad);
	d->identity = sd_expand_home(sd_doctor_opt_str(p, "identity", "~/.ssh/id_ed25519", file, &bad));
	if (!bad && d->profile && (!*d->profile || strpbrk(d->profile, "[]\n\r"))) {
		fprintf(stderr, "spotdeck doctor: %s: provider.profile: \"%.40s\" is not a profile name\n", file,
			d->profile);
		bad = 1;
	}
	if (!bad && !d->region) {
		fprintf(stderr, "spotdeck doctor: %s: provider.region: missing\n", file);
		bad = 1;
	}
	if (!bad && strspn(d->region, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(d->region)) {
		fprintf(stderr, "spotdeck doctor: %s: provider.region: \"%.40s\" is not a region name "
			"(e.g. us-east-1)\n", file, d->region);
		bad = 1;
	}
	if (!bad && d->endpoint) {
		const char *h = strstr(d->endpoint, "://");
		if ((strncmp(d->endpoint, "http://", 7) != 0 && strncmp(d->endpoint, "https://", 8) != 0) || !h ||
		    strcspn(h + 3, "/") + 3 + (size_t)(h - d->endpoint) < strlen(d->endpoint) - 1 || !h[3]) {
			fprintf(stderr, "spotdeck doctor: %s: provider.endpoint: \"%.80s\" is not http(s)://HOST[:PORT] "
				"with no path\n", file, d->endpoint);
			bad = 1;
		}
	}
	if (!bad && !d->image) {
		fprintf(stderr, "spotdeck doctor: %s: provider.image: missing (an AMI id of the region, "
			"e.g. a Deep Learning AMI)\n", file);
		bad = 1;
	}
	const cJSON *zs = cJSON_GetObjectItemCaseSensitive(p, "zones"), *z;
	if (!bad && (!cJSON_IsArray(zs) || cJSON_GetArraySize(zs) < 1 || cJSON_GetArraySize(zs) > MAX_ZONES)) {
		fprintf(stderr, "spotdeck doctor: %s: provider.zones: expected a list of 1 to %d zones\n", file,
			MAX_ZONES);
		bad = 1;
	}
	if (!bad) {
		cJSON_ArrayForEach(z, zs) {
			if (!cJSON_IsString(z) || !z->valuestring[0] || strlen(z->valuestring) > 31 ||
			    strspn(z->valuestring, "abcdefghijklmnopqrstuvwxyz0123456789-") != strlen(z->valuestring)) {
				fprintf(stderr, "spotdeck doctor: %s: provider.zones: an item is not a zone name\n", file);
				bad = 1;
				break;
			}
			for (int k = 0; k < d->nzones; k++)
				if (!strcmp(d->zones[k], z->valuestring)) {
					fprintf(stderr, "spotdeck doctor: %s: provider.zones: %s is listed twice\n", file,
						z->valuestring);
					bad = 1;
				}
			if (bad)
				break;
			d->zones[d->nzones++] = strdup(z->valuestring);
		}
	}
	return bad ? -1 : 0;
}

static void doctor_aws_free(struct doctor_aws *d)
{
	free(d->region);
	free(d->type);
	free(d->image);
	free(d->endpoint);
	free(d->profile);
	free(d->quotas_endpoint);
	free(d->identity);
	for (int i = 0; i < d->nzones; i++)
		free(d->zones[i]);
	free(d);
}

int sd_doctor_aws(const cJSON *p, const char *file)
{
	struct doctor_aws *d = calloc(1, sizeof *d);
	if (!d)
		return 2;
	if (load(d, p, file) < 0) {
		doctor_aws_free(d);
		return 2;
	}
	char err[512], *pub = NULL;
	/* The key pair a run puts in its instances' cloud-config and logs in with. */
	if (sd_ssh_public_key(d->identity, &pub, err, sizeof err) < 0)
		say(d, "FAIL", "ssh key", "provider.identity: %s", err);
	else
		say(d, "ok", "ssh key", "%s (%.*s...)", d->identity, 24, pub);
	free(pub);
	uv_loop_init(&d->loop);
	d->http = sd_http_new(&d->loop, &sd_doctor_policy, NULL, NULL, err, sizeof err);
	struct sd_aws_client_config cfg = {.region = d->region, .endpoint = d->endpoint, .profile = d->profile,
					   .quotas_endpoint = d->quotas_endpoint};
	if (d->http)
		d->aws = sd_aws_client_new(d->http, &cfg, err, sizeof err);
	if (!d->aws) {
		say(d, "FAIL", "credentials", "%s", err);
	} else {
		next(d);
		while (!d->done && uv_run(&d->loop, UV_RUN_ONCE))
			;
	}
	sd_aws_client_free(d->aws);
	if (d->http)
		sd_http_close(d->http, NULL, NULL);
	uv_run(&d->loop, UV_RUN_DEFAULT);
	uv_loop_close(&d->loop);
	int rc = d->failed ? 1 : 0;
	doctor_aws_free(d);
	return rc;
}
