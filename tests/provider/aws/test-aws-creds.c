/* tests/provider/aws/test-aws-creds.c - the AWS credential chain (src/provider/aws/aws-creds.c):
 * which source wins, the profile's section in each file, and every refusal
 * with the file, line or variable it names.
 *
 * With --probe it resolves once from the real environment and prints
 * "ok KEY_ID TOKEN|- WHERE" or "none MESSAGE" or "error MESSAGE", for
 * tests/provider/aws/test-aws-creds-botocore.sh to compare with botocore's chain. */
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "src/provider/aws/aws-creds.h"
#include "tests/check.h"
#include "tests/tmpdir.h"

static char dir[512];
static char cred[600], conf[600];

static void put(const char *path, const char *text, mode_t mode)
{
	write_raw(path, text, strlen(text));
	if (chmod(path, mode) < 0) {
		perror(path);
		exit(1);
	}
}

static void clear_env(void)
{
	static const char *const vars[] = {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
					   "AWS_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE", NULL};
	for (int i = 0; vars[i]; i++)
		unsetenv(vars[i]);
	setenv("AWS_SHARED_CREDENTIALS_FILE", cred, 1);
	setenv("AWS_CONFIG_FILE", conf, 1);
	unlink(cred);
	unlink(conf);
}

/* Resolves with SRC (NULL: none given); returns the result, fills C and
 * ERR. */
static int resolve(const struct sd_aws_creds_source *src, struct sd_aws_creds *c, char *err, size_t errlen)
{
	static const struct sd_aws_creds_source none;
	err[0] = '\0';
	return sd_aws_creds_resolve(src ? src : &none, c, err, errlen);
}

#define EXPECT_KEY(ID, SECRET, TOKEN, WHERE)                                                         \
	do {                                                                                       \
		struct sd_aws_creds c_;                                                            \
		char e_[512];                                                                      \
		int r_ = resolve(NULL, &c_, e_, sizeof e_);                                        \
		CHECK_INT(r_, 0);                                                                  \
		if (r_ == 0) {                                                                     \
			CHECK_STR(c_.key_id, ID);                                                  \
			CHECK_STR(c_.secret, SECRET);                                              \
			if (TOKEN)                                                                 \
				CHECK_STR(c_.token, TOKEN);                                        \
			else                                                                       \
				CHECK(c_.token == NULL, "token %s", c_.token);                     \
			CHECK(strstr(c_.where, WHERE) != NULL, "where \"%s\", want \"%s\"", c_.where, \
			      WHERE);                                                              \
			sd_aws_creds_clear(&c_);                                                   \
		} else {                                                                           \
			fprintf(stderr, "  (error: %s)\n", e_);                                    \
		}                                                                                  \
	} while (0)

/* The resolution fails with R (1: none, -1: error) and a message holding
 * every one of the NULL-terminated parts. */
static void expect_fail(int line, int want, ...)
{
	struct sd_aws_creds c;
	char err[512];
	int r = resolve(NULL, &c, err, sizeof err);
	if (r != want) {
		check_fail(__FILE__, line, "result", ": got %d (%s), want %d", r, r == 0 ? c.key_id : err, want);
		if (r == 0)
			sd_aws_creds_clear(&c);
		return;
	}
	va_list ap;
	va_start(ap, want);
	for (const char *part; (part = va_arg(ap, const char *));)
		if (!strstr(err, part))
			check_fail(__FILE__, line, "message", ": \"%s\" lacks \"%s\"", err, part);
	va_end(ap);
}
#define EXPECT_FAIL(WANT, ...) expect_fail(__LINE__, WANT, __VA_ARGS__, (const char *)NULL)

