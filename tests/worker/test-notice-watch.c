/* tests/worker/test-notice-watch.c - the notice watcher's parsers
 * (src/worker/notice-watch.h): the documents as the clouds publish them
 * (../shared/reference/cloud-apis.md, 1.4, 2.4, 3), and what must not be
 * taken for a notice.  The watcher itself, against a fake metadata service,
 * is tests/worker/test-worker-notice.sh. */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include "src/worker/notice-watch.h"
#include "tests/check.h"

static void test_names(void)
{
	static const char *const names[] = { "none", "auto", "gce", "aws", "azure" };
	for (int i = 0; i < 5; i++) {
		enum sd_notice_cloud c = SD_NOTICE_AZURE + 1;
		CHECK_INT(sd_notice_cloud_parse(names[i], &c), 0);
		CHECK_STR(sd_notice_cloud_name(c), names[i]);
	}
	enum sd_notice_cloud c;
	CHECK_INT(sd_notice_cloud_parse("GCE", &c), -1);
	CHECK_INT(sd_notice_cloud_parse("", &c), -1);
	CHECK_STR(sd_notice_cloud_name((enum sd_notice_cloud)99), "?");
}

static void test_aws(void)
{
	char action[16], when[32], *why = NULL;
	/* AWS's documented example. */
	CHECK_INT(sd_notice_parse_aws_action("{\"action\": \"terminate\", \"time\": \"2017-09-18T08:22:00Z\"}", action,
	                                     sizeof action, when, sizeof when, &why), 1);
	CHECK_STR(action, "terminate");
	CHECK_STR(when, "2017-09-18T08:22:00Z");
	CHECK_INT(sd_notice_parse_aws_action("{\"action\":\"hibernate\",\"time\":\"x\"}", action, sizeof action,
	                                     when, sizeof when, &why), 1);
	CHECK_STR(action, "hibernate");
	/* Truncated to the caller's buffer, never overrun. */
	char small[4];
	CHECK_INT(sd_notice_parse_aws_action("{\"action\":\"terminate\",\"time\":\"t\"}", small, sizeof small, when,
	                                     sizeof when, &why), 1);
	CHECK_STR(small, "ter");
	static const char *const bad[] = { "", "<html>404 - Not Found</html>", "[]", "{\"action\":\"terminate\"}",
	                                   "{\"action\":1,\"time\":\"2017-09-18T08:22:00Z\"}" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CHECK_INT(sd_notice_parse_aws_action(bad[i], action, sizeof action, when, sizeof when, &why), -1);
		CHECK(why && strstr(why, "spot/instance-action"), "%s: %s", bad[i], why ? why : "(null)");
		free(why);
		why = NULL;
	}
}

/* Azure's documented example, with a second event for another VM and a
 * Freeze for this one first. */
static const char azure_doc[] =
	"{\"DocumentIncarnation\":7,\"Events\":["
	"{\"EventId\":\"F1\",\"EventStatus\":\"Scheduled\",\"EventType\":\"Freeze\",\"ResourceType\":\"VirtualMachine\","
	"\"Resources\":[\"vm-spot\"],\"NotBefore\":\"Tue, 09 Aug 2022 17:00:00 GMT\"},"
	"{\"EventId\":\"OTHER\",\"EventStatus\":\"Scheduled\",\"EventType\":\"Preempt\",\"ResourceType\":\"VirtualMachine\","
	"\"Resources\":[\"vm-other\"],\"NotBefore\":\"Tue, 09 Aug 2022 17:05:00 GMT\"},"
	"{\"EventId\":\"C1BF\",\"EventStatus\":\"Scheduled\",\"EventType\":\"Preempt\",\"ResourceType\":\"VirtualMachine\","
	"\"Resources\":[\"vm-a\",\"vm-spot\"],\"NotBefore\":\"Tue, 09 Aug 2022 17:07:32 GMT\",\"EventSource\":\"Platform\","
	"\"DurationInSeconds\":-1}]}";

