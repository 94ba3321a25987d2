/* tests/provider/aws/test-aws-api.c - the EC2 Query API answers (src/provider/aws/aws-api.h)
 * in the shapes AWS documents them (cloud-apis.md section 2.3): the error
 * document, RunInstances, DescribeInstances with a Spot interruption and
 * paging, TerminateInstances, DescribeSpotPriceHistory, zones; bad XML and
 * too many items refused; error codes in their failover scopes. */
#include "config.h"
#include "src/provider/aws/aws-api.h"

#include "tests/check.h"

#include <string.h>

#define NS "xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\""

static const char capacity[] =
	"<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Response><Errors><Error><Code>InsufficientInstanceCapacity"
	"</Code><Message>We currently do not have sufficient g5.xlarge capacity in the Availability Zone you "
	"requested (us-east-1a).</Message></Error></Errors><RequestID>5f3c-77</RequestID></Response>";

static const char run[] =
	"<RunInstancesResponse " NS "><requestId>r-1</requestId><reservationId>r-0abc</reservationId>"
	"<ownerId>123456789012</ownerId><instancesSet><item><instanceId>i-0123456789abcdef0</instanceId>"
	"<imageId>ami-1</imageId><instanceState><code>0</code><name>pending</name></instanceState>"
	"<privateIpAddress>10.0.0.7</privateIpAddress><instanceType>g5.xlarge</instanceType>"
	"<placement><availabilityZone>us-east-1b</availabilityZone><tenancy>default</tenancy></placement>"
	"<instanceLifecycle>spot</instanceLifecycle><spotInstanceRequestId>sir-1</spotInstanceRequestId>"
	"<tagSet><item><key>Name</key><value>x</value></item><item><key>spotdeck-run</key><value>run1</value>"
	"</item></tagSet></item></instancesSet></RunInstancesResponse>";

static const char describe[] =
	"<DescribeInstancesResponse " NS "><requestId>r-2</requestId><reservationSet><item>"
	"<reservationId>r-0abc</reservationId><instancesSet><item><instanceId>i-0aaa</instanceId>"
	"<instanceState><code>272</code><name>running</name></instanceState><instanceType>g5.xlarge"
	"</instanceType><placement><availabilityZone>us-east-1a</availabilityZone></placement>"
	"<ipAddress>3.4.5.6</ipAddress><privateIpAddress>10.0.0.8</privateIpAddress></item>"
	"<item><instanceId>i-0bbb</instanceId><instanceState><code>48</code><name>terminated</name>"
	"</instanceState><stateReason><code>Server.SpotInstanceTermination</code><message>"
	"Server.SpotInstanceTermination: Spot instance termination</message></stateReason>"
	"<tagSet><item><key>spotdeck-run</key><value>run1</value></item></tagSet></item></instancesSet>"
	"</item></reservationSet><nextToken>tok-2</nextToken></DescribeInstancesResponse>";

static const char terminate[] =
	"<TerminateInstancesResponse " NS "><requestId>r-3</requestId><instancesSet><item>"
	"<instanceId>i-0aaa</instanceId><currentState><code>32</code><name>shutting-down</name></currentState>"
	"<previousState><code>16</code><name>running</name></previousState></item></instancesSet>"
	"</TerminateInstancesResponse>";

static const char prices[] =
	"<DescribeSpotPriceHistoryResponse " NS "><requestId>r-4</requestId><spotPriceHistorySet>"
	"<item><instanceType>g5.xlarge</instanceType><productDescription>Linux/UNIX</productDescription>"
	"<spotPrice>0.412300</spotPrice><timestamp>2026-12-01T10:00:00.000Z</timestamp>"
	"<availabilityZone>us-east-1a</availabilityZone></item><item><instanceType>g5.xlarge</instanceType>"
	"<productDescription>Linux/UNIX</productDescription><spotPrice>0.398100</spotPrice>"
	"<timestamp>2026-12-01T09:00:00.000Z</timestamp><availabilityZone>us-east-1b</availabilityZone></item>"
	"</spotPriceHistorySet><nextToken></nextToken></DescribeSpotPriceHistoryResponse>";

static const char zones[] =
	"<DescribeAvailabilityZonesResponse " NS "><requestId>r-5</requestId><availabilityZoneInfo>"
	"<item><zoneName>us-east-1a</zoneName><zoneState>available</zoneState><regionName>us-east-1</regionName>"
	"</item><item><zoneName>us-east-1e</zoneName><zoneState>impaired</zoneState><regionName>us-east-1"
	"</regionName></item></availabilityZoneInfo></DescribeAvailabilityZonesResponse>";

