/* src/provider/aws/aws-vm.h - the life of a Spot instance on EC2, as the aws
 * provider drives it, on the loop: launch (RunInstances, then
 * DescribeInstances until running), terminate, and list a run's instances.
 *
 * How (cloud-apis.md section 2.3; the EC2 API Reference):
 *   launch     RunInstances MinCount=MaxCount=1 with
 *              InstanceMarketOptions.MarketType=spot (one-time, terminate on
 *              interruption), Placement.AvailabilityZone, the UserData given
 *              (base64 here), the tags spotdeck-run=RUN and Name=NAME, and a
 *              ClientToken (a random UUID kept across retries, so EC2 makes
 *              the instance once: "Ensuring idempotency", EC2 API Reference);
 *              then DescribeInstances InstanceId.1=ID every poll_s until it
 *              is running with an address.  InvalidInstanceID.NotFound right
 *              after the launch is EC2's eventual consistency (the API
 *              Reference's "Eventual consistency" page): asked again, up to
 *              NOTFOUND_TRIES times.  An error answer ends it with the scope
 *              sd_ec2_classify gives its <Code>; an instance that reaches
 *              shutting-down or terminated before running ends it with its
 *              stateReason (a zone's capacity taken back at once blocks the
 *              zone, as SkyPilot does).
 *   terminate  TerminateInstances InstanceId.1=ID (idempotent: a second call
 *              answers the state it is in); InvalidInstanceID.NotFound means
 *              it is long gone (success).
 *   list       DescribeInstances with Filter tag:spotdeck-run=RUN, every page
 *              (MaxResults 1000, NextToken).
 *
 * Every call ends with its callback exactly once, on the loop. */
#ifndef SD_PROVIDER_AWS_AWS_VM_H
#define SD_PROVIDER_AWS_AWS_VM_H

#include "src/provider/aws/aws-client.h"
#include "src/provider/aws/aws-api.h"

/* What a launch asks for.  Every string is copied. */
struct sd_ec2_instance_spec {
	const char *az;         /* "us-east-1a" (of the client's region) */
	const char *name;       /* the Name tag, "sd-0123abcd-s1" */
	const char *type;       /* "g4dn.xlarge" */
	const char *image;      /* "ami-0123456789abcdef0" */
	const char *user_data;  /* raw text (a cloud-config), base64-encoded here; NULL: none */
	const char *run;        /* the value of tag spotdeck-run */
	const char *max_price;  /* SpotOptions.MaxPrice in USD an hour, NULL: the on-demand price (AWS's default) */
};

/* The outcome of a launch or terminate. */
struct sd_ec2_vm_result {
	int ok;                       /* 1: running (launch) / shutting down or gone (terminate) */
	struct sd_ec2_instance vm;    /* launch: the instance as last read (id once known) */
	const char *block;            /* !ok: what the error blocks, sd_ec2_classify's word: "zone",
	                               * "region", "cloud", "retry" (a transport error or throttling)
	                               * or "none" */
	char code[96];                /* !ok: the <Code> ("InsufficientInstanceCapacity"), a stateReason
	                               * code ("Server.SpotInstanceTermination"), "http" for a transport
	                               * error, "cancelled" */
	char message[512];            /* !ok: one line, the API's words */
	double seconds;               /* from the call to the end */
	char client_token[37];        /* launch: the ClientToken it sent */
	double running_at;            /* launch, ok: when it was first seen running (epoch s) */
	double ended_at;              /* terminate, ok: when EC2 answered that it shuts down (epoch s);
	                               * 0 when it was already shutting down or gone */
};
typedef void (*sd_ec2_vm_cb)(void *arg, const struct sd_ec2_vm_result *r);

/* Asked again after InvalidInstanceID.NotFound following a launch. */
#define SD_EC2_NOTFOUND_TRIES 10

/* Launches SPEC's instance.  POLL_S: seconds between DescribeInstances
 * while it is pending (0: 2 s).  0, or -1 with ERR (nothing sent). */
int sd_ec2_vm_launch(struct sd_aws_client *c, const struct sd_ec2_instance_spec *spec, double poll_s,
		     sd_ec2_vm_cb cb, void *arg, char *err, size_t errlen);

/* Terminates instance ID ("i-..."). */
int sd_ec2_vm_terminate(struct sd_aws_client *c, const char *id, sd_ec2_vm_cb cb, void *arg, char *err,
			size_t errlen);

/* The run's instances (tag spotdeck-run=RUN), terminated ones included:
 * EACH per instance, then DONE once with the count, or -1 and ERROR (the
 * list is then incomplete and must not be taken for the truth). */
typedef void (*sd_ec2_vm_list_done)(void *arg, int n, const char *error);
int sd_ec2_vm_list(struct sd_aws_client *c, const char *run, void (*each)(void *arg, const struct sd_ec2_instance *in),
		   sd_ec2_vm_list_done done, void *arg, char *err, size_t errlen);

/* Ends, with ok 0 and code "cancelled", every launch of C waiting between
 * two DescribeInstances (its callback runs now).  Before closing the
 * client's HTTP, which ends the calls in flight. */
void sd_ec2_vm_cancel_waiting(struct sd_aws_client *c);

/* The instance states' codes (instanceState/code, low byte). */
enum {
	SD_EC2_PENDING = 0,
	SD_EC2_RUNNING = 16,
	SD_EC2_SHUTTING_DOWN = 32,
	SD_EC2_TERMINATED = 48,
	SD_EC2_STOPPING = 64,
	SD_EC2_STOPPED = 80,
};

#endif
