/* src/provider/aws/aws-vm.c - a Spot instance's life on EC2 (see aws-vm.h for
 * the requests and their sources). */
#include "config.h"
#include "src/provider/aws/aws-vm.h"

#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <uv.h>

#include "src/provider/http/api-op.h"


/* The most instances one page of a list carries (DescribeInstances'
 * MaxResults is at most 1000; a run has far fewer). */
#define LIST_PAGE 1000

static double wall_now(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A launch or terminate in progress. */
struct vm_op {
	struct sd_api_op op;         /* first: its timer, clock and place (api-op.h) */
	struct sd_aws_client *c;
	int launch;
	char id[32];
	char *user_data_b64;
	char az[32], name[64], type[32], image[64], run[64], max_price[32];
	double poll_s;
	int notfound;                /* InvalidInstanceID.NotFound answers in a row */
	struct sd_ec2_vm_result res;
	sd_ec2_vm_cb cb;
	void *arg;
};

/* An op whose first request could not be sent: gone without a callback. */
static void op_drop(struct vm_op *o)
{
	sd_api_op_end(&o->op);
	sd_api_op_close(&o->op);
}

static void op_end(struct vm_op *o, int ok)
{
	o->res.ok = ok;
	o->res.seconds = sd_api_op_end(&o->op);
	o->cb(o->arg, &o->res);
	sd_api_op_close(&o->op);
}

static void op_fail(struct vm_op *o, const char *block, const char *code, const char *msg)
{
	o->res.block = block;
	snprintf(o->res.code, sizeof o->res.code, "%s", code);
	snprintf(o->res.message, sizeof o->res.message, "%.500s", msg);
	op_end(o, 0);
}

/* An answer that is not a 200, or none: its <Code>, classified. */
static void op_fail_answer(struct vm_op *o, const struct sd_http_response *r)
{
	struct sd_ec2_error e;
	char err[64], msg[700];
	if (r->status == 0) {
		op_fail(o, "retry", "http", r->error);
		return;
	}
	if (sd_ec2_error_parse(r->body, r->body_len, &e, err, sizeof err) != 1) {
		snprintf(msg, sizeof msg, "HTTP %ld without an EC2 error document", r->status);
		op_fail(o, r->status >= 500 ? "retry" : "none", "http", msg);
		return;
	}
	op_fail(o, sd_ec2_classify(e.code), e.code, e.message);
}

static int is_not_found(const struct sd_http_response *r)
{
	struct sd_ec2_error e;
	char err[64];
	return r->status == 400 && sd_ec2_error_parse(r->body, r->body_len, &e, err, sizeof err) == 1 &&
	       !strcmp(e.code, "InvalidInstanceID.NotFound");
}

static void on_describe(void *arg, const struct sd_http_response *r);

static void describe(struct vm_op *o)
{
	char err[256];
	struct sd_sigv4_pair prm[] = {{"InstanceId.1", o->id}};
	if (sd_aws_call(o->c, "DescribeInstances", prm, 1, 1, on_describe, o, err, sizeof err) < 0)
		op_fail(o, "none", "request", err);
}

static void poll_again(struct sd_api_op *op)
{
	describe((struct vm_op *)(void *)op);
}

static void poll_later(struct vm_op *o)
{
	sd_api_op_wait(&o->op, o->poll_s, poll_again);
}

static void on_describe(void *arg, const struct sd_http_response *r)
{
	struct vm_op *o = arg;
	char err[256];
	if (is_not_found(r) && ++o->notfound < SD_EC2_NOTFOUND_TRIES) {
		poll_later(o);   /* not yet visible to DescribeInstances */
		return;
	}
	if (r->status != 200) {
		op_fail_answer(o, r);
		return;
	}
	o->notfound = 0;
	struct sd_ec2_instance in;
	int n = sd_ec2_instances_parse(r->body, r->body_len, &in, 1, NULL, 0, err, sizeof err);
	if (n < 0) {
		op_fail(o, "none", "parse", err);
		return;
	}
	if (n == 0) {
		poll_later(o);
		return;
	}
	o->res.vm = in;
	if (in.state_code == SD_EC2_RUNNING && (in.public_ip[0] || in.private_ip[0])) {
		o->res.running_at = wall_now();
		op_end(o, 1);
	} else if (in.state_code == SD_EC2_PENDING || in.state_code == SD_EC2_RUNNING) {
		poll_later(o);
	} else {
		/* Taken back before it ran: a Spot instance the zone could not
		 * keep (SkyPilot blocks the zone for this). */
		char m[400];
		snprintf(m, sizeof m, "the instance is %s before it ran%s%s", in.state[0] ? in.state : "gone",
			 in.reason[0] ? ": " : "", in.reason);
		op_fail(o, "zone", in.reason_code[0] ? in.reason_code : "TERMINATED", m);
	}
}

static void on_run(void *arg, const struct sd_http_response *r)
{
	struct vm_op *o = arg;
	char err[256];
	if (r->status != 200) {
		op_fail_answer(o, r);
		return;
	}
	struct sd_ec2_instance in;
	int n = sd_ec2_instances_parse(r->body, r->body_len, &in, 1, NULL, 0, err, sizeof err);
	if (n != 1) {
		op_fail(o, "none", "parse", n < 0 ? err : "RunInstances answered no instance");
		return;
	}
	o->res.vm = in;
	snprintf(o->id, sizeof o->id, "%s", in.id);
	if (in.state_code == SD_EC2_RUNNING && (in.public_ip[0] || in.private_ip[0])) {
		o->res.running_at = wall_now();
		op_end(o, 1);   /* a ClientToken's second answer: it already runs */
		return;
	}
	poll_later(o);
}

static void on_terminate(void *arg, const struct sd_http_response *r)
{
	struct vm_op *o = arg;
	char err[256];
	if (is_not_found(r)) {
		op_end(o, 1);   /* long gone */
		return;
	}
	if (r->status != 200) {
		op_fail_answer(o, r);
		return;
	}
	/* The item's currentState: shutting-down when this call (or an
	 * interruption's end just now) powered it off, terminated when that
	 * was earlier and its time is not known here. */
	struct sd_ec2_instance in;
	int n = sd_ec2_instances_parse(r->body, r->body_len, &in, 1, NULL, 0, err, sizeof err);
	if (n < 0) {
		op_fail(o, "none", "parse", err);
		return;
	}
	o->res.vm = in;
	o->res.ended_at = n == 1 && in.state_code == SD_EC2_TERMINATED ? 0 : wall_now();
	op_end(o, 1);
}

static void op_cancelled(struct sd_api_op *op)
{
	op_fail((struct vm_op *)(void *)op, "none", "cancelled", "the run ended while the instance booted");
}

static void op_freed(struct sd_api_op *op)
{
	struct vm_op *o = (struct vm_op *)(void *)op;
	free(o->user_data_b64);
	free(o);
}

static const struct sd_api_op_class op_class = { .cancelled = op_cancelled, .freed = op_freed };

static struct vm_op *op_new(struct sd_aws_client *c, int launch, sd_ec2_vm_cb cb, void *arg, char *err,
			    size_t errlen)
{
	struct vm_op *o = calloc(1, sizeof *o);
	if (!o) {
		snprintf(err, errlen, "aws: out of memory");
		return NULL;
	}
	o->c = c;
	o->launch = launch;
	o->cb = cb;
	o->arg = arg;
	o->res.block = "none";
	sd_api_op_init(&o->op, &op_class);
	sd_api_op_start(&o->op, sd_aws_client_http(c));
	return o;
}

static int fits(const char *v, size_t cap)
{
	return v && v[0] && strlen(v) < cap;
}

int sd_ec2_vm_launch(struct sd_aws_client *c, const struct sd_ec2_instance_spec *spec, double poll_s,
		     sd_ec2_vm_cb cb, void *arg, char *err, size_t errlen)
{
	struct vm_op probe;
	if (!fits(spec->az, sizeof probe.az) || !fits(spec->name, sizeof probe.name) ||
	    !fits(spec->type, sizeof probe.type) || !fits(spec->image, sizeof probe.image) ||
	    !fits(spec->run, sizeof probe.run) || (spec->max_price && !fits(spec->max_price, sizeof probe.max_price))) {
		snprintf(err, errlen, "aws: a launch needs a zone, a name, a type, an image and a run, each short");
		return -1;
	}
	char token[37];
	if (sd_http_request_id(token) < 0) {
		snprintf(err, errlen, "aws: no random bytes for a ClientToken");
		return -1;
	}
	char *b64 = NULL;
	if (spec->user_data) {
		size_t n = strlen(spec->user_data);
		if (n > 16384) {   /* EC2's limit on UserData before encoding */
			snprintf(err, errlen, "aws: user data over 16 KiB");
			return -1;
		}
		b64 = malloc(4 * ((n + 2) / 3) + 1);
		if (!b64) {
			snprintf(err, errlen, "aws: out of memory");
			return -1;
		}
		EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)spec->user_data, (int)n);
	}
	struct vm_op *o = op_new(c, 1, cb, arg, err, errlen);
	if (!o) {
		free(b64);
		return -1;
	}
	o->user_data_b64 = b64;
	snprintf(o->az, sizeof o->az, "%s", spec->az);
	snprintf(o->name, sizeof o->name, "%s", spec->name);
	snprintf(o->type, sizeof o->type, "%s", spec->type);
	snprintf(o->image, sizeof o->image, "%s", spec->image);
	snprintf(o->run, sizeof o->run, "%s", spec->run);
	memcpy(o->res.client_token, token, sizeof token);
	o->poll_s = poll_s > 0 ? poll_s : 2;
	struct sd_sigv4_pair prm[16] = {
		{"ImageId", o->image},
		{"InstanceType", o->type},
		{"MinCount", "1"},
		{"MaxCount", "1"},
		{"ClientToken", o->res.client_token},
		{"InstanceMarketOptions.MarketType", "spot"},
		{"InstanceMarketOptions.SpotOptions.SpotInstanceType", "one-time"},
		{"InstanceMarketOptions.SpotOptions.InstanceInterruptionBehavior", "terminate"},
		{"Placement.AvailabilityZone", o->az},
		{"TagSpecification.1.ResourceType", "instance"},
		{"TagSpecification.1.Tag.1.Key", SD_EC2_RUN_TAG},
		{"TagSpecification.1.Tag.1.Value", o->run},
		{"TagSpecification.1.Tag.2.Key", "Name"},
		{"TagSpecification.1.Tag.2.Value", o->name},
	};
	size_t n = 14;
	if (o->user_data_b64)
		prm[n++] = (struct sd_sigv4_pair){"UserData", o->user_data_b64};
	if (spec->max_price) {
		snprintf(o->max_price, sizeof o->max_price, "%s", spec->max_price);
		prm[n++] = (struct sd_sigv4_pair){"InstanceMarketOptions.SpotOptions.MaxPrice", o->max_price};
	}
	/* Idempotent: the ClientToken makes a second RunInstances answer the
	 * first one's reservation. */
	if (sd_aws_call(c, "RunInstances", prm, n, 1, on_run, o, err, errlen) < 0) {
		op_drop(o);
		return -1;
	}
	return 0;
}

