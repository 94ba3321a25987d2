/* tests/check.h - the checks of the C unit tests, and the invariant check of
 * the fuzz targets (header only).
 *
 * assert() is compiled out under -DNDEBUG, so the tests use their own
 * checks.  A failed check prints one line to stderr, counts the failure in
 * check_failures and lets the test keep going, to show everything that is
 * wrong at once:
 *
 *   CHECK(cond)                  FILE:LINE: FAIL: cond
 *   CHECK(cond, fmt, ...)        FILE:LINE: FAIL: cond: <printf(fmt, ...)>
 *   CHECK_INT(a, b)              FILE:LINE: FAIL: a == b (A != B)
 *                                (a and b compared as long long, each
 *                                evaluated once, a first)
 *   CHECK_STR(a, b)              FILE:LINE: FAIL: a == "B" (got "A")
 *                                (strcmp; a NULL a fails and shows (null))
 *   check_report(ok, fmt, ...)   prints the line fmt to stdout, then "  ok"
 *                                or "  FAIL"; counts the failure when !ok
 *                                (for tests that print a line per check)
 *
 * stdout is flushed before a failure is printed, so failures stay in order
 * with the progress lines when both go to one log.  A test's own helpers
 * may print a failure their way and add to check_failures.
 *
 *   check_skip(fmt, ...)         a part of the test could not run here (no
 *                                locale, no AVX-512, no data set): prints
 *                                "SKIP: <printf(fmt, ...)>" to stderr and
 *                                counts it in check_skips
 *
 * main() ends with `return check_exit("test-NAME");`: with failures it
 * prints "test-NAME: N failure(s)" to stderr and returns 1; otherwise, if a
 * part was skipped, "test-NAME: N part(s) skipped" to stderr and returns 77
 * (automake's SKIP, so a skip is counted and shown, never hidden inside a
 * PASS); otherwise "test-NAME: all passed" to stdout and returns 0.
 *
 * FUZZ_ASSERT(cond), for fuzz targets, does not count and go on: it prints
 * "FILE:LINE: invariant failed: cond" and aborts, so that libFuzzer keeps
 * the input and the plain driver stops on it. */
#ifndef SD_TESTS_CHECK_H
#define SD_TESTS_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int check_failures;
static int check_skips;

/* Prints "FILE:LINE: FAIL: EXPR" and then FMT, unless FMT is just ": " (the
 * CHECK macro puts ": " before its message, so that with no message the
 * format is still a literal). */
static inline void check_fail(const char *file, int line, const char *expr, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static inline void check_fail(const char *file, int line, const char *expr, const char *fmt, ...)
{
	fflush(stdout);
	fprintf(stderr, "%s:%d: FAIL: %s", file, line, expr);
	if (strcmp(fmt, ": ") != 0) {
		va_list ap;
		va_start(ap, fmt);
		vfprintf(stderr, fmt, ap);
		va_end(ap);
	}
	fputc('\n', stderr);
	check_failures++;
}

#define CHECK(cond, ...) do { \
	if (!(cond)) \
		check_fail(__FILE__, __LINE__, #cond, ": " __VA_ARGS__); \
} while (0)

#define CHECK_INT(a, b) do { \
	long long check_a_ = (long long)(a), check_b_ = (long long)(b); \
	if (check_a_ != check_b_) \
		check_fail(__FILE__, __LINE__, #a " == " #b, " (%lld != %lld)", check_a_, \
		           check_b_); \
} while (0)

#define CHECK_STR(a, b) do { \
	const char *check_a_ = (a), *check_b_ = (b); \
	if (!check_a_ || strcmp(check_a_, check_b_) != 0) \
		check_fail(__FILE__, __LINE__, #a, " == \"%s\" (got \"%s\")", check_b_, \
		           check_a_ ? check_a_ : "(null)"); \
} while (0)

static inline void check_report(int ok, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static inline void check_report(int ok, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	printf(ok ? "  ok\n" : "  FAIL\n");
	if (!ok)
		check_failures++;
}

static inline void check_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline void check_skip(const char *fmt, ...)
{
	va_list ap;
	fflush(stdout);
	fputs("SKIP: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	check_skips++;
}

static inline int check_exit(const char *name)
{
	if (check_failures) {
		fflush(stdout);
		fprintf(stderr, "%s: %d failure(s)\n", name, check_failures);
		return 1;
	}
	if (check_skips) {
		fflush(stdout);
		fprintf(stderr, "%s: everything else passed; %d part(s) skipped\n", name, check_skips);
		return 77;
	}
	printf("%s: all passed\n", name);
	return 0;
}

#define FUZZ_ASSERT(cond) do { \
	if (!(cond)) { \
		fprintf(stderr, "%s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
		abort(); \
	} \
} while (0)

#endif
