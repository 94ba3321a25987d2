/* src/proto/job.c - see job.h.  One table describes every key: its type, where it
 * lives in struct sd_job and its allowed range; parsing, serialising,
 * comparing and the manual page (man/spotdeck-job.5) all follow it. */
#include "config.h"

#include "src/proto/job.h"

#include "engine/grad-sync.h"

#include <errno.h>
#include <fcntl.h>
#include <float.h>
#include <locale.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "src/base/errors.h"
#include "src/base/json.h"
#include "engine/model.h"
#include "engine/onnx.h"
#include "engine/optim.h"

/* Integers travel as JSON numbers, which cJSON holds as doubles: above 2^53
 * (SD_JSON_INT_EXACT) not every integer has one, so no integer setting may
 * exceed it. */

enum sd_key_kind {
	K_STR,        /* char[size], any string shorter than size */
	K_NAME,       /* char[size], one of names[] */
	K_INT,        /* int in [lo, hi] */
	K_LONG,       /* long in [lo, hi] */
	K_U64,        /* uint64_t in [lo, hi] */
	K_FLOAT,      /* float in the interval lo..hi */
	K_FLOAT2,     /* float[2]: a JSON array of two numbers, each in lo..hi */
	K_DOUBLE,     /* double in the interval lo..hi */
	K_SCHEDULE,   /* enum sd_lr_kind */
	K_CLUSTER,    /* cluster[] + ncluster */
	K_PROVIDER,   /* provider[] (+ the IN_PROVIDER keys, provider_settings): an
	               * object {"name": ..., ...}, or the bare name (older files) */
	K_NORMALIZE,  /* train.norm_channels, norm_mean[], norm_std[]: an object
	               * {"mean": [...], "std": [...]}, or null for none */
	K_OBJECT,     /* char[size]: a JSON object kept as its compact text for
	               * a layer above to read ("" when absent or null) */
	K_BOOL,       /* int 0 or 1: JSON false or true */
};

/* Intervals for K_FLOAT / K_DOUBLE: whether each end is excluded. */
#define OPEN_LO 1u
#define OPEN_HI 2u
/* A key of the provider object (written there; older files have it at the
 * top level, which is still read). */
#define IN_PROVIDER 4u
/* A K_FLOAT whose unset value 0 means "off": absent from the files written,
 * and refused when given (the interval excludes it). */
#define ZERO_OFF 8u
/* A setting of one optimizer only: refused in a job whose "optimizer" is
 * the other one (it would be ignored), and left out of the files written
 * for it. */
#define SGD_ONLY 16u
#define ADAMW_ONLY 32u

struct sd_job_key {
	const char *name;
	enum sd_key_kind kind;
	size_t offset;          /* in struct sd_job */
	size_t size;            /* K_STR, K_NAME: the array's size */
	double lo, hi;
	unsigned flags;
	const char *const *names;   /* K_NAME: the accepted values, NULL-terminated */
	const char *what;       /* K_NAME: "model", "dataset", ... */
};

/* The datasets engine/data.c loads (sd_dataset_load, sd_dataset_synthetic),
 * and engine/tokens.h's token files (the trainer's language-model path). */
static const char *const sd_dataset_names[] = {
	"fashion-mnist", "mnist", "cifar10", "synthetic", "npy", "tokens", NULL
};
/* engine/data.h: sd_layout_parse, sd_augment_parse. */
static const char *const sd_layout_names[] = { "NCHW", "NHWC", NULL };
static const char *const sd_augment_names[] = { "none", "crop4+flip", NULL };
/* engine/train.h's precision: the convolutions' (engine/layers.h
 * sd_conv2d_parse_precision), or auto's pick by the worker. */
static const char *const sd_precision_names[] = { "fp32", "bf16", "auto", NULL };
static const char *const sd_schedule_names[] = { "constant", "step", "cosine", NULL };
/* engine/optim.h: sd_optim_kind_parse. */
static const char *const sd_optimizer_names[] = { "sgd", "adamw", NULL };
/* The clouds whose preemption notice a worker can watch
 * (src/worker/notice-watch.h keeps the same names). */
static const char *const sd_notice_names[] = { "none", "auto", "gce", "aws", "azure", NULL };

#define OFF(field) offsetof(struct sd_job, field)
#define SZ(field) sizeof(((struct sd_job *)0)->field)

