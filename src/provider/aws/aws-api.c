/* src/provider/aws/aws-api.c - EC2 Query API answers read with expat (see
 * aws-api.h). */
#include "config.h"
#include "src/provider/aws/aws-api.h"

#include <expat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define XP_DEPTH 24
#define XP_TEXT 1024

/* A reader: the element path as local names, the text of the element
 * being closed, and what to do with a leaf and with a new item. */
struct xp {
	char path[XP_DEPTH * 40];  /* "/Response/Errors/Error/Code" */
	size_t plen[XP_DEPTH];     /* path length before each level */
	int depth;
	char text[XP_TEXT];
	size_t tlen;
	void (*on_open)(struct xp *x);              /* after an element is pushed */
	void (*on_leaf)(struct xp *x, const char *text); /* before it is popped */
	void *out;                 /* items: an array of MAX of SIZE bytes */
	const char *item;          /* the path suffix that opens an item */
	size_t size;
	void (*init)(void *item);  /* after the item is zeroed, or NULL */
	int n, max, over;
	char *next;
	size_t nextlen;
	char tag_key[128];         /* tagSet/item/key, until its value */
};

/* 1 when the path ends with "/" SUFFIX. */
static int at(const struct xp *x, const char *suffix)
{
	size_t pl = strlen(x->path), sl = strlen(suffix);
	return pl > sl && x->path[pl - sl - 1] == '/' && !strcmp(x->path + pl - sl, suffix);
}

static void XMLCALL on_start(void *ud, const XML_Char *name, const XML_Char **attrs)
{
	struct xp *x = ud;
	(void)attrs;
	const char *local = strrchr(name, ':');
	local = local ? local + 1 : name;
	if (x->depth >= XP_DEPTH || strlen(x->path) + strlen(local) + 2 > sizeof x->path) {
		x->over = 1;
		x->depth++;
		return;
	}
	x->plen[x->depth++] = strlen(x->path);
	strcat(x->path, "/");
	strcat(x->path, local);
	x->tlen = 0;
	x->text[0] = '\0';
	if (x->on_open)
		x->on_open(x);
}

static void XMLCALL on_end(void *ud, const XML_Char *name)
{
	struct xp *x = ud;
	(void)name;
	x->depth--;
	if (x->depth >= XP_DEPTH)
		return;
	if (x->on_leaf)
		x->on_leaf(x, x->text);
	x->path[x->plen[x->depth]] = '\0';
	x->tlen = 0;
	x->text[0] = '\0';
}

static void XMLCALL on_text(void *ud, const XML_Char *s, int len)
{
	struct xp *x = ud;
	size_t n = (size_t)len;
	if (x->tlen + n >= sizeof x->text)
		n = sizeof x->text - 1 - x->tlen;
	memcpy(x->text + x->tlen, s, n);
	x->tlen += n;
	x->text[x->tlen] = '\0';
}

static int xp_run(struct xp *x, const char *xml, size_t len, const char *what, char *err, size_t errlen)
{
	XML_Parser p = XML_ParserCreate(NULL);
	if (!p) {
		snprintf(err, errlen, "ec2: %s: out of memory", what);
		return -1;
	}
	XML_SetUserData(p, x);
	XML_SetElementHandler(p, on_start, on_end);
	XML_SetCharacterDataHandler(p, on_text);
	int ok = XML_Parse(p, xml, (int)len, 1) == XML_STATUS_OK;
	if (!ok)
		snprintf(err, errlen, "ec2: %s: not XML (line %lu: %s)", what, (unsigned long)XML_GetCurrentLineNumber(p),
			 XML_ErrorString(XML_GetErrorCode(p)));
	XML_ParserFree(p);
	if (ok && x->over) {
		snprintf(err, errlen, "ec2: %s: more than %d items, or nested too deep", what, x->max);
		return -1;
	}
	return ok ? x->n : -1;
}

static void copy(char *dst, size_t n, const char *src)
{
	snprintf(dst, n, "%s", src);
}

/* on_open for lists: a new item at each x->item element. */
static void item_open(struct xp *x)
{
	if (!at(x, x->item))
		return;
	if (x->n >= x->max) {
		x->over = 1;
		return;
	}
	void *it = (char *)x->out + (size_t)x->n++ * x->size;
	memset(it, 0, x->size);
	if (x->init)
		x->init(it);
}

/* The item being read, or NULL before the first (or after too many). */
static void *item_cur(const struct xp *x)
{
	return x->n && !x->over ? (char *)x->out + (size_t)(x->n - 1) * x->size : NULL;
}

/* Errors */

