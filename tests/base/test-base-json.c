/* tests/base/test-base-json.c - the shared JSON validator and describer
 * (src/base/json.h) on their own: every problem each kind of rule can
 * report, the bounds and their open ends at the exact edge, a missing and
 * an optional member, and the two ways a value is shown in a message.
 * Links src/base only, so base stands on its own. */
#include "config.h"

#include "src/base/json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/check.h"

/* sd_json_check of the JSON text against r; *num gets the number seen. */
static enum sd_json_problem check_text(const char *text, const struct sd_json_rule *r, double *num)
{
	cJSON *v = cJSON_Parse(text);
	if (!v) {
		CHECK(v != NULL, "fixture '%s' is not JSON", text);
		return SD_JSON_OK;
	}
	enum sd_json_problem p = sd_json_check(v, r, num);
	cJSON_Delete(v);
	return p;
}

static void test_kinds(void)
{
	const struct sd_json_rule i = { SD_JSON_INT, 0, 0, 0 }, n = { SD_JSON_NUM, 0, 0, 0 },
	                          s = { SD_JSON_STR, 0, 0, 0 }, b = { SD_JSON_BOOL, 0, 0, 0 },
	                          o = { SD_JSON_OBJ, 0, 0, 0 }, a = { SD_JSON_ARR, 0, 0, 0 };
	double d = 0;
	CHECK_INT(check_text("-7", &i, &d), SD_JSON_OK);
	CHECK(d == -7, "%g", d);
	CHECK_INT(check_text("7.5", &i, &d), SD_JSON_NOT_INTEGRAL);
	CHECK(d == 7.5, "%g", d);
	CHECK_INT(check_text("\"7\"", &i, NULL), SD_JSON_WRONG_TYPE);
	CHECK_INT(check_text("true", &i, NULL), SD_JSON_WRONG_TYPE);
	/* 1e999 parses as inf: integral, so only a bound refuses it. */
	CHECK_INT(check_text("1e999", &i, NULL), SD_JSON_OK);
	CHECK_INT(check_text("1e999", &n, NULL), SD_JSON_NOT_FINITE);
	CHECK_INT(check_text("-0.25", &n, &d), SD_JSON_OK);
	CHECK(d == -0.25, "%g", d);
	CHECK_INT(check_text("null", &n, NULL), SD_JSON_WRONG_TYPE);
	CHECK_INT(check_text("\"\"", &s, NULL), SD_JSON_OK);
	CHECK_INT(check_text("3", &s, NULL), SD_JSON_WRONG_TYPE);
	CHECK_INT(check_text("false", &b, NULL), SD_JSON_OK);
	CHECK_INT(check_text("0", &b, NULL), SD_JSON_WRONG_TYPE);
	CHECK_INT(check_text("{}", &o, NULL), SD_JSON_OK);
	CHECK_INT(check_text("[]", &o, NULL), SD_JSON_WRONG_TYPE);
	CHECK_INT(check_text("[]", &a, NULL), SD_JSON_OK);
	CHECK_INT(check_text("{}", &a, NULL), SD_JSON_WRONG_TYPE);
	CHECK_INT(sd_json_check(NULL, &s, NULL), SD_JSON_WRONG_TYPE);
}