static const struct sd_job_key sd_job_keys[] = {
	{ "model", K_NAME, OFF(train.model), SZ(train.model), 0, 0, 0, sd_model_names, "model" },
	{ "dataset", K_NAME, OFF(train.dataset), SZ(train.dataset), 0, 0, 0, sd_dataset_names,
	  "dataset" },
	{ "data_dir", K_STR, OFF(train.data_dir), SZ(train.data_dir), 0, 0, 0, NULL, NULL },
	/* Dataset tokens' sequence length (engine/train.h); 0: none. */
	{ "block_size", K_INT, OFF(train.block_size), 0, 0, 1048576, 0, NULL, NULL },
	{ "epochs", K_INT, OFF(train.epochs), 0, 1, 100000, 0, NULL, NULL },
	{ "global_batch", K_INT, OFF(train.global_batch), 0, 1, 1048576, 0, NULL, NULL },
	{ "lr", K_FLOAT, OFF(train.lr), 0, 0, 100, OPEN_LO, NULL, NULL },
	{ "optimizer", K_NAME, OFF(train.optimizer), SZ(train.optimizer), 0, 0, 0,
	  sd_optimizer_names, "optimizer" },
	{ "momentum", K_FLOAT, OFF(train.momentum), 0, 0, 1, OPEN_HI | SGD_ONLY, NULL, NULL },
	{ "weight_decay", K_FLOAT, OFF(train.weight_decay), 0, 0, 1, 0, NULL, NULL },
	/* AdamW's: torch.optim.AdamW refuses betas outside [0, 1) and a
	 * negative eps. */
	{ "betas", K_FLOAT2, OFF(train.betas), 0, 0, 1, OPEN_HI | ADAMW_ONLY, NULL, NULL },
	{ "eps", K_FLOAT, OFF(train.eps), 0, 0, 1, ADAMW_ONLY, NULL, NULL },
	{ "clip_grad_norm", K_FLOAT, OFF(train.clip_grad_norm), 0, 0, 1e6, OPEN_LO | ZERO_OFF, NULL,
	  NULL },
	{ "schedule", K_SCHEDULE, OFF(train.schedule), 0, 0, 0, 0, sd_schedule_names, "schedule" },
	{ "warmup_steps", K_LONG, OFF(train.warmup_steps), 0, 0, 1000000000, 0, NULL, NULL },
	{ "seed", K_U64, OFF(train.seed), 0, 0, SD_JSON_INT_EXACT, 0, NULL, NULL },
	{ "eval_batch", K_INT, OFF(train.eval_batch), 0, 1, 1048576, 0, NULL, NULL },
	{ "synthetic_samples", K_INT, OFF(train.synthetic_samples), 0, 1, 10000000, 0, NULL, NULL },
	{ "synthetic_c", K_INT, OFF(train.synthetic_c), 0, 1, 64, 0, NULL, NULL },
	{ "synthetic_h", K_INT, OFF(train.synthetic_h), 0, 1, 1024, 0, NULL, NULL },
	{ "synthetic_w", K_INT, OFF(train.synthetic_w), 0, 1, 1024, 0, NULL, NULL },
	{ "layout", K_NAME, OFF(train.layout), SZ(train.layout), 0, 0, 0, sd_layout_names, "layout" },
	{ "normalize", K_NORMALIZE, OFF(train.norm_channels), 0, 0, 0, 0, NULL, NULL },
	{ "classes", K_INT, OFF(train.classes), 0, 0, SD_DATA_MAX_CLASSES, 0, NULL, NULL },
	{ "augment", K_NAME, OFF(train.augment), SZ(train.augment), 0, 0, 0, sd_augment_names,
	  "augmentation" },
	{ "precision", K_NAME, OFF(train.precision), SZ(train.precision), 0, 0, 0,
	  sd_precision_names, "precision" },
	{ "tf32", K_BOOL, OFF(train.tf32), 0, 0, 0, 0, NULL, NULL },
	{ "workers", K_INT, OFF(workers), 0, 0, 256, 0, NULL, NULL },
	{ "min_workers", K_INT, OFF(min_workers), 0, 1, 256, 0, NULL, NULL },
	{ "threads_per_worker", K_INT, OFF(threads_per_worker), 0, 1, 1024, 0, NULL, NULL },
	{ "checkpoint_every", K_LONG, OFF(checkpoint_every), 0, 0, 1000000000, 0, NULL, NULL },
	{ "keep_checkpoints", K_INT, OFF(keep_checkpoints), 0, 1, 1000, 0, NULL, NULL },
	{ "comm_timeout", K_DOUBLE, OFF(comm_timeout_s), 0, 0.1, 600, 0, NULL, NULL },
	{ "log_every", K_INT, OFF(log_every), 0, 1, 1000000, 0, NULL, NULL },
	{ "bucket_kib", K_INT, OFF(bucket_kib), 0, 0, 1048576, 0, NULL, NULL },
	{ "pin_workers", K_INT, OFF(pin_workers), 0, 0, 1, 0, NULL, NULL },
	{ "notice", K_NAME, OFF(notice), SZ(notice), 0, 0, 0, sd_notice_names, "notice watcher" },
	{ "provider", K_PROVIDER, OFF(provider), SZ(provider), 0, 0, 0, NULL, NULL },
	{ "catalog", K_STR, OFF(catalog), SZ(catalog), 0, 0, IN_PROVIDER, NULL, NULL },
	{ "hazard_scale", K_DOUBLE, OFF(hazard_scale), 0, 0, 1e6, OPEN_LO | IN_PROVIDER, NULL, NULL },
	{ "boot_scale", K_DOUBLE, OFF(boot_scale), 0, 0, 1000, IN_PROVIDER, NULL, NULL },
	{ "notice_scale", K_DOUBLE, OFF(notice_scale), 0, 0, 1000, OPEN_LO | IN_PROVIDER, NULL,
	  NULL },
	{ "market_seed", K_U64, OFF(market_seed), 0, 0, SD_JSON_INT_EXACT, IN_PROVIDER, NULL, NULL },
	{ "cluster", K_CLUSTER, OFF(cluster), SZ(cluster[0]), 0, SD_JOB_CLUSTER_MAX, 0, NULL, NULL },
	{ "autopilot", K_OBJECT, OFF(autopilot), SZ(autopilot), 0, 0, 0, NULL, NULL },
};

#define SD_JOB_NKEYS (sizeof sd_job_keys / sizeof sd_job_keys[0])

void sd_job_defaults(struct sd_job *j)
{
	memset(j, 0, sizeof *j);
	sd_train_config_defaults(&j->train);
	/* A job picks its precision where it runs (the trainer's default,
	 * for the engine's own callers, stays fp32). */
	snprintf(j->train.precision, sizeof j->train.precision, "auto");
	j->workers = 2;
	j->min_workers = 1;
	j->threads_per_worker = 1;
	j->checkpoint_every = 200;
	j->keep_checkpoints = 3;
	j->comm_timeout_s = 5;
	j->log_every = 10;
	j->bucket_kib = SD_GRAD_SYNC_DEFAULT_FLOATS * sizeof(float) / 1024;
	j->pin_workers = 1;
	snprintf(j->provider, sizeof j->provider, "sim");
	snprintf(j->notice, sizeof j->notice, "none");
	j->hazard_scale = 1.0;
	j->boot_scale = 1.0;
	j->notice_scale = 1.0;
	j->market_seed = 1;
}

/* ---- numbers in the "C" locale ----
 * JSON numbers use '.', whatever LC_NUMERIC the program (a curses UI calls
 * setlocale) has chosen; cJSON copes by itself, our own formatting of raw
 * numbers uses this locale. */

static locale_t sd_c_locale;
static pthread_once_t sd_c_locale_once = PTHREAD_ONCE_INIT;

static void sd_c_locale_init(void)
{
	sd_c_locale = newlocale(LC_ALL_MASK, "C", (locale_t)0);
}

static locale_t sd_c_locale_get(void)
{
	pthread_once(&sd_c_locale_once, sd_c_locale_init);
	if (sd_c_locale == (locale_t)0)
		sd_oom();
	return sd_c_locale;
}

/* snprintf(buf, size, "%.*g", prec, d) with '.' as the decimal point. */
static void sd_format_double(char *buf, size_t size, int prec, double d)
{
	locale_t old = uselocale(sd_c_locale_get());
	snprintf(buf, size, "%.*g", prec, d);
	uselocale(old);
}

/* strtod in the "C" locale; 0 when all of s is one finite number. */
static int sd_parse_double(const char *s, double *out)
{
	char *end = NULL;
	errno = 0;
	double d = strtod_l(s, &end, sd_c_locale_get());
	if (end == s || *end != '\0' || !isfinite(d))
		return -1;
	*out = d;
	return 0;
}

/* The value of a JSON number item, or of a raw item holding one (what
 * sd_job_to_json makes for doubles cJSON would print inexactly). */
static int sd_json_number(const cJSON *item, double *out)
{
	if (cJSON_IsNumber(item)) {
		*out = item->valuedouble;
		return 0;
	}
	if (cJSON_IsRaw(item) && item->valuestring)
		return sd_parse_double(item->valuestring, out);
	return -1;
}