int sd_ec2_vm_terminate(struct sd_aws_client *c, const char *id, sd_ec2_vm_cb cb, void *arg, char *err,
			size_t errlen)
{
	if (!id || strncmp(id, "i-", 2) != 0 || strlen(id) >= 32) {
		snprintf(err, errlen, "aws: '%.40s' is not an instance id", id ? id : "(null)");
		return -1;
	}
	struct vm_op *o = op_new(c, 0, cb, arg, err, errlen);
	if (!o)
		return -1;
	snprintf(o->id, sizeof o->id, "%s", id);
	struct sd_sigv4_pair prm[] = {{"InstanceId.1", o->id}};
	if (sd_aws_call(c, "TerminateInstances", prm, 1, 1, on_terminate, o, err, errlen) < 0) {
		op_drop(o);
		return -1;
	}
	return 0;
}

void sd_ec2_vm_cancel_waiting(struct sd_aws_client *c)
{
	sd_api_op_cancel_waiting(sd_aws_client_http(c));
}

/* Listing, page after page. */
struct vm_list {
	struct sd_aws_client *c;
	char run[64];
	char token[1024];
	int n;
	void (*each)(void *arg, const struct sd_ec2_instance *in);
	sd_ec2_vm_list_done done;
	void *arg;
};

static int list_next(struct vm_list *l, char *err, size_t errlen);