int main(void)
{
	char err[256], next[64];
	struct sd_ec2_error e;
	CHECK_INT(sd_ec2_error_parse(capacity, strlen(capacity), &e, err, sizeof err), 1);
	CHECK_STR(e.code, "InsufficientInstanceCapacity");
	CHECK(strstr(e.message, "(us-east-1a)") != NULL, "%s", e.message);
	CHECK_STR(e.request_id, "5f3c-77");
	CHECK_STR(sd_ec2_classify(e.code), "zone");
	CHECK_INT(sd_ec2_error_parse(run, strlen(run), &e, err, sizeof err), 0);
	CHECK_INT(sd_ec2_error_parse("<Response><Errors>", 18, &e, err, sizeof err), -1);
	CHECK(strstr(err, "not XML") != NULL, "%s", err);
	check_report(1, "the error document: code, message, request id; broken XML refused");

	struct sd_ec2_instance in[4];
	CHECK_INT(sd_ec2_instances_parse(run, strlen(run), in, 4, next, sizeof next, err, sizeof err), 1);
	CHECK_STR(in[0].id, "i-0123456789abcdef0");
	CHECK_STR(in[0].type, "g5.xlarge");
	CHECK_STR(in[0].az, "us-east-1b");
	CHECK_INT(in[0].state_code, 0);
	CHECK_STR(in[0].state, "pending");
	CHECK_STR(in[0].private_ip, "10.0.0.7");
	CHECK_STR(in[0].public_ip, "");
	CHECK_STR(in[0].run, "run1");
	CHECK_STR(next, "");
	CHECK_INT(sd_ec2_instances_parse(describe, strlen(describe), in, 4, next, sizeof next, err, sizeof err), 2);
	CHECK_STR(in[0].id, "i-0aaa");
	CHECK_INT(in[0].state_code, 16); /* 272 = 256 + 16: the high byte is ignored */
	CHECK_STR(in[0].public_ip, "3.4.5.6");
	CHECK_STR(in[0].run, "");
	CHECK_STR(in[0].reason_code, "");
	CHECK_STR(in[1].id, "i-0bbb");
	CHECK_INT(in[1].state_code, 48);
	CHECK_STR(in[1].reason_code, "Server.SpotInstanceTermination");
	CHECK_STR(in[1].run, "run1");
	CHECK_STR(next, "tok-2");
	CHECK_INT(sd_ec2_instances_parse(describe, strlen(describe), in, 1, next, sizeof next, err, sizeof err), -1);
	CHECK(strstr(err, "more than 1 items") != NULL, "%s", err);
	CHECK_INT(sd_ec2_instances_parse(terminate, strlen(terminate), in, 4, NULL, 0, err, sizeof err), 1);
	CHECK_INT(in[0].state_code, 32);
	CHECK_STR(in[0].state, "shutting-down");
	check_report(1, "instances: RunInstances, DescribeInstances (interrupted, tagged, paged), TerminateInstances");

	struct sd_ec2_spot_price p[4];
	CHECK_INT(sd_ec2_spot_prices_parse(prices, strlen(prices), p, 4, next, sizeof next, err, sizeof err), 2);
	CHECK_STR(p[0].az, "us-east-1a");
	CHECK(p[0].usd_per_hour == 0.4123, "price %g", p[0].usd_per_hour);
	CHECK(p[1].usd_per_hour == 0.3981, "price %g", p[1].usd_per_hour);
	CHECK_STR(p[1].timestamp, "2026-12-01T09:00:00.000Z");
	CHECK_STR(next, "");
	static const char badprice[] = "<R><spotPriceHistorySet><item><instanceType>g5.xlarge</instanceType>"
				       "<spotPrice>cheap</spotPrice></item></spotPriceHistorySet></R>";
	CHECK_INT(sd_ec2_spot_prices_parse(badprice, strlen(badprice), p, 4, NULL, 0, err, sizeof err), -1);
	struct sd_ec2_zone z[4];
	CHECK_INT(sd_ec2_zones_parse(zones, strlen(zones), z, 4, err, sizeof err), 2);
	CHECK_STR(z[1].name, "us-east-1e");
	CHECK_STR(z[1].state, "impaired");
	CHECK_STR(z[0].region, "us-east-1");
	check_report(1, "Spot prices and zones read; a price that is not a number refused");

	static const struct {
		const char *code, *scope;
	} cls[] = {
		{"InsufficientInstanceCapacity", "zone"}, {"Unsupported", "zone"},
		{"MaxSpotInstanceCountExceeded", "region"}, {"VcpuLimitExceeded", "region"},
		{"AuthFailure", "cloud"}, {"UnauthorizedOperation", "cloud"},
		{"RequestLimitExceeded", "retry"}, {"InternalError", "retry"},
		{"InvalidInstanceID.NotFound", "none"}, {"DryRunOperation", "none"},
	};
	for (size_t i = 0; i < sizeof cls / sizeof cls[0]; i++)
		CHECK(!strcmp(sd_ec2_classify(cls[i].code), cls[i].scope), "%s: %s, want %s", cls[i].code,
		      sd_ec2_classify(cls[i].code), cls[i].scope);
	check_report(1, "error codes in their failover scopes");

	/* DescribeInstanceTypes as EC2 answers it (abridged; the nested
	 * gpus/item is not a new instance type). */
	static const char types[] =
		"<DescribeInstanceTypesResponse xmlns=\"http://ec2.amazonaws.com/doc/2016-11-15/\">"
		"<requestId>r</requestId><instanceTypeSet>"
		"<item><instanceType>g4dn.xlarge</instanceType><currentGeneration>true</currentGeneration>"
		"<vCpuInfo><defaultVCpus>4</defaultVCpus><defaultCores>2</defaultCores></vCpuInfo>"
		"<gpuInfo><gpus><item><name>T4</name><manufacturer>NVIDIA</manufacturer><count>1</count>"
		"<memoryInfo><sizeInMiB>16384</sizeInMiB></memoryInfo></item></gpus></gpuInfo></item>"
		"<item><instanceType>p4d.24xlarge</instanceType><vCpuInfo><defaultVCpus>96</defaultVCpus></vCpuInfo>"
		"<gpuInfo><gpus><item><name>A100</name><count>8</count></item></gpus></gpuInfo></item>"
		"<item><instanceType>m5.large</instanceType><vCpuInfo><defaultVCpus>2</defaultVCpus></vCpuInfo></item>"
		"</instanceTypeSet></DescribeInstanceTypesResponse>";
	struct sd_ec2_instance_type it[4];
	CHECK_INT(sd_ec2_instance_types_parse(types, strlen(types), it, 4, err, sizeof err), 3);
	CHECK_STR(it[0].type, "g4dn.xlarge");
	CHECK_INT(it[0].vcpus, 4);
	CHECK_INT(it[0].gpus, 1);
	CHECK_STR(it[1].type, "p4d.24xlarge");
	CHECK_INT(it[1].vcpus, 96);
	CHECK_INT(it[1].gpus, 8);
	CHECK_INT(it[2].vcpus, 2);
	CHECK_INT(it[2].gpus, 0);
	/* The Spot vCPU quota by family. */
	static const struct {
		const char *type, *code;
	} q[] = {
		{"g4dn.xlarge", "L-3819A6DF"}, {"g6e.12xlarge", "L-3819A6DF"}, {"vt1.3xlarge", "L-3819A6DF"},
		{"p3.2xlarge", "L-7212CCBC"}, {"p5.48xlarge", "L-7212CCBC"}, {"m5.large", "L-34B43A08"},
		{"c7i.xlarge", "L-34B43A08"}, {"t3.micro", "L-34B43A08"}, {"inf2.xlarge", NULL},
		{"f1.2xlarge", NULL}, {"dl1.24xlarge", NULL}, {"trn1.2xlarge", NULL}, {"x2idn.16xlarge", NULL},
		{"g", NULL}, {"", NULL}, {"4dn.xlarge", NULL},
	};
	for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
		const char *name = NULL, *code = sd_ec2_spot_quota_code(q[i].type, &name);
		CHECK((code == NULL) == (q[i].code == NULL) && (!code || !strcmp(code, q[i].code)), "%s: %s, want %s",
		      q[i].type, code ? code : "none", q[i].code ? q[i].code : "none");
		CHECK(!code || (name && strstr(name, "Spot Instance Requests")), "%s: name %s", q[i].type,
		      name ? name : "(null)");
	}
	check_report(1, "instance types' vCPUs and GPUs read; the Spot vCPU quota of each family");
	return check_exit("test-aws-api");
}