static void error_leaf(struct xp *x, const char *t)
{
	struct sd_ec2_error *e = x->out;
	if (at(x, "Errors/Error/Code") && !e->code[0]) {
		copy(e->code, sizeof e->code, t);
		x->n = 1;
	} else if (at(x, "Errors/Error/Message") && !e->message[0]) {
		copy(e->message, sizeof e->message, t);
	} else if (x->depth == 1 && (at(x, "RequestID") || at(x, "RequestId"))) {
		copy(e->request_id, sizeof e->request_id, t);
	}
}

int sd_ec2_error_parse(const char *xml, size_t len, struct sd_ec2_error *e, char *err, size_t errlen)
{
	memset(e, 0, sizeof *e);
	struct xp x = {.on_leaf = error_leaf, .out = e, .max = 1};
	return xp_run(&x, xml, len, "error document", err, errlen);
}

/* Instances */

static void next_token(struct xp *x, const char *t)
{
	if (x->depth == 1 && at(x, "nextToken") && x->next)
		snprintf(x->next, x->nextlen, "%s", t);
}

static void instance_init(void *it)
{
	((struct sd_ec2_instance *)it)->state_code = -1;
}

static void instance_leaf(struct xp *x, const char *t)
{
	next_token(x, t);
	struct sd_ec2_instance *in = item_cur(x);
	if (!in)
		return;
	if (at(x, "instancesSet/item/instanceId"))
		copy(in->id, sizeof in->id, t);
	else if (at(x, "instancesSet/item/instanceType"))
		copy(in->type, sizeof in->type, t);
	else if (at(x, "instancesSet/item/placement/availabilityZone"))
		copy(in->az, sizeof in->az, t);
	else if (at(x, "instancesSet/item/instanceState/code") || at(x, "instancesSet/item/currentState/code"))
		in->state_code = atoi(t) & 0xff;
	else if (at(x, "instancesSet/item/instanceState/name") || at(x, "instancesSet/item/currentState/name"))
		copy(in->state, sizeof in->state, t);
	else if (at(x, "instancesSet/item/ipAddress"))
		copy(in->public_ip, sizeof in->public_ip, t);
	else if (at(x, "instancesSet/item/privateIpAddress"))
		copy(in->private_ip, sizeof in->private_ip, t);
	else if (at(x, "instancesSet/item/stateReason/code"))
		copy(in->reason_code, sizeof in->reason_code, t);
	else if (at(x, "instancesSet/item/stateReason/message"))
		copy(in->reason, sizeof in->reason, t);
	else if (at(x, "instancesSet/item/tagSet/item/key"))
		copy(x->tag_key, sizeof x->tag_key, t);
	else if (at(x, "instancesSet/item/tagSet/item/value") && !strcmp(x->tag_key, SD_EC2_RUN_TAG))
		copy(in->run, sizeof in->run, t);
	else if (at(x, "instancesSet/item/tagSet/item/value") && !strcmp(x->tag_key, "Name"))
		copy(in->name, sizeof in->name, t);
}

int sd_ec2_instances_parse(const char *xml, size_t len, struct sd_ec2_instance *out, int max, char *next,
			   size_t nextlen, char *err, size_t errlen)
{
	struct xp x = {.on_open = item_open, .on_leaf = instance_leaf, .out = out, .max = max,
		       .item = "instancesSet/item", .size = sizeof *out, .init = instance_init,
		       .next = next, .nextlen = nextlen};
	if (next && nextlen)
		next[0] = '\0';
	int n = xp_run(&x, xml, len, "instances", err, errlen);
	for (int i = 0; i < n; i++)
		if (!out[i].id[0]) {
			snprintf(err, errlen, "ec2: instances: item %d has no instanceId", i + 1);
			return -1;
		}
	return n;
}

/* Spot prices */

static void price_init(void *it)
{
	((struct sd_ec2_spot_price *)it)->usd_per_hour = -1;
}

static void price_leaf(struct xp *x, const char *t)
{
	next_token(x, t);
	struct sd_ec2_spot_price *p = item_cur(x);
	if (!p)
		return;
	if (at(x, "spotPriceHistorySet/item/instanceType"))
		copy(p->type, sizeof p->type, t);
	else if (at(x, "spotPriceHistorySet/item/availabilityZone"))
		copy(p->az, sizeof p->az, t);
	else if (at(x, "spotPriceHistorySet/item/timestamp"))
		copy(p->timestamp, sizeof p->timestamp, t);
	else if (at(x, "spotPriceHistorySet/item/spotPrice")) {
		char *e;
		double v = strtod(t, &e);
		if (e != t && *e == '\0' && v >= 0)
			p->usd_per_hour = v;
	}
}