static void test_order(void)
{
	clear_env();
	EXPECT_FAIL(1, "no AWS credentials", cred);

	put(cred, "[default]\naws_access_key_id = AKIAFILEDEFAULT1\naws_secret_access_key = fileSecret/Default+1\n"
		  "\n# a comment\n[prod]\naws_access_key_id=AKIAFILEPROD0002\naws_secret_access_key=prodSecret\n"
		  "aws_session_token = FwoGZXIvYXdzEProdToken==\n",
	    0600);
	put(conf, "[default]\nregion = us-east-1\naws_access_key_id = AKIACONFDEFAULT3\n"
		  "aws_secret_access_key = confSecret\n[profile staging]\naws_access_key_id = AKIACONFSTAGING4\n"
		  "aws_secret_access_key = stagingSecret\n[profile roleonly]\nrole_arn = arn:aws:iam::1:role/x\n"
		  "source_profile = default\n",
	    0600);
	/* The credentials file before the config file. */
	EXPECT_KEY("AKIAFILEDEFAULT1", "fileSecret/Default+1", NULL, "credentials [default]");
	/* A profile: its section; its token too. */
	setenv("AWS_PROFILE", "prod", 1);
	EXPECT_KEY("AKIAFILEPROD0002", "prodSecret", "FwoGZXIvYXdzEProdToken==", "credentials [prod]");
	/* A profile only the config file has, as [profile NAME]. */
	setenv("AWS_PROFILE", "staging", 1);
	EXPECT_KEY("AKIACONFSTAGING4", "stagingSecret", NULL, "config [profile staging]");
	/* The environment before both files, whatever the profile. */
	setenv("AWS_ACCESS_KEY_ID", "AKIAENVIRONMENT5", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "envSecret", 1);
	setenv("AWS_SESSION_TOKEN", "envToken", 1);
	EXPECT_KEY("AKIAENVIRONMENT5", "envSecret", "envToken", "the environment");
	/* The config's key before the environment. */
	{
		struct sd_aws_creds_source s = {.access_key_id = "AKIAGIVENINJOB06", .secret_key = "jobSecret"};
		struct sd_aws_creds c;
		char err[256];
		CHECK_INT(resolve(&s, &c, err, sizeof err), 0);
		CHECK_STR(c.key_id, "AKIAGIVENINJOB06");
		CHECK(c.token == NULL, "the environment's token went with the job's key");
		sd_aws_creds_clear(&c);
		s.secret_key = NULL;
		CHECK_INT(resolve(&s, &c, err, sizeof err), -1);
		CHECK(strstr(err, "needs its secret") != NULL, "%s", err);
	}
	/* Half a key in the environment is an error, not a fall-through. */
	unsetenv("AWS_SECRET_ACCESS_KEY");
	EXPECT_FAIL(-1, "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not");
	unsetenv("AWS_ACCESS_KEY_ID");
	setenv("AWS_SECRET_ACCESS_KEY", "envSecret", 1);
	EXPECT_FAIL(-1, "AWS_SECRET_ACCESS_KEY is set but AWS_ACCESS_KEY_ID is not");
	unsetenv("AWS_SECRET_ACCESS_KEY");
	unsetenv("AWS_SESSION_TOKEN");
	/* A profile with no key: named, with what is not supported. */
	setenv("AWS_PROFILE", "roleonly", 1);
	EXPECT_FAIL(-1, "roleonly", conf, "no aws_access_key_id", "role_arn");
	/* A profile asked for that no file has. */
	setenv("AWS_PROFILE", "nosuch", 1);
	EXPECT_FAIL(-1, "'nosuch' is in neither", cred, conf);
	setenv("AWS_PROFILE", "bad]name", 1);
	EXPECT_FAIL(-1, "not a profile name");
	unsetenv("AWS_PROFILE");
	/* Without a credentials file, [default] of the config file. */
	unlink(cred);
	EXPECT_KEY("AKIACONFDEFAULT3", "confSecret", NULL, "config [default]");
}

static void test_refusals(void)
{
	clear_env();
	static const char good[] = "[default]\naws_access_key_id = AKIAGOOD00000007\naws_secret_access_key = s\n";
	/* Readable or writable by others: refused with the mode and the fix. */
	put(cred, good, 0644);
	EXPECT_FAIL(-1, cred, "readable by others (mode 0644)", "chmod 600");
	put(cred, good, 0620);
	EXPECT_FAIL(-1, cred, "writable by others (mode 0620)");
	put(cred, good, 0400);
	EXPECT_KEY("AKIAGOOD00000007", "s", NULL, "[default]");
	chmod(cred, 0600);
	/* A line that is not INI: its number. */
	put(cred, "[default]\naws_access_key_id = AKIA1\nthis is not ini\naws_secret_access_key = s\n", 0600);
	EXPECT_FAIL(-1, cred, ":3: not an INI line");
	/* Half a key, a key twice. */
	put(cred, "[default]\naws_access_key_id = AKIA1\n", 0600);
	EXPECT_FAIL(-1, cred, "[default] has aws_access_key_id but no aws_secret_access_key");
	put(cred, "[default]\naws_secret_access_key = s\n", 0600);
	EXPECT_FAIL(-1, "[default] has aws_secret_access_key but no aws_access_key_id");
	put(cred, "[default]\naws_access_key_id = AKIA1\naws_access_key_id = AKIA2\naws_secret_access_key = s\n",
	    0600);
	EXPECT_FAIL(-1, "[default] has aws_access_key_id twice");
	/* A value that could not go into a header. */
	put(cred, "[default]\naws_access_key_id = AKIA 1\naws_secret_access_key = s\n", 0600);
	EXPECT_FAIL(-1, cred, "not printable ASCII");
	/* A line longer than inih reads whole: refused with its number rather
	 * than split into a wrong token. */
	char big[600];
	int n = snprintf(big, sizeof big, "[default]\naws_access_key_id = AKIA1\naws_secret_access_key = s\n"
					  "aws_session_token = ");
	memset(big + n, 'T', 300);
	strcpy(big + n + 300, "\n");
	put(cred, big, 0600);
	EXPECT_FAIL(-1, cred, ":4: line longer than", "AWS_SESSION_TOKEN");
	/* Not a file; a NUL byte; too large. */
	unlink(cred);
	mkdir(cred, 0700);
	EXPECT_FAIL(-1, cred, "not a regular file");
	rmdir(cred);
	write_raw(cred, "[default]\0x", 11);
	chmod(cred, 0600);
	EXPECT_FAIL(-1, cred, "NUL byte");
	char *huge = malloc(SD_AWS_CREDS_FILE_MAX + 2);
	memset(huge, '#', SD_AWS_CREDS_FILE_MAX + 1);
	huge[SD_AWS_CREDS_FILE_MAX + 1] = '\0';
	put(cred, huge, 0600);
	free(huge);
	EXPECT_FAIL(-1, cred, "larger than 64 KiB");
	/* An error in the credentials file is not hidden by a good config. */
	put(cred, "[default\n", 0600);
	put(conf, good, 0600);
	EXPECT_FAIL(-1, cred, ":1: not an INI line");
	clear_env();
}

