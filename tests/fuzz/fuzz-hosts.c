/* tests/fuzz/fuzz-hosts.c - fuzzes the hosts-file parser (src/provider/ssh/hosts.c)
 * and checks what it does with each input:
 *   - refused: one line that starts with the file name, and *out empty;
 *   - accepted: every value within its documented range, no blank or control
 *     character in any string, no host or user that ssh would read as an
 *     option, names unique, lines increasing; and the hosts written back
 *     out as a hosts file (every field explicit) parse to the same values.
 *
 * With libFuzzer:
 *   clang -g -O1 -fsanitize=fuzzer,address,undefined -DSD_LIBFUZZER -D_GNU_SOURCE -I. \
 *     tests/fuzz/fuzz-hosts.c src/provider/ssh/hosts.c src/base/errors.c -lm -o fuzz-hosts
 * Without it (as `make check` builds it) main() runs the files named on the
 * command line, or, with none, a built-in corpus of valid files with 20,000
 * deterministic mutations each (bit flips, bytes, truncations, inserted
 * tokens, duplicated and deleted chunks), so `make check`, and CI's
 * ASan+UBSan build of it, fuzzes on every run. */
#include "config.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "src/provider/ssh/hosts.h"
#include "tests/check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static long n_accepted;

/* A string of a hosts file: not empty, no blank, no control character. */
static void check_word(const char *s)
{
	FUZZ_ASSERT(s != NULL && *s);
	for (const unsigned char *c = (const unsigned char *)s; *c; c++)
		FUZZ_ASSERT(*c > 0x20 && *c != 0x7f);
}

static void check_hosts(const struct sd_hosts *h)
{
	FUZZ_ASSERT(h->n >= 1 && h->n <= SD_HOSTS_MAX && h->v != NULL);
	for (int i = 0; i < h->n; i++) {
		const struct sd_host *o = &h->v[i];
		check_word(o->name);
		check_word(o->host);
		FUZZ_ASSERT(o->host[0] != '-');
		if (o->user) {
			check_word(o->user);
			FUZZ_ASSERT(o->user[0] != '-');
		}
		FUZZ_ASSERT(!o->identity || *o->identity);   /* $HOME may hold anything */
		check_word(o->gpu);
		check_word(o->worker);
		check_word(o->comm_host);
		FUZZ_ASSERT(o->comm_host[0] != '-');
		FUZZ_ASSERT(o->port >= 1 && o->port <= 65535);
		FUZZ_ASSERT(o->gpu_count >= 1 && o->gpu_count <= SD_HOSTS_MAX_GPUS);
		FUZZ_ASSERT(o->slots >= 1 && o->slots <= SD_HOSTS_MAX_SLOTS);
		FUZZ_ASSERT(o->transient == 0 || o->transient == 1);
		FUZZ_ASSERT(isnan(o->usd_per_hour) || (isfinite(o->usd_per_hour) && o->usd_per_hour > 0));
		FUZZ_ASSERT(o->line >= 1 && (i == 0 || o->line > h->v[i - 1].line));
		for (int k = 0; k < i; k++) {
			FUZZ_ASSERT(strcmp(h->v[k].name, o->name) != 0);
			FUZZ_ASSERT(h->v[k].port != o->port || strcasecmp(h->v[k].host, o->host) != 0);
		}
	}
}

/* The hosts written back as a file with every field explicit; caller
 * frees. */
static char *write_back(const struct sd_hosts *h)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);
	FUZZ_ASSERT(f != NULL);
	for (int i = 0; i < h->n; i++) {
		const struct sd_host *o = &h->v[i];
		if (o->user)
			fprintf(f, "%s@", o->user);
		fprintf(f, strchr(o->host, ':') ? "[%s]:%d" : "%s:%d", o->host, o->port);
		fprintf(f, " name=%s gpu=%s gpus=%d market=%s slots=%d worker=%s comm_host=%s",
		        o->name, o->gpu, o->gpu_count, o->transient ? "spot" : "on-demand", o->slots,
		        o->worker, o->comm_host);
		if (o->identity)
			fprintf(f, " identity=%s", o->identity);
		if (!isnan(o->usd_per_hour))
			fprintf(f, " price=%.17g", o->usd_per_hour);
		fputc('\n', f);
	}
	FUZZ_ASSERT(fclose(f) == 0);
	return text;
}