int sd_ec2_spot_prices_parse(const char *xml, size_t len, struct sd_ec2_spot_price *out, int max,
			     char *next, size_t nextlen, char *err, size_t errlen)
{
	struct xp x = {.on_open = item_open, .on_leaf = price_leaf, .out = out, .max = max,
		       .item = "spotPriceHistorySet/item", .size = sizeof *out, .init = price_init,
		       .next = next, .nextlen = nextlen};
	if (next && nextlen)
		next[0] = '\0';
	int n = xp_run(&x, xml, len, "spot prices", err, errlen);
	for (int i = 0; i < n; i++)
		if (out[i].usd_per_hour < 0 || !out[i].type[0]) {
			snprintf(err, errlen, "ec2: spot prices: item %d has no instanceType or spotPrice", i + 1);
			return -1;
		}
	return n;
}

/* Zones */

static void zone_leaf(struct xp *x, const char *t)
{
	struct sd_ec2_zone *z = item_cur(x);
	if (!z)
		return;
	if (at(x, "availabilityZoneInfo/item/zoneName"))
		copy(z->name, sizeof z->name, t);
	else if (at(x, "availabilityZoneInfo/item/zoneState"))
		copy(z->state, sizeof z->state, t);
	else if (at(x, "availabilityZoneInfo/item/regionName"))
		copy(z->region, sizeof z->region, t);
}

int sd_ec2_zones_parse(const char *xml, size_t len, struct sd_ec2_zone *out, int max, char *err, size_t errlen)
{
	struct xp x = {.on_open = item_open, .on_leaf = zone_leaf, .out = out, .max = max,
		       .item = "availabilityZoneInfo/item", .size = sizeof *out};
	return xp_run(&x, xml, len, "zones", err, errlen);
}

/* Instance types */

static void type_leaf(struct xp *x, const char *t)
{
	struct sd_ec2_instance_type *it = item_cur(x);
	if (!it)
		return;
	if (at(x, "instanceTypeSet/item/instanceType"))
		copy(it->type, sizeof it->type, t);
	else if (at(x, "instanceTypeSet/item/vCpuInfo/defaultVCpus"))
		it->vcpus = atoi(t);
	else if (at(x, "instanceTypeSet/item/gpuInfo/gpus/item/count"))
		it->gpus += atoi(t);
}

int sd_ec2_instance_types_parse(const char *xml, size_t len, struct sd_ec2_instance_type *out, int max,
				char *err, size_t errlen)
{
	struct xp x = {.on_open = item_open, .on_leaf = type_leaf, .out = out, .max = max,
		       .item = "instanceTypeSet/item", .size = sizeof *out};
	return xp_run(&x, xml, len, "instance types", err, errlen);
}

const char *sd_ec2_spot_quota_code(const char *type, const char **name)
{
	static const struct {
		const char *families, *code, *name;
	} q[] = {
		{"g vt", "L-3819A6DF", "All G and VT Spot Instance Requests"},
		{"p", "L-7212CCBC", "All P Spot Instance Requests"},
		{"a c d h i m r t z", "L-34B43A08", "All Standard (A, C, D, H, I, M, R, T, Z) Spot Instance Requests"},
	};
	/* The family: the letters before the generation's digit ("g4dn" -> g,
	 * "vt1" -> vt, "inf2" -> inf, "dl1" -> dl). */
	char fam[8];
	size_t n = 0;
	while (type && n < sizeof fam - 1 && type[n] >= 'a' && type[n] <= 'z')
		n++;
	if (!type || n == 0 || n >= sizeof fam - 1 || type[n] < '0' || type[n] > '9')
		return NULL;
	memcpy(fam, type, n);
	fam[n] = '\0';
	for (size_t i = 0; i < sizeof q / sizeof q[0]; i++) {
		const char *f = q[i].families;
		while (*f) {
			size_t l = strcspn(f, " ");
			if (l == n && !strncmp(f, fam, n)) {
				if (name)
					*name = q[i].name;
				return q[i].code;
			}
			f += l;
			f += strspn(f, " ");
		}
	}
	return NULL;
}

const char *sd_ec2_classify(const char *code)
{
	static const char *const zone[] = {"InsufficientInstanceCapacity", "InsufficientHostCapacity",
					   "UnfulfillableCapacity", "Unsupported", "SpotMaxPriceTooLow", NULL};
	static const char *const region[] = {"MaxSpotInstanceCountExceeded", "VcpuLimitExceeded",
					     "InstanceLimitExceeded", NULL};
	static const char *const cloud[] = {"AuthFailure", "UnauthorizedOperation", "SignatureDoesNotMatch",
					    "InvalidClientTokenId", "OptInRequired", "Blocked", NULL};
	static const char *const retry[] = {"RequestLimitExceeded", "InternalError", "ServiceUnavailable",
					    "Unavailable", "RequestExpired", NULL};
	const char *const *sets[] = {zone, region, cloud, retry};
	static const char *const names[] = {"zone", "region", "cloud", "retry"};
	for (int s = 0; s < 4; s++)
		for (int i = 0; sets[s][i]; i++)
			if (code && !strcmp(code, sets[s][i]))
				return names[s];
	return "none";
}