static void test_bounds(void)
{
	const struct sd_json_rule closed = { SD_JSON_INT, SD_JSON_BOUNDED, 1, 10 };
	CHECK_INT(sd_json_check_number(1, &closed), SD_JSON_OK);
	CHECK_INT(sd_json_check_number(10, &closed), SD_JSON_OK);
	CHECK_INT(sd_json_check_number(0, &closed), SD_JSON_OUT_OF_RANGE);
	CHECK_INT(sd_json_check_number(11, &closed), SD_JSON_OUT_OF_RANGE);
	CHECK_INT(sd_json_check_number(INFINITY, &closed), SD_JSON_OUT_OF_RANGE);
	/* A fraction is reported as such before any bound. */
	CHECK_INT(sd_json_check_number(20.5, &closed), SD_JSON_NOT_INTEGRAL);
	CHECK_INT(sd_json_check_number(NAN, &closed), SD_JSON_NOT_INTEGRAL);

	const struct sd_json_rule open = { SD_JSON_NUM, SD_JSON_BOUNDED | SD_JSON_OPEN_LO | SD_JSON_OPEN_HI,
	                                   0, 1 };
	CHECK_INT(sd_json_check_number(0, &open), SD_JSON_OUT_OF_RANGE);
	CHECK_INT(sd_json_check_number(1, &open), SD_JSON_OUT_OF_RANGE);
	CHECK_INT(sd_json_check_number(nextafter(0, 1), &open), SD_JSON_OK);
	CHECK_INT(sd_json_check_number(nextafter(1, 0), &open), SD_JSON_OK);
	CHECK_INT(sd_json_check_number(NAN, &open), SD_JSON_NOT_FINITE);

	const struct sd_json_rule lo_only = { SD_JSON_NUM, SD_JSON_BOUNDED | SD_JSON_OPEN_LO, 0, 1 };
	CHECK_INT(sd_json_check_number(0, &lo_only), SD_JSON_OUT_OF_RANGE);
	CHECK_INT(sd_json_check_number(1, &lo_only), SD_JSON_OK);

	/* Without SD_JSON_BOUNDED, lo and hi are not looked at. */
	const struct sd_json_rule unbounded = { SD_JSON_INT, 0, 5, 6 };
	CHECK_INT(sd_json_check_number(-1e15, &unbounded), SD_JSON_OK);

	/* The int64 rule the worker protocol uses: 2^63 is the first value out. */
	const struct sd_json_rule i64 = { SD_JSON_INT, SD_JSON_BOUNDED | SD_JSON_OPEN_HI,
	                                  -9223372036854775808.0, 9223372036854775808.0 };
	CHECK_INT(sd_json_check_number(-9223372036854775808.0, &i64), SD_JSON_OK);
	CHECK_INT(sd_json_check_number(9223372036854775808.0, &i64), SD_JSON_OUT_OF_RANGE);
	CHECK_INT(sd_json_check_number(nextafter(9223372036854775808.0, 0), &i64), SD_JSON_OK);
}

static void test_field(void)
{
	cJSON *obj = cJSON_Parse("{\"id\": 3, \"name\": 4}");
	const struct sd_json_rule i = { SD_JSON_INT, 0, 0, 0 }, s = { SD_JSON_STR, 0, 0, 0 },
	                          opt = { SD_JSON_STR, SD_JSON_OPTIONAL, 0, 0 };
	const cJSON *item = NULL;
	double d = 0;
	CHECK_INT(sd_json_field(obj, "id", &i, &item, &d), SD_JSON_OK);
	CHECK(item && cJSON_IsNumber(item) && d == 3);
	CHECK_INT(sd_json_field(obj, "name", &s, &item, NULL), SD_JSON_WRONG_TYPE);
	CHECK(item && cJSON_IsNumber(item));
	CHECK_INT(sd_json_field(obj, "gone", &s, &item, NULL), SD_JSON_MISSING);
	CHECK(item == NULL);
	CHECK_INT(sd_json_field(obj, "gone", &opt, &item, NULL), SD_JSON_OK);
	CHECK(item == NULL);
	/* An optional member that is there is still checked. */
	CHECK_INT(sd_json_field(obj, "name", &opt, NULL, NULL), SD_JSON_WRONG_TYPE);
	/* Member names are case-sensitive. */
	CHECK_INT(sd_json_field(obj, "ID", &i, NULL, NULL), SD_JSON_MISSING);
	cJSON_Delete(obj);
}

static void describe_is(const char *text, enum sd_json_show how, const char *want)
{
	char buf[64];
	cJSON *v = cJSON_Parse(text);
	CHECK(v != NULL, "fixture '%s'", text);
	const char *got = sd_json_describe(v, how, buf, sizeof buf);
	CHECK(strcmp(got, want) == 0, "%s as %s: got '%s', want '%s'", text,
	      how == SD_JSON_AS_TEXT ? "text" : "kind", got, want);
	cJSON_Delete(v);
}