static void on_list_page(void *arg, const struct sd_http_response *r)
{
	struct vm_list *l = arg;
	char err[300], msg[700];
	if (r->status != 200) {
		struct sd_ec2_error e;
		if (r->status && sd_ec2_error_parse(r->body, r->body_len, &e, err, sizeof err) == 1)
			snprintf(msg, sizeof msg, "DescribeInstances: HTTP %ld %s: %s", r->status, e.code, e.message);
		else
			snprintf(msg, sizeof msg, "DescribeInstances: %s", r->status ? "HTTP error" : r->error);
		l->done(l->arg, -1, msg);
		free(l);
		return;
	}
	struct sd_ec2_instance *items = calloc(LIST_PAGE, sizeof *items);
	int n = items ? sd_ec2_instances_parse(r->body, r->body_len, items, LIST_PAGE, l->token, sizeof l->token, err,
					       sizeof err)
		      : -1;
	if (n < 0) {
		snprintf(msg, sizeof msg, "DescribeInstances: %s", items ? err : "out of memory");
		free(items);
		l->done(l->arg, -1, msg);
		free(l);
		return;
	}
	for (int i = 0; i < n; i++)
		if (!strcmp(items[i].run, l->run)) {
			l->each(l->arg, &items[i]);
			l->n++;
		}
	free(items);
	if (l->token[0]) {
		if (list_next(l, err, sizeof err) < 0) {
			snprintf(msg, sizeof msg, "DescribeInstances: %s", err);
			l->done(l->arg, -1, msg);
			free(l);
		}
		return;
	}
	l->done(l->arg, l->n, NULL);
	free(l);
}