static int probe(void)
{
	struct sd_aws_creds c;
	char err[512];
	int r = resolve(NULL, &c, err, sizeof err);
	if (r == 0) {
		printf("ok %s %s %s\n", c.key_id, c.token ? c.token : "-", c.where);
		sd_aws_creds_clear(&c);
	} else {
		printf("%s %s\n", r > 0 ? "none" : "error", err);
	}
	return 0;
}

/* The instance role's key as IMDS answers it (EC2 User Guide's example). */
static void test_imds(void)
{
	struct sd_aws_creds c;
	long long exp;
	char err[512];
	/* 2026-12-03T12:00:00Z = 1796299200 */
	const char *ok = "{\n  \"Code\" : \"Success\",\n  \"LastUpdated\" : \"2026-12-03T06:00:00Z\",\n"
	                 "  \"Type\" : \"AWS-HMAC\",\n  \"AccessKeyId\" : \"ASIAIOSFODNN7EXAMPLE\",\n"
	                 "  \"SecretAccessKey\" : \"wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\",\n"
	                 "  \"Token\" : \"IQoJb3JpZ2luX2VjEXAMPLE==\",\n  \"Expiration\" : \"2026-12-03T12:00:00Z\"\n}";
	CHECK(sd_aws_creds_from_imds(ok, strlen(ok), 1796299200LL - 3600, "web", &c, &exp, err, sizeof err) == 0,
	      "%s", err);
	CHECK_STR(c.key_id, "ASIAIOSFODNN7EXAMPLE");
	CHECK_STR(c.secret, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY");
	CHECK_STR(c.token, "IQoJb3JpZ2luX2VjEXAMPLE==");
	CHECK_STR(c.where, "the instance role web (IMDS)");
	CHECK(exp == 1796299200LL, "Expiration %lld", exp);
	sd_aws_creds_clear(&c);
	static const struct {
		const char *json, *want;
		long long now;
	} bad[] = {
		{"<html>", "instance role web: the metadata service's answer is not a JSON object", 0},
		{"{\"Code\": \"AssumeRoleUnauthorizedAccess\"}",
		 "instance role web: the metadata service's Code is AssumeRoleUnauthorizedAccess, not Success", 0},
		{"{\"Code\": \"Success\", \"AccessKeyId\": \"ASIA1\", \"SecretAccessKey\": \"s\", "
		 "\"Expiration\": \"2026-12-03T12:00:00Z\"}",
		 "instance role web: AccessKeyId, SecretAccessKey or Token missing in the metadata service's answer", 0},
		{"{\"Code\": \"Success\", \"AccessKeyId\": \"ASIA1\", \"SecretAccessKey\": \"s\", \"Token\": \"t\", "
		 "\"Expiration\": \"2026-12-03 12:00:00\"}",
		 "instance role web: Expiration is not a UTC time like 2026-12-03T12:00:00Z", 0},
		{"{\"Code\": \"Success\", \"AccessKeyId\": \"ASIA1\", \"SecretAccessKey\": \"s\", \"Token\": \"t\", "
		 "\"Expiration\": \"2026-12-03T12:00:00Z\"}",
		 "instance role web: the key expired at 2026-12-03T12:00:00Z", 1796299200LL},
		{"{\"Code\": \"Success\", \"AccessKeyId\": \"ASIA 1\", \"SecretAccessKey\": \"s\", \"Token\": \"t\", "
		 "\"Expiration\": \"2026-12-03T12:00:00Z\"}",
		 "the instance role web (IMDS): the key id, secret or token has a space or a character that is not "
		 "printable ASCII", 0},
	};
	for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
		err[0] = '\0';
		CHECK(sd_aws_creds_from_imds(bad[i].json, strlen(bad[i].json), bad[i].now, "web", &c, &exp, err,
		                             sizeof err) == -1, "case %zu accepted", i);
		CHECK_STR(err, bad[i].want);
		CHECK(c.key_id == NULL, "case %zu left a key", i);
	}
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "--probe"))
		return probe();
	make_tmpdir(dir, sizeof dir, "test-aws-creds-XXXXXX");
	snprintf(cred, sizeof cred, "%s/credentials", dir);
	snprintf(conf, sizeof conf, "%s/config", dir);
	test_order();
	test_refusals();
	test_imds();
	rm_tree(dir);
	return check_exit("test-aws-creds");
}