/* A number item for d such that parsing the printed JSON gives d back
 * exactly: cJSON prints 15 significant digits (17 only when the 15-digit
 * form is not even approximately equal), so a value that needs more becomes
 * raw text of 17 digits, which always round-trips (IEEE 754, 5.12.2). */
static cJSON *sd_json_double_item(double d)
{
	char buf[40];
	double back;
	sd_format_double(buf, sizeof buf, 15, d);
	cJSON *item;
	if (!isfinite(d)) {
		item = cJSON_CreateNumber(d);   /* printed as null, refused on parsing */
	} else if (sd_parse_double(buf, &back) == 0 && back == d) {
		item = cJSON_CreateNumber(d);
	} else {
		sd_format_double(buf, sizeof buf, 17, d);
		item = cJSON_CreateRaw(buf);
	}
	if (!item)
		sd_oom();
	return item;
}

/* Adds d under name, exactly (sd_json_double_item). */
static void sd_json_add_double(cJSON *obj, const char *name, double d)
{
	if (!cJSON_AddItemToObject(obj, name, sd_json_double_item(d)))
		sd_oom();
}

/* Makes every number in the tree under node print exactly: those cJSON
 * would print inexactly become raw items (sd_json_double_item), so that the
 * provider's settings (a parsed copy of the user's values) lose no digit
 * through printing.  Depth is bounded by cJSON's nesting limit. */
static void sd_json_exact_numbers(cJSON *node)
{
	cJSON *e = node->child;
	while (e) {
		cJSON *next = e->next;
		double d;
		if ((cJSON_IsNumber(e) || cJSON_IsRaw(e)) && sd_json_number(e, &d) == 0) {
			cJSON *exact = sd_json_double_item(d);
			exact->string = e->string;   /* the key moves over (NULL in an array) */
			exact->type |= e->type & cJSON_StringIsConst;
			e->string = NULL;
			if (!cJSON_ReplaceItemViaPointer(node, e, exact))
				sd_oom();
		} else if (cJSON_IsArray(e) || cJSON_IsObject(e)) {
			sd_json_exact_numbers(e);
		}
		e = next;
	}
}

/* A number item for a float: the double nearest to its shortest decimal
 * form (at most 9 digits), so 0.05f is written 0.05, not
 * 0.05000000074505806, and reading it back and rounding to float gives f
 * exactly. */
static cJSON *sd_json_float_item(float f)
{
	char buf[40];
	double d = f;
	for (int prec = 1; prec <= 9; prec++) {
		double back;
		sd_format_double(buf, sizeof buf, prec, (double)f);
		if (sd_parse_double(buf, &back) == 0 && (float)back == f) {
			d = back;
			break;
		}
	}
	return sd_json_double_item(d);
}

/* Adds f under name, exactly (sd_json_float_item). */
static void sd_json_add_float(cJSON *obj, const char *name, float f)
{
	if (!cJSON_AddItemToObject(obj, name, sd_json_float_item(f)))
		sd_oom();
}

/* ---- error messages ---- */

/* Levenshtein distance of a and b, capped: anything over 3 is 4. */
static int sd_edit_distance(const char *a, const char *b)
{
	size_t na = strlen(a), nb = strlen(b);
	if (na > 40 || nb > 40 || (na > nb ? na - nb : nb - na) > 3)
		return 4;
	int row[41];
	for (size_t j = 0; j <= nb; j++)
		row[j] = (int)j;
	for (size_t i = 1; i <= na; i++) {
		int diag = row[0];
		row[0] = (int)i;
		for (size_t j = 1; j <= nb; j++) {
			int up = row[j];
			int best = diag + (a[i - 1] != b[j - 1]);
			if (up + 1 < best)
				best = up + 1;
			if (row[j - 1] + 1 < best)
				best = row[j - 1] + 1;
			row[j] = best;
			diag = up;
		}
	}
	return row[nb] > 4 ? 4 : row[nb];
}

/* "a, b, c" from a NULL-terminated list, into buf. */
static const char *sd_join_names(const char *const *names, char *buf, size_t size)
{
	size_t n = 0;
	buf[0] = '\0';
	for (int i = 0; names[i]; i++) {
		int w = snprintf(buf + n, size - n, "%s%s", i ? ", " : "", names[i]);
		if (w < 0 || (size_t)w >= size - n)
			break;
		n += (size_t)w;
	}
	return buf;
}

/* "FILE: KEY: expected ..., got VALUE" for an integer key; name is the key's
 * path in the file ("market_seed", "provider.market_seed"). */
static int sd_bad_int(const struct sd_job_key *k, const char *name, const cJSON *v, double d,
                      int is_int, const char *file, char **why)
{
	char shown[48];
	sd_json_describe(v, SD_JSON_AS_TEXT, shown, sizeof shown);
	if (is_int && d > k->hi)
		return sd_why(why, "%s: %s: expected an integer from %.0f to %.0f, got %s", file,
		              name, k->lo, k->hi, shown);
	if (k->lo == 1)
		return sd_why(why, "%s: %s: expected a positive integer, got %s", file, name, shown);
	if (k->lo == 0)
		return sd_why(why, "%s: %s: expected a non-negative integer, got %s", file, name,
		              shown);
	return sd_why(why, "%s: %s: expected an integer from %.0f to %.0f, got %s", file, name,
	              k->lo, k->hi, shown);
}

/* "FILE: KEY: expected a number in [lo, hi), got VALUE". */
static int sd_bad_number(const struct sd_job_key *k, const char *name, const cJSON *v,
                         const char *file, char **why)
{
	char shown[48];
	sd_json_describe(v, SD_JSON_AS_TEXT, shown, sizeof shown);
	return sd_why(why, "%s: %s: expected a number in %c%g, %g%c, got %s", file, name,
	              (k->flags & OPEN_LO) ? '(' : '[', k->lo, k->hi,
	              (k->flags & OPEN_HI) ? ')' : ']', shown);
}

/* Whether d is a value of key k: in its interval (ends open as its flags
 * say), and integral for the integer kinds. */
static enum sd_json_problem sd_job_check_number(const struct sd_job_key *k, double d)
{
	int integer = k->kind == K_INT || k->kind == K_LONG || k->kind == K_U64;
	struct sd_json_rule r = { integer ? SD_JSON_INT : SD_JSON_NUM, SD_JSON_BOUNDED, k->lo, k->hi };
	if (k->flags & OPEN_LO)
		r.flags |= SD_JSON_OPEN_LO;
	if (k->flags & OPEN_HI)
		r.flags |= SD_JSON_OPEN_HI;
	return sd_json_check_number(d, &r);
}

/* ---- parsing ---- */

/* "normalize": {"mean": [m0, ...], "std": [s0, ...]}, one number per
 * channel, as many means as stds (1 to SD_DATA_MAX_CHANNELS), each std
 * positive; null means none. */
