/* tests/fuzz/fuzz-control.c - fuzzes the control socket's message decoder
 * (src/run/control-proto.c) from both directions and the view codec's
 * mirror (src/app/view-codec.c) with the views of snapshot and status
 * messages, and checks what they accept: an accepted line re-encodes to one
 * line that decodes to the same type; a refusal is one non-empty line; a
 * view the mirror took encodes again (full form) into a view that a fresh
 * mirror takes and that encodes to the same text; a refused view leaves
 * the mirror as it was.
 *
 * Built with -DSD_LIBFUZZER -fsanitize=fuzzer this is a libFuzzer target.
 * Otherwise main() builds its corpus from valid messages (a snapshot and a
 * change set of tests/ui-fixture.c's view, with short series, and every
 * other type), checks that each is accepted, and runs 2,000 deterministic
 * mutations of each, so `make check` and its ASan+UBSan build fuzz on every
 * run. */
#include "config.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "src/run/control-proto.h"
#include "src/app/view-codec.h"
#include "tests/check.h"
#include "tests/ui-fixture.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_why(const char *why)
{
	FUZZ_ASSERT(why != NULL);
	FUZZ_ASSERT(why[0] != '\0');
	FUZZ_ASSERT(strchr(why, '\n') == NULL);
}

/* The view's full form as text (caller frees). */
static char *view_text(const struct sd_view *v)
{
	cJSON *o = sd_view_encode(v, NULL);
	FUZZ_ASSERT(o != NULL);
	char *s = cJSON_PrintUnformatted(o);
	FUZZ_ASSERT(s != NULL);
	cJSON_Delete(o);
	return s;
}

/* The mirror a status applies to: what a client holds after attaching
 * (set by main() or, under libFuzzer, on the first call). */
static char *base_snapshot;

static void use_view(const cJSON *view, int full)
{
	struct sd_view_mirror m;
	sd_view_mirror_init(&m);
	char *why = NULL;
	if (base_snapshot) {
		cJSON *base = cJSON_Parse(base_snapshot);
		FUZZ_ASSERT(sd_view_mirror_apply(&m, base, 1, &why) == 0);
		cJSON_Delete(base);
	}
	char *before = view_text(&m.v);
	unsigned long version = m.v.version;
	if (sd_view_mirror_apply(&m, view, full, &why) == 0) {
		FUZZ_ASSERT(why == NULL);
		FUZZ_ASSERT(m.v.version == version + 1);
		FUZZ_ASSERT(m.v.nservers <= SD_VIEW_CODEC_MAX_SERVERS);
		for (int i = 0; i < m.v.nservers; i++)
			FUZZ_ASSERT(m.v.servers[i].ips.len <= SD_VIEW_HIST &&
			            strlen(m.v.servers[i].id) < sizeof m.v.servers[i].id);
		/* What the mirror holds goes round again unchanged. */
		char *once = view_text(&m.v);
		struct sd_view_mirror m2;
		sd_view_mirror_init(&m2);
		cJSON *again = cJSON_Parse(once);
		FUZZ_ASSERT(again != NULL);
		int rc = sd_view_mirror_apply(&m2, again, 1, &why);
		if (rc != 0)
			fprintf(stderr, "re-encoded view refused: %s\n", why);
		FUZZ_ASSERT(rc == 0);
		char *twice = view_text(&m2.v);
		FUZZ_ASSERT(strcmp(once, twice) == 0);
		free(twice);
		free(once);
		cJSON_Delete(again);
		sd_view_mirror_free(&m2);
	} else {
		check_why(why);
		char *after = view_text(&m.v);
		FUZZ_ASSERT(strcmp(before, after) == 0);
		FUZZ_ASSERT(m.v.version == version);
		free(after);
	}
	free(before);
	free(why);
	sd_view_mirror_free(&m);
}

