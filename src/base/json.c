/* src/base/json.c - see json.h. */
#include "config.h"

#include "src/base/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How many bytes of a value or a name a message shows. */
#define SHOW_MAX 40

enum sd_json_problem sd_json_check_number(double d, const struct sd_json_rule *r)
{
	if (r->kind == SD_JSON_INT && d != floor(d))   /* also true for NaN */
		return SD_JSON_NOT_INTEGRAL;
	if (r->kind == SD_JSON_NUM && !isfinite(d))
		return SD_JSON_NOT_FINITE;
	if (!(r->flags & SD_JSON_BOUNDED))
		return SD_JSON_OK;
	if (!(d >= r->lo && d <= r->hi))
		return SD_JSON_OUT_OF_RANGE;
	if (((r->flags & SD_JSON_OPEN_LO) && d == r->lo) || ((r->flags & SD_JSON_OPEN_HI) && d == r->hi))
		return SD_JSON_OUT_OF_RANGE;
	return SD_JSON_OK;
}

enum sd_json_problem sd_json_check(const cJSON *v, const struct sd_json_rule *r, double *num)
{
	switch (r->kind) {
	case SD_JSON_INT:
	case SD_JSON_NUM:
		if (!cJSON_IsNumber(v))
			return SD_JSON_WRONG_TYPE;
		if (num)
			*num = v->valuedouble;
		return sd_json_check_number(v->valuedouble, r);
	case SD_JSON_STR:
		return cJSON_IsString(v) && v->valuestring ? SD_JSON_OK : SD_JSON_WRONG_TYPE;
	case SD_JSON_BOOL:
		return cJSON_IsBool(v) ? SD_JSON_OK : SD_JSON_WRONG_TYPE;
	case SD_JSON_OBJ:
		return cJSON_IsObject(v) ? SD_JSON_OK : SD_JSON_WRONG_TYPE;
	case SD_JSON_ARR:
		return cJSON_IsArray(v) ? SD_JSON_OK : SD_JSON_WRONG_TYPE;
	}
	return SD_JSON_WRONG_TYPE;
}

enum sd_json_problem sd_json_field(const cJSON *obj, const char *name, const struct sd_json_rule *r,
                                   const cJSON **item, double *num)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, name);
	if (item)
		*item = v;
	if (!v)
		return (r->flags & SD_JSON_OPTIONAL) ? SD_JSON_OK : SD_JSON_MISSING;
	return sd_json_check(v, r, num);
}

cJSON *sd_json_parse_whole(const char *text, size_t len, size_t *at)
{
	char *copy = len < SD_JSON_PARSE_OOM ? malloc(len + 1) : NULL;
	if (!copy) {
		*at = SD_JSON_PARSE_OOM;
		return NULL;
	}
	memcpy(copy, text, len);
	copy[len] = '\0';
	const char *end = NULL;
	cJSON *root = cJSON_ParseWithLengthOpts(copy, len + 1, &end, 1);
	*at = root ? len : end && end >= copy && end <= copy + len ? (size_t)(end - copy) : len;
	free(copy);
	return root;
}

/* Copies at most SHOW_MAX bytes of s into buf (size n), anything but
 * printable ASCII as '?', "..." when cut. */
static void show_printable(const char *s, char *buf, size_t n)
{
	size_t o = 0, i = 0;
	for (; s[i] && i < SHOW_MAX && o + 4 < n; i++)
		buf[o++] = (s[i] >= 0x20 && s[i] < 0x7f) ? s[i] : '?';
	if (s[i] && o + 4 <= n) {
		memcpy(buf + o, "...", 3);
		o += 3;
	}
	buf[o] = '\0';
}

const char *sd_text_show(const char *s, char *buf, size_t n)
{
	show_printable(s, buf, n);
	return buf;
}

const char *sd_json_quote(const char *s, char *buf, size_t n)
{
	size_t o = 0;
	buf[o++] = '"';
	for (size_t i = 0; s[i] && o + 8 < n; i++) {
		unsigned char ch = (unsigned char)s[i];
		if (i == SHOW_MAX) {
			memcpy(buf + o, "...", 3);
			o += 3;
			break;
		}
		if (ch < 0x20 || ch == 0x7f || ch == '"' || ch == '\\')
			o += (size_t)snprintf(buf + o, n - o, "\\x%02x", ch);
		else
			buf[o++] = (char)ch;
	}
	buf[o++] = '"';
	buf[o] = '\0';
	return buf;
}

/* v's JSON text as cJSON prints it, made printable and cut. */
static const char *show_text(const cJSON *v, char *buf, size_t n)
{
	char *s = cJSON_PrintUnformatted(v);
	if (!s) {
		snprintf(buf, n, "?");
		return buf;
	}
	show_printable(s, buf, n);
	free(s);
	return buf;
}

const char *sd_json_describe(const cJSON *v, enum sd_json_show how, char *buf, size_t n)
{
	if (!v)
		return "nothing";
	if (cJSON_IsNumber(v) && !isfinite(v->valuedouble)) {
		snprintf(buf, n, "%s (beyond a double's range)", v->valuedouble < 0 ? "-inf" : "inf");
		return buf;
	}
	if (how == SD_JSON_AS_TEXT)
		return show_text(v, buf, n);
	if (cJSON_IsString(v))
		return sd_json_quote(v->valuestring ? v->valuestring : "", buf, n);
	if (cJSON_IsNumber(v)) {
		snprintf(buf, n, "%.10g", v->valuedouble);
		return buf;
	}
	if (cJSON_IsBool(v))
		return cJSON_IsTrue(v) ? "true" : "false";
	if (cJSON_IsNull(v))
		return "null";
	if (cJSON_IsArray(v))
		return "an array";
	if (cJSON_IsObject(v))
		return "an object";
	return "an unknown value";
}