static int sd_job_set_normalize(struct sd_train_config *t, const char *name, const cJSON *v,
                                const char *file, char **why)
{
	char shown[48];
	if (cJSON_IsNull(v)) {
		t->norm_channels = 0;
		memset(t->norm_mean, 0, sizeof t->norm_mean);
		memset(t->norm_std, 0, sizeof t->norm_std);
		return 0;
	}
	if (!cJSON_IsObject(v))
		return sd_why(why, "%s: %s: expected {\"mean\": [...], \"std\": [...]} or null, "
		              "got %s", file, name, sd_json_describe(v, SD_JSON_AS_TEXT, shown, sizeof shown));
	const cJSON *e;
	cJSON_ArrayForEach(e, v) {
		const char *k = e->string ? e->string : "";
		if (strcmp(k, "mean") != 0 && strcmp(k, "std") != 0)
			return sd_why(why, "%s: %s.%s: unknown key (normalize has mean and std)", file,
			              name, sd_text_show(k, shown, sizeof shown));
	}
	const cJSON *arr[2] = { cJSON_GetObjectItemCaseSensitive(v, "mean"),
	                        cJSON_GetObjectItemCaseSensitive(v, "std") };
	const char *what[2] = { "mean", "std" };
	float vals[2][SD_DATA_MAX_CHANNELS];
	int n[2];
	for (int a = 0; a < 2; a++) {
		if (!arr[a])
			return sd_why(why, "%s: %s.%s: missing", file, name, what[a]);
		n[a] = cJSON_IsArray(arr[a]) ? cJSON_GetArraySize(arr[a]) : -1;
		if (n[a] < 1 || n[a] > SD_DATA_MAX_CHANNELS)
			return sd_why(why, "%s: %s.%s: expected an array of 1 to %d numbers (one per "
			              "channel), got %s", file, name, what[a], SD_DATA_MAX_CHANNELS,
			              sd_json_describe(arr[a], SD_JSON_AS_TEXT, shown, sizeof shown));
		int i = 0;
		cJSON_ArrayForEach(e, arr[a]) {
			double d;
			if (sd_json_number(e, &d) < 0 || !(fabs(d) <= FLT_MAX) ||
			    (a == 1 && !((float)d > 0)))
				return sd_why(why, "%s: %s.%s[%d]: expected a %s number, got %s", file, name,
				              what[a], i, a == 1 ? "positive" : "finite",
				              sd_json_describe(e, SD_JSON_AS_TEXT, shown, sizeof shown));
			vals[a][i++] = (float)d;
		}
	}
	if (n[0] != n[1])
		return sd_why(why, "%s: %s: %d means but %d stds (one of each per channel)", file, name,
		              n[0], n[1]);
	memset(t->norm_mean, 0, sizeof t->norm_mean);
	memset(t->norm_std, 0, sizeof t->norm_std);
	t->norm_channels = n[0];
	memcpy(t->norm_mean, vals[0], (size_t)n[0] * sizeof(float));
	memcpy(t->norm_std, vals[1], (size_t)n[0] * sizeof(float));
	return 0;
}

/* A string key: a path (K_STR), one of k->names (K_NAME; "model" also an
 * ONNX file's path) or a learning-rate schedule (K_SCHEDULE), into base.
 * 0 or -1 with *why. */
static int sd_job_set_string(const struct sd_job_key *k, char *base, const char *name, const cJSON *v,
                             const char *file, char **why)
{
	char shown[48], list[160];
	if (!cJSON_IsString(v) || !v->valuestring)
		return sd_why(why, "%s: %s: expected a string, got %s", file, name,
		              sd_json_describe(v, SD_JSON_AS_TEXT, shown, sizeof shown));
	const char *s = v->valuestring;
	if (k->kind == K_STR) {
		if (strlen(s) >= k->size)
			return sd_why(why, "%s: %s: longer than %zu bytes", file, name,
			              k->size - 1);
		/* Every K_STR key is a path: "~" means a home directory only
		 * to a shell, which never reads a job file (and the path is
		 * read on other hosts too). */
		if (s[0] == '~') {
			sd_text_show(s, shown, sizeof shown);
			return sd_why(why, "%s: %s: '%s' starts with '~', which only a shell expands: "
			              "write the whole path", file, name, shown);
		}
		snprintf(base, k->size, "%s", s);
		return 0;
	}
	/* "model" also takes an ONNX file's path (engine/onnx.h), kept
	 * as given here; sd_job_load resolves a relative one. */
	if (k->names == sd_model_names && sd_onnx_is_path(s)) {
		if (strlen(s) >= k->size)
			return sd_why(why, "%s: %s: longer than %zu bytes", file, name,
			              k->size - 1);
		snprintf(base, k->size, "%s", s);
		return 0;
	}
	for (int i = 0; k->names[i]; i++) {
		if (strcmp(s, k->names[i]) != 0)
			continue;
		if (k->kind == K_SCHEDULE) {
			enum sd_lr_kind kind;
			if (sd_lr_kind_parse(s, &kind) < 0)
				break;
			*(enum sd_lr_kind *)base = kind;
		} else {
			snprintf(base, k->size, "%s", s);
		}
		return 0;
	}
	sd_text_show(s, shown, sizeof shown);
	return sd_why(why, "%s: %s: unknown %s '%s' (known: %s%s)", file, name, k->what,
	              shown, sd_join_names(k->names, list, sizeof list),
	              k->names == sd_model_names ? ", or an ONNX file's path ending in .onnx"
	              : "");
}

/* "cluster": an array of at most SD_JOB_CLUSTER_MAX offer ids, printable
 * ASCII without spaces, into j->cluster.  0 or -1 with *why. */
static int sd_job_set_cluster(struct sd_job *j, const struct sd_job_key *k, const char *name, const cJSON *v,
                              const char *file, char **why)
{
	char shown[48];
	if (!cJSON_IsArray(v))
		return sd_why(why, "%s: %s: expected an array of offer ids, got %s", file,
		              name, sd_json_describe(v, SD_JSON_AS_TEXT, shown, sizeof shown));
	int n = cJSON_GetArraySize(v);
	if (n > SD_JOB_CLUSTER_MAX)
		return sd_why(why, "%s: %s: at most %d offers, got %d", file, name,
		              SD_JOB_CLUSTER_MAX, n);
	int i = 0;
	const cJSON *e;
	cJSON_ArrayForEach(e, v) {
		if (!cJSON_IsString(e) || !e->valuestring)
			return sd_why(why, "%s: %s[%d]: expected an offer id string, got %s", file,
			              name, i, sd_json_describe(e, SD_JSON_AS_TEXT, shown, sizeof shown));
		const char *s = e->valuestring;
		size_t len = strlen(s);
		if (len == 0 || len >= k->size)
			return sd_why(why, "%s: %s[%d]: an offer id is 1 to %zu bytes, got %zu",
			              file, name, i, k->size - 1, len);
		for (size_t c = 0; c < len; c++) {
			if ((unsigned char)s[c] <= 0x20 || (unsigned char)s[c] >= 0x7f)
				return sd_why(why, "%s: %s[%d]: offer id '%s' has a space or a "
				              "non-printable character", file, name, i,
				              sd_text_show(s, shown, sizeof shown));
		}
		snprintf(j->cluster[i], sizeof j->cluster[i], "%s", s);
		i++;
	}
	j->ncluster = i;
	return 0;
}