static int same_str(const char *a, const char *b)
{
	return a == b || (a && b && strcmp(a, b) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sd_hosts h;
	char *why = NULL;
	memset(&h, 0x5a, sizeof h);
	if (sd_hosts_parse((const char *)data, size, "fuzz-hosts", &h, &why) != 0) {
		FUZZ_ASSERT(why != NULL);
		FUZZ_ASSERT(strncmp(why, "fuzz-hosts:", 11) == 0);
		FUZZ_ASSERT(strchr(why, '\n') == NULL);
		FUZZ_ASSERT(h.n == 0 && h.v == NULL && h.path == NULL);
		free(why);
		return 0;
	}
	FUZZ_ASSERT(why == NULL);
	FUZZ_ASSERT(strcmp(h.path, "fuzz-hosts") == 0);
	check_hosts(&h);
	n_accepted++;

	char *text = write_back(&h);
	struct sd_hosts back;
	if (sd_hosts_parse(text, strlen(text), "written-back", &back, &why) != 0) {
		fprintf(stderr, "fuzz-hosts: written back, refused: %s\n%s", why ? why : "?", text);
		FUZZ_ASSERT(0);
	}
	FUZZ_ASSERT(back.n == h.n);
	for (int i = 0; i < h.n; i++) {
		const struct sd_host *a = &h.v[i], *b = &back.v[i];
		FUZZ_ASSERT(same_str(a->name, b->name) && same_str(a->host, b->host));
		FUZZ_ASSERT(same_str(a->user, b->user) && a->port == b->port);
		FUZZ_ASSERT(same_str(a->identity, b->identity) && same_str(a->gpu, b->gpu));
		FUZZ_ASSERT(a->gpu_count == b->gpu_count && a->transient == b->transient);
		FUZZ_ASSERT(a->usd_per_hour == b->usd_per_hour ||
		            (isnan(a->usd_per_hour) && isnan(b->usd_per_hour)));
		FUZZ_ASSERT(a->slots == b->slots && same_str(a->worker, b->worker));
		FUZZ_ASSERT(same_str(a->comm_host, b->comm_host));
	}
	sd_hosts_free(&back);
	free(text);
	sd_hosts_free(&h);
	return 0;
}

#ifndef SD_LIBFUZZER

/* ---- the built-in driver ---- */

/* Valid files; /dev/null is a readable identity file on every machine. */
static const char *const corpus[] = {
	"h gpu=x market=spot\n",
	"# lab and cloud hosts\n"
	"\n"
	"alice@203.0.113.10:2222 name=lab-a100 identity=/dev/null gpu=A100-80GB gpus=8 "
	"market=on-demand price=32.77 slots=4 worker=/opt/spotdeck/bin/spotdeck-worker "
	"comm_host=10.0.0.10 # the lab's box\n"
	"\t198.51.100.7  gpu=T4   market=spot\n"
	"[2001:db8::1]:2200 user=bob gpu=cpu market=spot price=0.0105 comm_host=[2001:db8::2]\r\n"
	"carol@[2001:db8::3] port=2022 gpu=L4 market=spot price=1e-1 slots=64 gpus=1024\n"
	"gpu-7.Example.org:22 gpu=V100 market=on-demand name=v100 comm_host=2001:db8::7 price=3",
	"\xef\xbb\xbf" "a gpu=x market=spot\r\na:2222 gpu=x market=spot\r\n"
	"b name=c gpu=y market=on-demand price=0.5\r\n",
	"ada@203.0.113.10 gpu=A100-80GB gpus=8 market=on-demand price=32.77 slots=4\n"
	"ubuntu@[2001:db8::5]:2222 name=spot-l4 gpu=L4 market=spot price=0.28 "
	"comm_host=198.51.100.21\n"
	"198.51.100.7 gpu=cpu market=spot worker=/opt/spotdeck/bin/spotdeck-worker  # price\n",
};

#define NCORPUS (sizeof corpus / sizeof corpus[0])
#define MUTATIONS 20000
#define MAX_INPUT 4096

#define FUZZ_SEED 0x5d0c4b057ull

static const char *const tokens[] = {
	"@", ":", "[", "]", "=", "#", " ", "\t", "\n", "\r\n", "~/", "::", "-", ".",
	"gpu=", "market=spot", "market=on-demand", "price=", "port=", "user=", "slots=", "gpus=",
	"name=", "identity=", "identity=/dev/null", "worker=", "comm_host=", "2001:db8::1",
	"[2001:DB8:0::1]", "203.0.113.10", "65535", "65536", "0", "1e308", "1e-400", "nan",
	"0x1p3", "0,5", "\xef\xbb\xbf", "A100", "h gpu=x market=spot\n",
};

#define NTOKENS (sizeof tokens / sizeof tokens[0])

#include "tests/fuzz/mutate.h"

int main(int argc, char **argv)
{
	if (argc > 1)
		return fuzz_run_files("fuzz-hosts", argc, argv);
	char *buf = malloc(MAX_INPUT);
	if (!buf)
		return 99;
	long runs = 0;
	for (size_t c = 0; c < NCORPUS; c++) {
		size_t base = strlen(corpus[c]);
		/* Unmutated, every file of the corpus is valid. */
		long before = n_accepted;
		LLVMFuzzerTestOneInput((const uint8_t *)corpus[c], base);
		if (n_accepted != before + 1) {
			fprintf(stderr, "fuzz-hosts: corpus entry %zu refused\n", c);
			return 1;
		}
		for (int m = 0; m < MUTATIONS; m++) {
			size_t len = mutate_copy(buf, corpus[c], base);
			LLVMFuzzerTestOneInput((const uint8_t *)buf, len);
			runs++;
		}
	}
	free(buf);
	printf("fuzz-hosts: %ld mutated inputs (%ld accepted), no crash, invariants held\n", runs,
	       n_accepted - (long)NCORPUS);
	return 0;
}

#endif