static int list_next(struct vm_list *l, char *err, size_t errlen)
{
	struct sd_sigv4_pair prm[4] = {
		{"Filter.1.Name", "tag:" SD_EC2_RUN_TAG},
		{"Filter.1.Value.1", l->run},
		{"MaxResults", "1000"},
	};
	size_t n = 3;
	if (l->token[0])
		prm[n++] = (struct sd_sigv4_pair){"NextToken", l->token};
	return sd_aws_call(l->c, "DescribeInstances", prm, n, 1, on_list_page, l, err, errlen);
}

int sd_ec2_vm_list(struct sd_aws_client *c, const char *run, void (*each)(void *arg, const struct sd_ec2_instance *in),
		   sd_ec2_vm_list_done done, void *arg, char *err, size_t errlen)
{
	if (!run || !run[0] || strlen(run) >= 64) {
		snprintf(err, errlen, "aws: a run tag of 1 to 63 characters");
		return -1;
	}
	struct vm_list *l = calloc(1, sizeof *l);
	if (!l) {
		snprintf(err, errlen, "aws: out of memory");
		return -1;
	}
	l->c = c;
	snprintf(l->run, sizeof l->run, "%s", run);
	l->each = each;
	l->done = done;
	l->arg = arg;
	if (list_next(l, err, errlen) < 0) {
		free(l);
		return -1;
	}
	return 0;
}