/* Keeps the object v as its compact text in base (k->size bytes); null
 * is none.  Only the shape is checked here: the layer that reads it (the
 * controller, for "autopilot") checks its keys and names them. */
static int sd_job_set_object(const struct sd_job_key *k, char *base, const char *name, const cJSON *v,
                             const char *file, char **why)
{
	char shown[48];
	if (cJSON_IsNull(v)) {
		base[0] = '\0';
		return 0;
	}
	if (!cJSON_IsObject(v))
		return sd_why(why, "%s: %s: expected an object, got %s", file, name, sd_json_describe(v, SD_JSON_AS_TEXT, shown, sizeof shown));
	char *text = cJSON_PrintUnformatted(v);
	if (!text)
		sd_oom();
	int rc = 0;
	if (strlen(text) >= k->size)
		rc = sd_why(why, "%s: %s: longer than %zu bytes as compact JSON", file, name, k->size - 1);
	else
		snprintf(base, k->size, "%s", text);
	free(text);
	return rc;
}

/* Sets key k of j from the JSON value v (not for K_PROVIDER); name is the
 * key's path for messages.  0 or -1 with *why. */
static int sd_job_set(struct sd_job *j, const struct sd_job_key *k, const char *name,
                      const cJSON *v, const char *file, char **why)
{
	char *base = (char *)j + k->offset;
	double d;
	switch (k->kind) {
	case K_STR:
	case K_NAME:
	case K_SCHEDULE:
		return sd_job_set_string(k, base, name, v, file, why);
	case K_INT:
	case K_LONG:
	case K_U64: {
		enum sd_json_problem p = sd_json_number(v, &d) < 0 ? SD_JSON_WRONG_TYPE
		                                                   : sd_job_check_number(k, d);
		if (p == SD_JSON_OUT_OF_RANGE)
			return sd_bad_int(k, name, v, d, 1, file, why);
		if (p != SD_JSON_OK)
			return sd_bad_int(k, name, v, 0, 0, file, why);
		if (k->kind == K_INT)
			*(int *)base = (int)d;
		else if (k->kind == K_LONG)
			*(long *)base = (long)d;
		else
			*(uint64_t *)base = (uint64_t)d;
		return 0;
	}
	case K_BOOL: {
		if (!cJSON_IsBool(v)) {
			char shown[48];
			sd_json_describe(v, SD_JSON_AS_TEXT, shown, sizeof shown);
			return sd_why(why, "%s: %s: expected true or false, got %s", file, name, shown);
		}
		*(int *)base = cJSON_IsTrue(v) ? 1 : 0;
		return 0;
	}
	case K_FLOAT: {
		/* Checked after rounding to float, so 0.99999999 is refused as
		 * the momentum 1 it would become. */
		if (sd_json_number(v, &d) < 0 || fabs(d) > FLT_MAX ||
		    sd_job_check_number(k, (double)(float)d) != SD_JSON_OK)
			return sd_bad_number(k, name, v, file, why);
		*(float *)base = (float)d;
		return 0;
	}
	case K_DOUBLE:
		if (sd_json_number(v, &d) < 0 || sd_job_check_number(k, d) != SD_JSON_OK)
			return sd_bad_number(k, name, v, file, why);
		*(double *)base = d;
		return 0;
	case K_FLOAT2: {
		float pair[2];
		int ok = cJSON_IsArray(v) && cJSON_GetArraySize(v) == 2;
		for (int i = 0; ok && i < 2; i++) {
			const cJSON *e = cJSON_GetArrayItem(v, i);
			/* Rounded to float first, as K_FLOAT. */
			ok = sd_json_number(e, &d) == 0 && fabs(d) <= FLT_MAX &&
			     sd_job_check_number(k, (double)(float)d) == SD_JSON_OK;
			pair[i] = (float)d;
		}
		if (!ok) {
			char shown[48];
			sd_json_describe(v, SD_JSON_AS_TEXT, shown, sizeof shown);
			return sd_why(why, "%s: %s: expected two numbers in %c%g, %g%c, got %s", file,
			              name, (k->flags & OPEN_LO) ? '(' : '[', k->lo, k->hi,
			              (k->flags & OPEN_HI) ? ')' : ']', shown);
		}
		memcpy(base, pair, sizeof pair);
		return 0;
	}
	case K_CLUSTER:
		return sd_job_set_cluster(j, k, name, v, file, why);
	case K_NORMALIZE:
		return sd_job_set_normalize(&j->train, name, v, file, why);
	case K_OBJECT:
		return sd_job_set_object(k, base, name, v, file, why);
	case K_PROVIDER:
		break;
	}
	return sd_why(why, "%s: %s: unhandled setting", file, name);
}

/* 1 if s is a provider name: 1 to 15 bytes of [a-z0-9-] (the registry, a
 * layer above, checks that it names a provider it knows). */
static int sd_provider_name_ok(const char *s)
{
	size_t n = strlen(s);
	if (n == 0 || n >= SZ(provider))
		return 0;
	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
			return 0;
	return 1;
}

/* Sets j->provider from v, which name (the key's path) must hold a provider
 * name. */
static int sd_job_set_provider_name(struct sd_job *j, const char *name, const cJSON *v,
                                    const char *file, char **why)
{
	char shown[48];
	if (!cJSON_IsString(v) || !v->valuestring || !sd_provider_name_ok(v->valuestring))
		return sd_why(why, "%s: %s: expected a provider name ([a-z0-9-], 1 to %zu bytes), "
		              "got %s", file, name, SZ(provider) - 1,
		              sd_json_describe(v, SD_JSON_AS_TEXT, shown, sizeof shown));
	snprintf(j->provider, sizeof j->provider, "%s", v->valuestring);
	return 0;
}

/* The index in sd_job_keys of the key called name, or SD_JOB_NKEYS. */
static size_t sd_job_key_find(const char *name)
{
	size_t i = 0;
	while (i < SD_JOB_NKEYS && strcmp(name, sd_job_keys[i].name) != 0)
		i++;
	return i;
}

/* What sd_job_from_json has seen so far, to refuse a key given twice or in
 * both forms whatever their order. */
struct sd_job_seen {
	unsigned char top[SD_JOB_NKEYS];        /* at the top level */
	unsigned char in_provider[SD_JOB_NKEYS];   /* in the provider object */
};

