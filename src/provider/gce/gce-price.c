/* src/provider/gce/gce-price.c - a Spot VM's price from the Cloud Billing
 * Catalog, read and cached (gce-price.h). */
#include "config.h"
#include "src/provider/gce/gce-price.h"

#include "src/base/file.h"

#include <cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

static void copy(char *dst, size_t n, const char *src)
{
	snprintf(dst, n, "%s", src ? src : "");
}

void sd_gce_price_init(struct sd_gce_price_sheet *s, const char *machine_type, const char *accelerator,
		       const char *const *regions, int n)
{
	memset(s, 0, sizeof *s);
	size_t k = 0;
	for (; machine_type && machine_type[k] && machine_type[k] != '-' && k + 1 < sizeof s->family; k++)
		s->family[k] = (char)toupper((unsigned char)machine_type[k]);
	s->family[k] = '\0';
	if (accelerator && *accelerator) {
		const char *m = accelerator;
		if (!strncmp(m, "nvidia-", 7))
			m += 7;
		if (!strncmp(m, "tesla-", 6))
			m += 6;
		for (k = 0; m[k] && m[k] != '-' && k + 1 < sizeof s->gpu_model; k++)
			s->gpu_model[k] = (char)toupper((unsigned char)m[k]);
		s->gpu_model[k] = '\0';
		s->gpu_80gb = strstr(accelerator, "80gb") != NULL;
	}
	for (int i = 0; i < n && s->nregions < SD_GCE_PRICE_REGIONS; i++)
		if (regions[i] && sd_gce_price_region(s, regions[i]) < 0)
			copy(s->regions[s->nregions++], sizeof s->regions[0], regions[i]);
	for (int i = 0; i < SD_GCE_PRICE_REGIONS; i++)
		s->core[i].usd = s->ram[i].usd = s->gpu[i].usd = -1;
}

int sd_gce_price_region(const struct sd_gce_price_sheet *s, const char *region)
{
	for (int i = 0; region && i < s->nregions; i++)
		if (!strcmp(s->regions[i], region))
			return i;
	return -1;
}

/* 1 when TEXT holds WORD as a whole word (between spaces or the ends),
 * case aside. */
static int has_word(const char *text, const char *word)
{
	size_t n = strlen(word);
	for (const char *p = text; n && (p = strcasestr(p, word)) != NULL; p++)
		if ((p == text || p[-1] == ' ') && (p[n] == '\0' || p[n] == ' '))
			return 1;
	return 0;
}

static const char *jstr(const cJSON *o, const char *k)
{
	return cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(o, k));
}

/* Which of the sheet's rates SKU prices: its array for the sheet, or NULL. */
static struct sd_gce_rate *rate_of(struct sd_gce_price_sheet *s, const cJSON *sku)
{
	const cJSON *cat = cJSON_GetObjectItemCaseSensitive(sku, "category");
	const char *group = jstr(cat, "resourceGroup"), *use = jstr(cat, "usageType"), *desc = jstr(sku, "description");
	if (!group || !use || !desc || strcmp(use, "Preemptible") != 0)
		return NULL;
	if (!strcmp(group, "GPU")) {
		if (!s->gpu_model[0] || !has_word(desc, s->gpu_model) || has_word(desc, "Workstation") ||
		    has_word(desc, "80GB") != s->gpu_80gb)
			return NULL;
		return s->gpu;
	}
	int cpu = !strcmp(group, "CPU"), ram = !strcmp(group, "RAM");
	if ((!cpu && !ram) || !s->family[0] || !has_word(desc, s->family) || !has_word(desc, cpu ? "Core" : "Ram"))
		return NULL;
	static const char *const not_the_vms[] = {"Custom", "Sole", "Commitment", "Extended", NULL};
	for (int i = 0; not_the_vms[i]; i++)
		if (has_word(desc, not_the_vms[i]))
			return NULL;
	return cpu ? s->core : s->ram;
}

/* pricingInfo[0]'s first tiered rate in USD an hour; -1 when the SKU
 * states none or in another currency. */
static double usd_of(const cJSON *sku)
{
	const cJSON *pi = cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(sku, "pricingInfo"), 0);
	const cJSON *pe = cJSON_GetObjectItemCaseSensitive(pi, "pricingExpression");
	const char *unit = jstr(pe, "usageUnit");
	const cJSON *up = cJSON_GetObjectItemCaseSensitive(
		cJSON_GetArrayItem(cJSON_GetObjectItemCaseSensitive(pe, "tieredRates"), 0), "unitPrice");
	const char *cur = jstr(up, "currencyCode"), *units = jstr(up, "units");
	const cJSON *nanos = cJSON_GetObjectItemCaseSensitive(up, "nanos");
	/* usageUnit: "h" for cores and GPUs, "GiBy.h" for memory. */
	if (!up || (cur && strcmp(cur, "USD") != 0) || (unit && strcmp(unit, "h") && strcmp(unit, "GiBy.h")))
		return -1;
	double usd = (units ? strtod(units, NULL) : 0) + (cJSON_IsNumber(nanos) ? nanos->valuedouble / 1e9 : 0);
	return usd >= 0 && isfinite(usd) ? usd : -1;
}