static void test_describe(void)
{
	char buf[64];
	describe_is("[\"sim\"]", SD_JSON_AS_TEXT, "[\"sim\"]");
	describe_is("[\"sim\"]", SD_JSON_BY_KIND, "an array");
	describe_is("{\"a\":1}", SD_JSON_AS_TEXT, "{\"a\":1}");
	describe_is("{\"a\":1}", SD_JSON_BY_KIND, "an object");
	describe_is("\"a\\\"b\"", SD_JSON_AS_TEXT, "\"a\\\"b\"");
	describe_is("\"a\\\"b\"", SD_JSON_BY_KIND, "\"a\\x22b\"");
	describe_is("\"tab\\there\"", SD_JSON_BY_KIND, "\"tab\\x09here\"");
	describe_is("0.30000000000000004", SD_JSON_BY_KIND, "0.3");
	describe_is("1.5", SD_JSON_AS_TEXT, "1.5");
	describe_is("true", SD_JSON_BY_KIND, "true");
	describe_is("null", SD_JSON_BY_KIND, "null");
	describe_is("null", SD_JSON_AS_TEXT, "null");
	describe_is("1e999", SD_JSON_AS_TEXT, "inf (beyond a double's range)");
	describe_is("-1e999", SD_JSON_BY_KIND, "-inf (beyond a double's range)");
	/* 40 bytes of the value, then "...". */
	describe_is("\"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz\"", SD_JSON_BY_KIND,
	            "\"abcdefghijklmnopqrstuvwxyzabcdefghijklmn...\"");
	describe_is("\"abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz\"", SD_JSON_AS_TEXT,
	            "\"abcdefghijklmnopqrstuvwxyzabcdefghijklm...");
	CHECK_STR(sd_json_describe(NULL, SD_JSON_AS_TEXT, buf, sizeof buf), "nothing");
}

static void test_text(void)
{
	char buf[64];
	CHECK_STR(sd_text_show("ok name", buf, sizeof buf), "ok name");
	CHECK_STR(sd_text_show("a\tb\x01\xc3\xa9", buf, sizeof buf), "a?b???");
	CHECK_STR(sd_text_show("0123456789012345678901234567890123456789X", buf, sizeof buf),
	          "0123456789012345678901234567890123456789...");
	CHECK_STR(sd_text_show("0123456789012345678901234567890123456789", buf, sizeof buf),
	          "0123456789012345678901234567890123456789");
	/* A small buffer cuts earlier and still ends in "..." and a NUL. */
	char small[10];
	CHECK_STR(sd_text_show("abcdefghijkl", small, sizeof small), "abcdef...");
	CHECK_STR(sd_json_quote("say \"hi\"\\", buf, sizeof buf), "\"say \\x22hi\\x22\\x5c\"");
}

static void test_parse(void)
{
	size_t at = 7;
	cJSON *v = sd_json_parse_whole("{\"a\": [1, 2]}  \n", 16, &at);
	CHECK(cJSON_IsObject(v));
	CHECK_INT(at, 16);
	cJSON_Delete(v);
	/* Only the first len bytes count: what follows them is not read. */
	v = sd_json_parse_whole("[1]xyz", 3, &at);
	CHECK(cJSON_IsArray(v));
	cJSON_Delete(v);
	/* Text after the value is refused, where it starts. */
	CHECK(sd_json_parse_whole("{} {}", 5, &at) == NULL);
	CHECK_INT(at, 3);
	CHECK(sd_json_parse_whole("[1, 2", 5, &at) == NULL);
	CHECK_INT(at, 5);
	CHECK(sd_json_parse_whole("{\"a\": tru}", 10, &at) == NULL);
	CHECK(at >= 6 && at <= 10, "at %zu", at);
	CHECK(sd_json_parse_whole("", 0, &at) == NULL);
	CHECK_INT(at, 0);
}

int main(void)
{
	test_parse();
	test_kinds();
	test_bounds();
	test_field();
	test_describe();
	test_text();
	return check_exit("test-base-json");
}