static int sd_job_both_forms(const struct sd_job_key *k, const char *file, char **why)
{
	return sd_why(why, "%s: %s: given both at the top level and in provider", file, k->name);
}

/* Reads the provider object v into j: "name", the IN_PROVIDER keys, and
 * every other key into j->provider_settings. */
/* The flag (SGD_ONLY or ADAMW_ONLY) of the settings the job's optimizer
 * does not read. */
static unsigned sd_job_other_optimizer(const struct sd_job *j)
{
	return strcmp(j->train.optimizer, "adamw") == 0 ? SGD_ONLY : ADAMW_ONLY;
}

/* A setting of the other optimizer is refused: the run would ignore it. */
static int sd_job_check_optimizer_keys(const struct sd_job *j, const struct sd_job_seen *seen,
                                       const char *file, char **why)
{
	unsigned other = sd_job_other_optimizer(j);
	for (size_t i = 0; i < SD_JOB_NKEYS; i++)
		if (seen->top[i] && (sd_job_keys[i].flags & other))
			return sd_why(why, "%s: %s: a setting of the %s optimizer, but \"optimizer\" is "
			              "\"%s\"", file, sd_job_keys[i].name,
			              other == SGD_ONLY ? "sgd" : "adamw", j->train.optimizer);
	return 0;
}

static int sd_job_provider_from_json(struct sd_job *j, const cJSON *v, struct sd_job_seen *seen,
                                     const char *file, char **why)
{
	char shown[48], path[80];
	const cJSON *name = NULL, *e;
	cJSON *settings = cJSON_CreateObject();
	if (!settings)
		sd_oom();
	cJSON_ArrayForEach(e, v) {
		const char *key = e->string ? e->string : "";
		size_t i = sd_job_key_find(key);
		int rc = 0;
		if (strcmp(key, "name") == 0) {
			if (name)
				rc = sd_why(why, "%s: provider.name: given twice", file);
			name = e;
		} else if (i < SD_JOB_NKEYS && (sd_job_keys[i].flags & IN_PROVIDER)) {
			snprintf(path, sizeof path, "provider.%s", key);
			if (seen->in_provider[i])
				rc = sd_why(why, "%s: %s: given twice", file, path);
			else if (seen->top[i])
				rc = sd_job_both_forms(&sd_job_keys[i], file, why);
			else
				rc = sd_job_set(j, &sd_job_keys[i], path, e, file, why);
			seen->in_provider[i] = 1;
		} else if (cJSON_GetObjectItemCaseSensitive(settings, key)) {
			rc = sd_why(why, "%s: provider.%s: given twice", file,
			            sd_text_show(key, shown, sizeof shown));
		} else {
			cJSON *copy = cJSON_Duplicate(e, 1);
			if (!copy || !cJSON_AddItemToObject(settings, key, copy))
				sd_oom();
		}
		if (rc < 0) {
			cJSON_Delete(settings);
			return -1;
		}
	}
	int rc = name ? sd_job_set_provider_name(j, "provider.name", name, file, why)
	         : sd_why(why, "%s: provider.name: missing", file);
	if (rc == 0 && cJSON_GetArraySize(settings) > 0) {
		sd_json_exact_numbers(settings);
		char *text = cJSON_PrintUnformatted(settings);
		if (!text)
			sd_oom();
		if (strlen(text) >= sizeof j->provider_settings)
			rc = sd_why(why, "%s: provider: settings longer than %zu bytes", file,
			            sizeof j->provider_settings - 1);
		else
			snprintf(j->provider_settings, sizeof j->provider_settings, "%s", text);
		free(text);
	}
	cJSON_Delete(settings);
	return rc;
}

/* The top-level "provider": the object, or a bare name as older files have. */
static int sd_job_set_provider(struct sd_job *j, const cJSON *v, struct sd_job_seen *seen,
                               const char *file, char **why)
{
	char shown[48];
	if (cJSON_IsObject(v))
		return sd_job_provider_from_json(j, v, seen, file, why);
	if (cJSON_IsString(v))
		return sd_job_set_provider_name(j, "provider", v, file, why);
	return sd_why(why, "%s: provider: expected an object {\"name\": ...} or a provider name, "
	              "got %s", file, sd_json_describe(v, SD_JSON_AS_TEXT, shown, sizeof shown));
}

/* "FILE: KEY: unknown key" with the nearest known key, if one is close. */
static int sd_job_unknown_key(const char *name, const char *file, char **why)
{
	char shown[48];
	const char *best = NULL;
	int best_d = 3;
	for (size_t k = 0; k < SD_JOB_NKEYS; k++) {
		int dist = sd_edit_distance(name, sd_job_keys[k].name);
		if (dist < best_d) {
			best_d = dist;
			best = sd_job_keys[k].name;
		}
	}
	sd_text_show(name, shown, sizeof shown);
	if (best)
		return sd_why(why, "%s: %s: unknown key (did you mean '%s'?)", file, shown, best);
	return sd_why(why, "%s: %s: unknown key (see spotdeck-job(5))", file, shown);
}

int sd_job_from_json(struct sd_job *out, const cJSON *obj, const char *file, char **why)
{
	if (!file)
		file = "job";
	char shown[48];
	if (!cJSON_IsObject(obj))
		return sd_why(why, "%s: expected a JSON object at the top level, got %s", file,
		              obj ? sd_json_describe(obj, SD_JSON_AS_TEXT, shown, sizeof shown) : "nothing");
	struct sd_job *j = sd_malloc(sizeof *j);
	sd_job_defaults(j);
	struct sd_job_seen seen;
	memset(&seen, 0, sizeof seen);
	const cJSON *v;
	int rc = 0;
	cJSON_ArrayForEach(v, obj) {
		const char *name = v->string ? v->string : "";
		size_t i = sd_job_key_find(name);
		if (i == SD_JOB_NKEYS)
			rc = sd_job_unknown_key(name, file, why);
		else if (seen.top[i])
			rc = sd_why(why, "%s: %s: given twice", file, sd_job_keys[i].name);
		else if (seen.in_provider[i])
			rc = sd_job_both_forms(&sd_job_keys[i], file, why);
		else if (sd_job_keys[i].kind == K_PROVIDER)
			rc = sd_job_set_provider(j, v, &seen, file, why);
		else
			rc = sd_job_set(j, &sd_job_keys[i], sd_job_keys[i].name, v, file, why);
		if (rc < 0)
			break;
		seen.top[i] = 1;
	}
	if (rc == 0)
		rc = sd_job_check_optimizer_keys(j, &seen, file, why);
	if (rc == 0)
		memcpy(out, j, sizeof *j);
	free(j);
	return rc;
}