static void test_azure(void)
{
	char id[16], nb[48], *why = NULL;
	long inc = 0;
	CHECK_INT(sd_notice_parse_azure_events(azure_doc, "vm-spot", id, sizeof id, nb, sizeof nb, &inc, &why), 1);
	CHECK_STR(id, "C1BF");
	CHECK_STR(nb, "Tue, 09 Aug 2022 17:07:32 GMT");
	CHECK_INT(inc, 7);
	/* Another VM's Preempt is not ours; a Freeze is no notice. */
	CHECK_INT(sd_notice_parse_azure_events(azure_doc, "vm-other", id, sizeof id, nb, sizeof nb, &inc, &why), 1);
	CHECK_STR(id, "OTHER");
	CHECK_INT(sd_notice_parse_azure_events(azure_doc, "vm-nobody", id, sizeof id, nb, sizeof nb, &inc, &why), 0);
	/* Name unknown: the first Preempt counts. */
	CHECK_INT(sd_notice_parse_azure_events(azure_doc, "", id, sizeof id, nb, sizeof nb, &inc, &why), 1);
	CHECK_STR(id, "OTHER");
	CHECK_INT(sd_notice_parse_azure_events("{\"DocumentIncarnation\":1,\"Events\":[]}", "vm-spot", id, sizeof id,
	                                       nb, sizeof nb, &inc, &why), 0);
	CHECK_INT(inc, 1);
	static const char *const bad[] = { "", "{}", "{\"DocumentIncarnation\":\"1\",\"Events\":[]}",
	                                   "{\"DocumentIncarnation\":1,\"Events\":{}}",
	                                   "{\"DocumentIncarnation\":1,\"Events\":[{\"EventType\":\"Preempt\"}]}" };
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		CHECK_INT(sd_notice_parse_azure_events(bad[i], "vm-spot", id, sizeof id, nb, sizeof nb, &inc, &why), -1);
		CHECK(why && strstr(why, "scheduledevents"), "%s: %s", bad[i], why ? why : "(null)");
		free(why);
		why = NULL;
	}
}

static void test_etag(void)
{
	char e[16];
	const char *l = "ETag: 4a5b6c\r\n";
	CHECK_INT(sd_notice_parse_etag(l, strlen(l), e, sizeof e), 1);
	CHECK_STR(e, "4a5b6c");
	l = "etag:\t\"quoted\" \r\n";
	CHECK_INT(sd_notice_parse_etag(l, strlen(l), e, sizeof e), 1);
	CHECK_STR(e, "\"quoted\"");
	l = "ETag: 0123456789abcdefXYZ\r\n";   /* longer than the buffer: truncated */
	CHECK_INT(sd_notice_parse_etag(l, strlen(l), e, sizeof e), 1);
	CHECK_STR(e, "0123456789abcde");
	l = "Metadata-Flavor: Google\r\n";
	CHECK_INT(sd_notice_parse_etag(l, strlen(l), e, sizeof e), 0);
	l = "ETa";
	CHECK_INT(sd_notice_parse_etag(l, strlen(l), e, sizeof e), 0);
}

static void test_time(void)
{
	/* Epoch seconds from Python's calendar.timegm. */
	CHECK(sd_notice_parse_time("2017-09-18T08:22:00Z") == 1505722920.0);
	CHECK(sd_notice_parse_time("2017-09-18T08:22:00.250Z") == 1505722920.25);
	CHECK(sd_notice_parse_time("Tue, 09 Aug 2022 17:07:32 GMT") == 1660064852.0);
	CHECK(sd_notice_parse_time("2017-09-18T08:22:00") < 0);        /* no zone: refused */
	CHECK(sd_notice_parse_time("2017-09-18T08:22:00+02:00") < 0);  /* not UTC */
	CHECK(sd_notice_parse_time("Tue, 09 Aug 2022 17:07:32") < 0);
	CHECK(sd_notice_parse_time("") < 0);
	CHECK(sd_notice_parse_time("soon") < 0);
}

int main(void)
{
	test_names();
	test_aws();
	test_azure();
	test_etag();
	test_time();
	return check_exit("test-notice-watch");
}