int sd_gce_price_page(struct sd_gce_price_sheet *s, const char *json, size_t len, char *next, size_t nextlen,
		      char *err, size_t errlen)
{
	copy(next, nextlen, "");
	cJSON *j = cJSON_ParseWithLength(json, len);
	const cJSON *skus = cJSON_GetObjectItemCaseSensitive(j, "skus");
	if (!cJSON_IsObject(j) || (skus && !cJSON_IsArray(skus))) {
		snprintf(err, errlen, "services.skus: the answer is not a page of SKUs (%s)",
			 !j ? "not JSON" : "\"skus\" is not an array");
		cJSON_Delete(j);
		return -1;
	}
	s->pages++;
	const cJSON *sku;
	cJSON_ArrayForEach(sku, skus) {
		s->skus++;
		struct sd_gce_rate *r = rate_of(s, sku);
		if (!r)
			continue;
		double usd = usd_of(sku);
		const cJSON *reg;
		cJSON_ArrayForEach(reg, cJSON_GetObjectItemCaseSensitive(sku, "serviceRegions")) {
			int k = sd_gce_price_region(s, cJSON_GetStringValue(reg));
			if (k >= 0 && usd >= 0 && r[k].usd < 0) {
				r[k].usd = usd;
				copy(r[k].sku, sizeof r[k].sku, jstr(sku, "description"));
			}
		}
	}
	copy(next, nextlen, jstr(j, "nextPageToken"));
	cJSON_Delete(j);
	return 0;
}

int sd_gce_price_page_url(const char *root, const char *token, char *out, size_t outlen)
{
	char tok[1600];
	size_t t = 0;
	for (const char *c = token ? token : ""; *c; c++) {
		if (t + 4 >= sizeof tok)
			return -1;
		if (isalnum((unsigned char)*c) || strchr("-._~", *c))
			tok[t++] = *c;
		else
			t += (size_t)snprintf(tok + t, sizeof tok - t, "%%%02X", (unsigned char)*c);
	}
	tok[t] = '\0';
	int n = snprintf(out, outlen, "%s/services/%s/skus?currencyCode=USD%s%s", root, SD_GCE_BILLING_SERVICE,
			 t ? "&pageToken=" : "", tok);
	return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

int sd_gce_price_complete(const struct sd_gce_price_sheet *s, int k)
{
	if (k < 0) {
		for (int i = 0; i < s->nregions; i++)
			if (!sd_gce_price_complete(s, i))
				return 0;
		return 1;
	}
	return k < s->nregions && s->core[k].usd >= 0 && s->ram[k].usd >= 0 &&
	       (!s->gpu_model[0] || s->gpu[k].usd >= 0);
}

double sd_gce_price_vm(const struct sd_gce_price_sheet *s, int k, int vcpus, double memory_gib, int gpus,
		       char *why, size_t whylen)
{
	if (why && whylen)
		why[0] = '\0';
	if (!sd_gce_price_complete(s, k) || vcpus < 1 || !(memory_gib > 0))
		return NAN;
	double usd = vcpus * s->core[k].usd + memory_gib * s->ram[k].usd;
	if (s->gpu_model[0])
		usd += gpus * s->gpu[k].usd;
	if (why && whylen) {
		int n = snprintf(why, whylen, "%d vCPU x $%.6f + %g GiB x $%.6f", vcpus, s->core[k].usd, memory_gib,
				 s->ram[k].usd);
		if (s->gpu_model[0] && n >= 0 && (size_t)n < whylen)
			snprintf(why + n, whylen - (size_t)n, " + %d %s x $%.6f", gpus, s->gpu_model, s->gpu[k].usd);
	}
	return usd;
}

/* ---- the cache ---- */

int sd_gce_price_cache_path(char *out, size_t outlen)
{
	const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
	int n;
	if (xdg && *xdg == '/')
		n = snprintf(out, outlen, "%s/spotdeck/gce-prices.json", xdg);
	else if (home && *home)
		n = snprintf(out, outlen, "%s/.cache/spotdeck/gce-prices.json", home);
	else
		return -1;
	return n < 0 || (size_t)n >= outlen ? -1 : 0;
}

static int same_key(const cJSON *e, const struct sd_gce_price_key *key)
{
	const char *r = jstr(e, "billing_root"), *m = jstr(e, "machine_type"), *a = jstr(e, "accelerator"),
		   *g = jstr(e, "region");
	const cJSON *n = cJSON_GetObjectItemCaseSensitive(e, "gpus");
	return r && m && a && g && cJSON_IsNumber(n) && !strcmp(r, key->billing_root) &&
	       !strcmp(m, key->machine_type) && !strcmp(a, key->accelerator ? key->accelerator : "") &&
	       !strcmp(g, key->region) && n->valueint == key->gpus;
}

/* The cache's entries array (NULL when the file is missing or not ours). */
static cJSON *cache_load(const char *path)
{
	/* A cache past 16 MiB is not one of ours. */
	char *buf = NULL;
	size_t n = 0;
	if (sd_read_file(path, 16u << 20, &buf, &n, NULL) < 0)
		return NULL;
	cJSON *j = n ? cJSON_ParseWithLength(buf, n) : NULL;
	free(buf);
	if (j && !cJSON_IsArray(cJSON_GetObjectItemCaseSensitive(j, "entries"))) {
		cJSON_Delete(j);
		j = NULL;
	}
	return j;
}

int sd_gce_price_cache_get(const char *path, const struct sd_gce_price_key *key, double now, double max_age_s,
			   double *usd, char *why, size_t whylen, double *read_at)
{
	cJSON *j = cache_load(path);
	const cJSON *e;
	int rc = -1;
	cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(j, "entries")) {
		const cJSON *u = cJSON_GetObjectItemCaseSensitive(e, "usd_per_hour");
		const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "read_at");
		if (!same_key(e, key) || !cJSON_IsNumber(u) || !cJSON_IsNumber(t) || !(u->valuedouble >= 0))
			continue;
		if (t->valuedouble > now + 60 || now - t->valuedouble > max_age_s)
			continue;
		*usd = u->valuedouble;
		*read_at = t->valuedouble;
		copy(why, whylen, jstr(e, "sum"));
		rc = 0;
		break;
	}
	cJSON_Delete(j);
	return rc;
}