/* 1-based line and column of byte offset at in text. */
static void sd_text_position(const char *text, size_t at, size_t *line, size_t *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < at; i++) {
		if (text[i] == '\n') {
			(*line)++;
			*col = 1;
		} else {
			(*col)++;
		}
	}
}

int sd_job_parse(struct sd_job *j, const char *text, size_t len, const char *file, char **why)
{
	if (!file)
		file = "job";
	if (len > SD_JOB_FILE_MAX)
		return sd_why(why, "%s: larger than %d bytes; is it a job file?", file, SD_JOB_FILE_MAX);
	/* Windows editors save "Unicode" as UTF-16 (and some tools UTF-32),
	 * which JSON parsers see as NUL bytes: name the encoding instead. */
	if (len >= 2 && (!memcmp(text, "\xff\xfe", 2) || !memcmp(text, "\xfe\xff", 2) ||
	                 (len >= 4 && !memcmp(text, "\0\0\xfe\xff", 4)) ||
	                 (len >= 2 && text[0] && !text[1]) || (len >= 2 && !text[0] && text[1])))
		return sd_why(why, "%s: the file is in UTF-16 or UTF-32, not UTF-8: save it as UTF-8 "
		              "(iconv -f UTF-16 -t UTF-8)", file);
	/* A byte-order mark some editors write is not JSON. */
	if (len >= 3 && memcmp(text, "\xef\xbb\xbf", 3) == 0) {
		text += 3;
		len -= 3;
	}
	const char *nul = memchr(text, '\0', len);
	if (nul) {
		size_t line, col;
		sd_text_position(text, (size_t)(nul - text), &line, &col);
		return sd_why(why, "%s: invalid JSON at line %zu, column %zu (a NUL byte)", file,
		              line, col);
	}
	size_t at;
	cJSON *root = sd_json_parse_whole(text, len, &at);
	if (!root) {
		if (at == SD_JSON_PARSE_OOM)
			sd_oom();
		size_t line, col;
		sd_text_position(text, at, &line, &col);
		return sd_why(why, "%s: invalid JSON at line %zu, column %zu%s", file, line, col,
		              at >= len ? " (the text ends early)" : "");
	}
	int rc = sd_job_from_json(j, root, file, why);
	cJSON_Delete(root);
	return rc;
}

/* A relative path in the job file at path (field `name`, held in buf of
 * size bytes) is relative to the file's directory: made absolute here,
 * where the file is known, so that the job the controller writes into its
 * run directory and sends to its workers names the file wherever they
 * start, and a folder holding a job file with its model and data can be
 * moved.  (A job that arrives over the wire carries the path as the
 * controller resolved it.) */
static int sd_job_resolve_path(char *buf, size_t size, const char *name, const char *path,
                               char **why)
{
	if (!buf[0] || buf[0] == '/')
		return 0;
	const char *slash = strrchr(path, '/');
	char dir[SD_PATH_MAX];
	if (!slash)
		snprintf(dir, sizeof dir, ".");
	else
		snprintf(dir, sizeof dir, "%.*s", (int)(slash - path == 0 ? 1 : slash - path), path);
	char *abs = realpath(dir, NULL);
	char joined[SD_PATH_MAX];
	int w = snprintf(joined, sizeof joined, "%s/%s", abs ? abs : dir, buf);
	free(abs);
	if (w < 0 || (size_t)w >= size)
		return sd_why(why, "%s: %s: %s relative to the job file's directory is longer "
		              "than %zu bytes", path, name, buf, size - 1);
	memcpy(buf, joined, (size_t)w + 1);
	return 0;
}

/* The job's model (an ONNX file; a built-in name is no path) and data
 * directory, resolved against the job file at path. */
static int sd_job_resolve_paths(struct sd_job *j, const char *path, char **why)
{
	if (sd_onnx_is_path(j->train.model) &&
	    sd_job_resolve_path(j->train.model, sizeof j->train.model, "model", path, why) < 0)
		return -1;
	return sd_job_resolve_path(j->train.data_dir, sizeof j->train.data_dir, "data_dir", path, why);
}

int sd_job_load(struct sd_job *j, const char *path, char **why)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return sd_why(why, "%s: cannot open: %s", path, strerror(errno));
	struct stat st;
	if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
		close(fd);
		return sd_why(why, "%s: is a directory, not a job file", path);
	}
	size_t cap = SD_JOB_FILE_MAX + 1, n = 0;
	char *buf = sd_malloc(cap);
	for (;;) {
		ssize_t got = read(fd, buf + n, cap - n);
		if (got < 0 && errno == EINTR)
			continue;
		if (got < 0) {
			int err = errno;
			close(fd);
			free(buf);
			return sd_why(why, "%s: cannot read: %s", path, strerror(err));
		}
		if (got == 0)
			break;
		n += (size_t)got;
		if (n == cap)
			break;   /* over the limit; sd_job_parse says so */
	}
	close(fd);
	int rc = sd_job_parse(j, buf, n, path, why);
	free(buf);
	if (rc == 0)
		rc = sd_job_resolve_paths(j, path, why);
	return rc;
}

/* ---- serialising ---- */