static void decode_one(const char *line, size_t len, int from_server)
{
	struct sd_control_msg m;
	char *why = NULL;
	if (sd_control_decode(line, len, from_server, &m, &why) != 0) {
		check_why(why);
		FUZZ_ASSERT(m.root == NULL);
		free(why);
		return;
	}
	FUZZ_ASSERT(why == NULL && m.root != NULL);
	/* Only the other side's types. */
	FUZZ_ASSERT(from_server ? m.type != SD_CONTROL_COMMAND && m.type != SD_CONTROL_DETACH
	                        : m.type == SD_CONTROL_HELLO || m.type == SD_CONTROL_COMMAND ||
	                          m.type == SD_CONTROL_DETACH);
	if (m.type == SD_CONTROL_COMMAND) {
		FUZZ_ASSERT(strlen(m.line) <= SD_CONTROL_COMMAND_MAX);
		for (const char *p = m.line; *p; p++)
			FUZZ_ASSERT((unsigned char)*p >= 0x20 && *p != 0x7f);
		FUZZ_ASSERT(m.id >= 0);
	}
	if (m.type == SD_CONTROL_REPLY && !m.ok)
		FUZZ_ASSERT(m.error != NULL);

	/* Re-encoding gives one line that decodes to the same type. */
	size_t n = 0;
	char *again = sd_control_line(m.root, &n);
	FUZZ_ASSERT(again && n > 0 && again[n - 1] == '\n' && !memchr(again, '\n', n - 1));
	struct sd_control_msg m2;
	int rc = sd_control_decode(again, n - 1, from_server, &m2, &why);
	if (rc != 0)
		fprintf(stderr, "re-encoded line refused: %s\n%s", why, again);
	FUZZ_ASSERT(rc == 0 && m2.type == m.type);
	sd_control_msg_free(&m2);
	free(again);

	if (m.type == SD_CONTROL_SNAPSHOT || m.type == SD_CONTROL_STATUS)
		use_view(m.view, m.type == SD_CONTROL_SNAPSHOT);
	sd_control_msg_free(&m);
	FUZZ_ASSERT(m.root == NULL);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	/* Every line of the input, as each side would read it. */
	const char *text = (const char *)data;
	size_t start = 0;
	for (size_t i = 0; i <= size; i++) {
		if (i == size || text[i] == '\n') {
			decode_one(text + start, i - start, 1);
			decode_one(text + start, i - start, 0);
			start = i + 1;
		}
	}
	return 0;
}

#ifndef SD_LIBFUZZER

/* ---- the built-in driver ---- */

#define MUTATIONS 2000
#define MAX_INPUT 32768
#define FUZZ_SEED 0x1c0a7e5d2b3f4a69ull

static const char *const tokens[] = {
	"1e999", "-1e999", "-1", "0", "1", "2", "-0", "1.5", "9007199254740993",
	"9223372036854775808", "1e18", "null", "true", "false", "\"\"", "[]", "{}", "[[[[", "]]",
	"\\u0000", "\\ud800", "\\u00e9", "\\n", "\n", "\r", "\"type\":", "\"hello\"",
	"\"snapshot\"", "\"status\"", "\"event\"", "\"reply\"", "\"error\"", "\"bye\"",
	"\"command\"", "\"detach\"", "\"view\":", "\"servers\":", "\"ips\":", "\"t\":", "\"v\":",
	"\"replace\":true", "\"offers\":[]", "\"whatif\":[{}]", "\"revocations\":", "\"seed\":",
	"\"18446744073709551615\"", "\"18446744073709551616\"", "\"id\":", "\"line\":",
	"\"want\":", "\"cockpit\"", ",\"x\":1", "\xc3\xa9", "\xed\xa0\x80",
	"\"sssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssssss\"",
};

#define NTOKENS (sizeof tokens / sizeof tokens[0])

#include "tests/fuzz/mutate.h"

/* A view small enough to mutate thousands of times: three servers, a
 * what-if row, series cut to their newest 8 samples. */
static void small_view(struct ui_fixture *f, struct sd_view_whatif *row)
{
	ui_fixture_init(f, 3);
	ui_fixture_tick(f, 1.5);
	struct sd_view_series *all[] = { &f->view.throughput, &f->view.loss_hist, &f->view.acc_hist,
	                                 &f->servers[0].ips, &f->servers[1].ips, &f->servers[2].ips };
	for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
		if (all[i]->len > 8) {
			all[i]->head = (all[i]->head + all[i]->len - 8) % SD_VIEW_HIST;
			all[i]->len = 8;
		}
	}
	f->view.noffers = 4;
	memset(row, 0, sizeof *row);
	snprintf(row->label, sizeof row->label, "2x V100 spot");
	row->servers = 2;
	row->time_p50_s = 1200;
	row->cost_p50_usd = 1.5;
	snprintf(row->commands, sizeof row->commands, "add 1 x gce/us-west1-b/v100/spot\ndrop s1");
	f->view.whatif = row;
	f->view.nwhatif = 1;
	f->view.whatif_version = 1;
}