/* mkdir -p of PATH's directory. */
static int make_dirs(const char *path)
{
	char d[4096];
	copy(d, sizeof d, path);
	char *slash = strrchr(d, '/');
	if (!slash || slash == d)
		return 0;
	*slash = '\0';
	for (char *p = d + 1; *p; p++) {
		if (*p != '/')
			continue;
		*p = '\0';
		if (mkdir(d, 0700) < 0 && errno != EEXIST)
			return -1;
		*p = '/';
	}
	return mkdir(d, 0700) < 0 && errno != EEXIST ? -1 : 0;
}

int sd_gce_price_cache_put(const char *path, const struct sd_gce_price_key *key, double usd, const char *why,
			   double read_at, char *err, size_t errlen)
{
	cJSON *j = cache_load(path);
	if (!j) {
		j = cJSON_CreateObject();
		cJSON_AddItemToObject(j, "entries", cJSON_CreateArray());
	}
	cJSON *entries = cJSON_GetObjectItemCaseSensitive(j, "entries");
	for (int i = cJSON_GetArraySize(entries) - 1; i >= 0; i--)
		if (same_key(cJSON_GetArrayItem(entries, i), key))
			cJSON_DeleteItemFromArray(entries, i);
	cJSON *e = cJSON_CreateObject();
	cJSON_AddStringToObject(e, "billing_root", key->billing_root);
	cJSON_AddStringToObject(e, "machine_type", key->machine_type);
	cJSON_AddStringToObject(e, "accelerator", key->accelerator ? key->accelerator : "");
	cJSON_AddNumberToObject(e, "gpus", key->gpus);
	cJSON_AddStringToObject(e, "region", key->region);
	cJSON_AddNumberToObject(e, "usd_per_hour", usd);
	cJSON_AddStringToObject(e, "sum", why ? why : "");
	cJSON_AddNumberToObject(e, "read_at", read_at);
	cJSON_AddItemToArray(entries, e);
	char *text = cJSON_Print(j);
	cJSON_Delete(j);
	char tmp[4200];
	int rc = -1;
	if (!text || snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= (int)sizeof tmp) {
		snprintf(err, errlen, "%s: the path is too long", path);
		free(text);
		return -1;
	}
	int fd = make_dirs(path) < 0 ? -1 : mkostemp(tmp, O_CLOEXEC);
	if (fd < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(errno));
		free(text);
		return -1;
	}
	size_t n = strlen(text), done = 0;
	while (done < n) {
		ssize_t w = write(fd, text + done, n - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			break;
		done += (size_t)w;
	}
	int e2 = errno;
	if (close(fd) == 0 && done == n && rename(tmp, path) == 0)
		rc = 0;
	else
		e2 = errno ? errno : e2;
	if (rc < 0) {
		snprintf(err, errlen, "%s: %s", path, strerror(e2 ? e2 : EIO));
		unlink(tmp);
	}
	free(text);
	return rc;
}