/* Adds key k of j to obj under k->name (not for K_PROVIDER). */
static void sd_job_add_key(cJSON *obj, const struct sd_job *j, const struct sd_job_key *k)
{
	const char *base = (const char *)j + k->offset;
	cJSON *item = NULL;
	switch (k->kind) {
	case K_STR:
	case K_NAME: {
		/* The arrays are NUL-terminated by construction; bound the
		 * length anyway against a caller's unterminated copy. */
		char tmp[SD_PATH_MAX];
		size_t n = strnlen(base, k->size - 1);
		memcpy(tmp, base, n);
		tmp[n] = '\0';
		item = cJSON_CreateString(tmp);
		break;
	}
	case K_SCHEDULE: {
		enum sd_lr_kind kind = *(const enum sd_lr_kind *)base;
		item = cJSON_CreateString(kind == SD_LR_CONSTANT ? "constant"
		                          : kind == SD_LR_STEP ? "step" : "cosine");
		break;
	}
	case K_INT:
		sd_json_add_double(obj, k->name, *(const int *)base);
		return;
	case K_BOOL:
		item = cJSON_CreateBool(*(const int *)base);
		break;
	case K_LONG:
		sd_json_add_double(obj, k->name, (double)*(const long *)base);
		return;
	case K_U64:
		sd_json_add_double(obj, k->name, (double)*(const uint64_t *)base);
		return;
	case K_FLOAT:
		if ((k->flags & ZERO_OFF) && *(const float *)base == 0)
			return;
		sd_json_add_float(obj, k->name, *(const float *)base);
		return;
	case K_FLOAT2: {
		const float *f = (const float *)base;
		item = cJSON_CreateArray();
		if (!item || !cJSON_AddItemToArray(item, sd_json_float_item(f[0])) ||
		    !cJSON_AddItemToArray(item, sd_json_float_item(f[1])))
			sd_oom();
		break;
	}
	case K_DOUBLE:
		sd_json_add_double(obj, k->name, *(const double *)base);
		return;
	case K_CLUSTER: {
		item = cJSON_CreateArray();
		int n = j->ncluster < 0 ? 0 : j->ncluster > SD_JOB_CLUSTER_MAX
		        ? SD_JOB_CLUSTER_MAX : j->ncluster;
		for (int c = 0; item && c < n; c++) {
			char tmp[sizeof j->cluster[0]];
			size_t len = strnlen(j->cluster[c], sizeof tmp - 1);
			memcpy(tmp, j->cluster[c], len);
			tmp[len] = '\0';
			cJSON *s = cJSON_CreateString(tmp);
			if (!s || !cJSON_AddItemToArray(item, s))
				sd_oom();
		}
		break;
	}
	case K_NORMALIZE: {
		int n = j->train.norm_channels;
		if (n <= 0 || n > SD_DATA_MAX_CHANNELS) {
			item = cJSON_CreateNull();
			break;
		}
		item = cJSON_CreateObject();
		cJSON *mean = cJSON_CreateArray(), *std = cJSON_CreateArray();
		if (!item || !mean || !std || !cJSON_AddItemToObject(item, "mean", mean) ||
		    !cJSON_AddItemToObject(item, "std", std))
			sd_oom();
		for (int c = 0; c < n; c++) {
			if (!cJSON_AddItemToArray(mean, sd_json_float_item(j->train.norm_mean[c])) ||
			    !cJSON_AddItemToArray(std, sd_json_float_item(j->train.norm_std[c])))
				sd_oom();
		}
		break;
	}
	case K_OBJECT: {
		/* Absent stays absent: a job without it reads back the same. */
		size_t n = strnlen(base, k->size);
		if (n == 0 || n == k->size)
			return;
		item = cJSON_ParseWithLength(base, n);
		if (!item)
			return;
		break;
	}
	case K_PROVIDER:
		return;
	}
	if (!item || !cJSON_AddItemToObject(obj, k->name, item))
		sd_oom();
}

cJSON *sd_job_provider_settings(const struct sd_job *j)
{
	size_t n = strnlen(j->provider_settings, sizeof j->provider_settings);
	if (n == 0 || n == sizeof j->provider_settings) {
		cJSON *empty = n == 0 ? cJSON_CreateObject() : NULL;
		if (n == 0 && !empty)
			sd_oom();
		return empty;
	}
	cJSON *obj = cJSON_ParseWithLength(j->provider_settings, n);
	if (obj && !cJSON_IsObject(obj)) {
		cJSON_Delete(obj);
		return NULL;
	}
	return obj;
}

/* The provider object: name, the IN_PROVIDER keys, then the settings. */
static cJSON *sd_job_provider_to_json(const struct sd_job *j)
{
	cJSON *obj = cJSON_CreateObject();
	char name[sizeof j->provider];
	size_t n = strnlen(j->provider, sizeof name - 1);
	memcpy(name, j->provider, n);
	name[n] = '\0';
	if (!obj || !cJSON_AddStringToObject(obj, "name", name))
		sd_oom();
	for (size_t i = 0; i < SD_JOB_NKEYS; i++)
		if (sd_job_keys[i].flags & IN_PROVIDER)
			sd_job_add_key(obj, j, &sd_job_keys[i]);
	cJSON *settings = sd_job_provider_settings(j);
	if (settings)
		sd_json_exact_numbers(settings);
	while (settings && settings->child) {
		cJSON *e = cJSON_DetachItemViaPointer(settings, settings->child);
		/* cJSON copies the key before it frees the item's own. */
		if (!e->string || !cJSON_AddItemToObject(obj, e->string, e))
			sd_oom();
	}
	cJSON_Delete(settings);
	return obj;
}

cJSON *sd_job_to_json(const struct sd_job *j)
{
	cJSON *obj = cJSON_CreateObject();
	if (!obj)
		sd_oom();
	for (size_t i = 0; i < SD_JOB_NKEYS; i++) {
		const struct sd_job_key *k = &sd_job_keys[i];
		if (k->flags & (IN_PROVIDER | sd_job_other_optimizer(j)))
			continue;
		if (k->kind != K_PROVIDER)
			sd_job_add_key(obj, j, k);
		else if (!cJSON_AddItemToObject(obj, k->name, sd_job_provider_to_json(j)))
			sd_oom();
	}
	return obj;
}

int sd_job_equal(const struct sd_job *a, const struct sd_job *b)
{
	const char *pa = (const char *)a, *pb = (const char *)b;
	for (size_t i = 0; i < SD_JOB_NKEYS; i++) {
		const struct sd_job_key *k = &sd_job_keys[i];
		const char *x = pa + k->offset, *y = pb + k->offset;
		switch (k->kind) {
		case K_STR:
		case K_NAME:
			if (strncmp(x, y, k->size) != 0)
				return 0;
			break;
		case K_SCHEDULE:
			if (*(const enum sd_lr_kind *)x != *(const enum sd_lr_kind *)y)
				return 0;
			break;
		case K_INT:
		case K_BOOL:
			if (*(const int *)x != *(const int *)y)
				return 0;
			break;
		case K_LONG:
			if (*(const long *)x != *(const long *)y)
				return 0;
			break;
		case K_U64:
			if (*(const uint64_t *)x != *(const uint64_t *)y)
				return 0;
			break;
		case K_FLOAT:
			if (*(const float *)x != *(const float *)y)
				return 0;
			break;
		case K_FLOAT2:
			if (((const float *)x)[0] != ((const float *)y)[0] ||
			    ((const float *)x)[1] != ((const float *)y)[1])
				return 0;
			break;
		case K_DOUBLE:
			if (*(const double *)x != *(const double *)y)
				return 0;
			break;
		case K_CLUSTER:
			if (a->ncluster != b->ncluster)
				return 0;
			for (int c = 0; c < a->ncluster && c < SD_JOB_CLUSTER_MAX; c++)
				if (strncmp(a->cluster[c], b->cluster[c], sizeof a->cluster[c]) != 0)
					return 0;
			break;
		case K_NORMALIZE:
			if (a->train.norm_channels != b->train.norm_channels)
				return 0;
			for (int c = 0; c < a->train.norm_channels && c < SD_DATA_MAX_CHANNELS; c++)
				if (a->train.norm_mean[c] != b->train.norm_mean[c] ||
				    a->train.norm_std[c] != b->train.norm_std[c])
					return 0;
			break;
		case K_PROVIDER:
		case K_OBJECT:
			if (strncmp(x, y, k->size) != 0)
				return 0;
			break;
		}
	}
	return strncmp(a->provider_settings, b->provider_settings,
	               sizeof a->provider_settings) == 0;
}
