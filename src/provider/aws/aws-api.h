/* src/provider/aws/aws-api.h - the EC2 Query API answers the aws provider reads
 * (cloud-apis.md section 2.3, xmlns http://ec2.amazonaws.com/doc/2016-11-15/):
 * the error document, instances (RunInstances, DescribeInstances,
 * TerminateInstances), Spot prices (DescribeSpotPriceHistory) and
 * availability zones, read with expat (no XML parsing of our own).  No
 * I/O here.
 *
 * Elements are matched by their local names on the path the reference
 * gives, so a namespace prefix or an element AWS adds later changes
 * nothing.  Every function returns the number of items read (0 or more),
 * or -1 with a one-line error in ERR (ERRLEN bytes). */
#ifndef SD_PROVIDER_AWS_AWS_API_H
#define SD_PROVIDER_AWS_AWS_API_H

#include <stddef.h>

/* The tag every resource of a run carries: spotdeck-run=<run id>. */
#define SD_EC2_RUN_TAG "spotdeck-run"
#define SD_EC2_API_VERSION "2016-11-15"

/* <Response><Errors><Error><Code>..</Code><Message>..</Message></Error>
 * </Errors><RequestID>..</RequestID></Response>: the first error. */
struct sd_ec2_error {
	char code[96];      /* "InsufficientInstanceCapacity", "DryRunOperation", ... */
	char message[512];
	char request_id[64];
};
/* 1 when XML is an error document (E filled), 0 when it is not, -1 when it
 * is not XML. */
int sd_ec2_error_parse(const char *xml, size_t len, struct sd_ec2_error *e, char *err, size_t errlen);

/* An instance (instancesSet/item), as much as the provider reads. */
struct sd_ec2_instance {
	char id[32];           /* instanceId, "i-0123..." */
	char type[32];         /* instanceType */
	char az[32];           /* placement/availabilityZone */
	int state_code;        /* instanceState/code (or currentState/code), low byte:
	                        * 0 pending, 16 running, 32 shutting-down, 48 terminated,
	                        * 64 stopping, 80 stopped; -1 if absent */
	char state[24];        /* its name */
	char public_ip[48];    /* ipAddress, "" when none */
	char private_ip[48];   /* privateIpAddress */
	char reason_code[64];  /* stateReason/code: "Server.SpotInstanceTermination",
	                        * "Client.UserInitiatedShutdown", ... ("" when none) */
	char reason[256];      /* stateReason/message */
	char run[64];          /* the value of tag spotdeck-run, "" when not ours */
	char name[64];         /* the value of tag Name, "" when none */
};
/* Every instance of a RunInstances, DescribeInstances or
 * TerminateInstances answer into OUT (at most MAX; more is an error), and
 * nextToken into NEXT ("" on the last page; NEXT may be NULL). */
int sd_ec2_instances_parse(const char *xml, size_t len, struct sd_ec2_instance *out, int max, char *next,
			   size_t nextlen, char *err, size_t errlen);

/* A Spot price (spotPriceHistorySet/item). */
struct sd_ec2_spot_price {
	char type[32];
	char az[32];
	double usd_per_hour;   /* spotPrice */
	char timestamp[32];    /* ISO 8601 */
};
int sd_ec2_spot_prices_parse(const char *xml, size_t len, struct sd_ec2_spot_price *out, int max,
			     char *next, size_t nextlen, char *err, size_t errlen);

/* An availability zone (availabilityZoneInfo/item). */
struct sd_ec2_zone {
	char name[32];         /* zoneName */
	char state[24];        /* zoneState: "available", ... */
	char region[32];       /* regionName */
};
int sd_ec2_zones_parse(const char *xml, size_t len, struct sd_ec2_zone *out, int max, char *err,
		       size_t errlen);

/* An instance type (DescribeInstanceTypes: instanceTypeSet/item), what
 * the vCPU quota check needs. */
struct sd_ec2_instance_type {
	char type[32];         /* instanceType */
	int vcpus;             /* vCpuInfo/defaultVCpus */
	int gpus;              /* gpuInfo/gpus/item/count, summed; 0: none */
};
int sd_ec2_instance_types_parse(const char *xml, size_t len, struct sd_ec2_instance_type *out, int max,
				char *err, size_t errlen);

/* The Service Quotas code of the Spot vCPU quota that counts instances of
 * TYPE ("g4dn.xlarge"), by its family's letters (AWS EC2 User Guide,
 * "Amazon EC2 service quotas", the vCPU-based Spot Instance limits), with
 * its name in *NAME:
 *   G, VT                         L-3819A6DF  All G and VT Spot Instance Requests
 *   P                             L-7212CCBC  All P Spot Instance Requests
 *   A, C, D, H, I, M, R, T, Z     L-34B43A08  All Standard (A, C, D, H, I, M, R, T, Z)
 *                                             Spot Instance Requests
 * NULL for another family (F, Inf, Trn, X, DL, ...), whose codes are not
 * in this table. */
const char *sd_ec2_spot_quota_code(const char *type, const char **name);

/* What an error code means for the next attempt, as the best peers read
 * them (cloud-apis.md 2.3; SkyPilot and AWS ParallelCluster's fast
 * failover set): capacity -> try another zone; quota -> the region;
 * credentials and permissions -> the cloud; throttling -> later.
 * Returns "zone", "region", "cloud", "retry" or "none". */
const char *sd_ec2_classify(const char *code);

#endif