/* {"type":TYPE,"view":VIEW} as text (caller frees). */
static char *view_message(const char *type, cJSON *view)
{
	cJSON *o = cJSON_CreateObject();
	cJSON_AddStringToObject(o, "type", type);
	cJSON_AddItemToObject(o, "view", view);
	size_t len;
	char *s = sd_control_line(o, &len);
	cJSON_Delete(o);
	return s;
}

int main(void)
{
	static struct ui_fixture f;
	struct sd_view_whatif row;
	small_view(&f, &row);
	struct sd_view_mark mark;
	memset(&mark, 0, sizeof mark);
	char *snapshot = view_message("snapshot", sd_view_encode(&f.view, NULL));
	base_snapshot = view_text(&f.view);
	sd_view_mark_set(&mark, &f.view);
	ui_fixture_tick(&f, 1.5);
	ui_fixture_revoke(&f, "s2");
	char *status = view_message("status", sd_view_encode(&f.view, &mark));
	FUZZ_ASSERT(snapshot && status);

	const char *corpus[] = {
		snapshot, status,
		"{\"type\":\"hello\",\"protocol\":1,\"pid\":4242,\"run_dir\":\"/r/run-1\",\"job\":\"cnn\","
		"\"started\":\"2026-12-02T01:54:07Z\",\"clients\":2,\"read_only\":false,\"step\":120,"
		"\"total_steps\":2340,\"world_size\":3,\"usd_spent\":1.25,\"ended\":\"\"}\n",
		"{\"type\":\"event\",\"event\":{\"type\":\"step\",\"step\":3,\"loss\":0.5}}\n",
		"{\"type\":\"reply\",\"id\":7,\"ok\":false,\"error\":\"no offer 9\"}\n",
		"{\"type\":\"error\",\"error\":\"line too long\"}\n",
		"{\"type\":\"bye\",\"status\":0,\"ended\":\"finished: test accuracy 91.2 %\"}\n",
		"{\"type\":\"hello\",\"protocol\":1,\"want\":\"cockpit\",\"read_only\":true}\n",
		"{\"type\":\"command\",\"id\":12,\"line\":\"swap s1 gce/us-west1-b/v100x1/spot\"}\n"
		"{\"type\":\"detach\"}\n",
	};
	size_t ncorpus = sizeof corpus / sizeof corpus[0];

	char *buf = malloc(MAX_INPUT);
	FUZZ_ASSERT(buf != NULL);
	long runs = 0;
	for (size_t c = 0; c < ncorpus; c++) {
		size_t base = strlen(corpus[c]);
		FUZZ_ASSERT(base <= MAX_INPUT);
		/* Unmutated, every line of the corpus is valid from one side. */
		const char *line = corpus[c];
		while (*line) {
			const char *nl = strchr(line, '\n');
			size_t len = nl ? (size_t)(nl - line) : strlen(line);
			struct sd_control_msg m;
			char *why = NULL;
			if (sd_control_decode(line, len, 1, &m, &why) != 0) {
				free(why);
				why = NULL;
				if (sd_control_decode(line, len, 0, &m, &why) != 0) {
					fprintf(stderr, "fuzz-control: corpus entry %zu refused: %s\n", c, why);
					return 1;
				}
			}
			if (m.type == SD_CONTROL_SNAPSHOT || m.type == SD_CONTROL_STATUS) {
				struct sd_view_mirror mir;
				sd_view_mirror_init(&mir);
				cJSON *b = cJSON_Parse(base_snapshot);
				FUZZ_ASSERT(sd_view_mirror_apply(&mir, b, 1, &why) == 0);
				cJSON_Delete(b);
				if (sd_view_mirror_apply(&mir, m.view, m.type == SD_CONTROL_SNAPSHOT,
				                         &why) != 0) {
					fprintf(stderr, "fuzz-control: corpus view %zu refused: %s\n", c, why);
					return 1;
				}
				sd_view_mirror_free(&mir);
			}
			sd_control_msg_free(&m);
			line += len + (nl != NULL);
		}
		LLVMFuzzerTestOneInput((const uint8_t *)corpus[c], base);
		for (int k = 0; k < MUTATIONS; k++) {
			size_t len = mutate_copy(buf, corpus[c], base);
			LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
			runs++;
		}
	}
	free(buf);
	free(snapshot);
	free(status);
	free(base_snapshot);
	printf("fuzz-control: %ld mutated inputs, no crash, invariants held\n", runs);
	return 0;
}

#endif
