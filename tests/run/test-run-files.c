/* tests/run/test-run-files.c - a run directory's files (src/run/run-lock.h,
 * src/run/journal-file.h, src/base/file.h): the lock refuses a second
 * holder with the first one's pid and is free again once closed; a failed
 * start's probe tells a held lock from a free one and from none; the
 * journal ends a torn last line once, appends whole lines and reports a
 * failed write without moving its length; an atomic write replaces a file
 * and leaves no temporary behind, and a bounded read refuses a larger file. */
#include "config.h"

#include "src/base/file.h"
#include "src/run/journal-file.h"
#include "src/run/run-lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/check.h"
#include "tests/tmpdir.h"

static void test_lock(const char *dir)
{
	char *why = NULL;
	int fd = -1, fd2 = -1, probe = -1;
	char *lock = path_join(dir, "lock");

	/* No lock file yet: nobody holds it, and the probe takes nothing. */
	CHECK_INT(sd_run_lock_busy(dir, &probe), 0);
	CHECK_INT(probe, -1);

	CHECK_INT(sd_run_lock(dir, &fd, &why), 0);
	CHECK(fd >= 0);
	size_t len = 0;
	char *text = (char *)read_raw(lock, &len);
	char want[32];
	snprintf(want, sizeof want, "%ld\n", (long)getpid());
	CHECK(len == strlen(want) && memcmp(text, want, len) == 0, "lock holds '%.*s'", (int)len, text);
	free(text);

	/* flock belongs to the open file, so a second open in this process is
	 * refused as another process would be. */
	CHECK_INT(sd_run_lock(dir, &fd2, &why), -1);
	CHECK_INT(fd2, -1);
	char msg[1400];
	snprintf(msg, sizeof msg, "%s: in use by another spotdeck (pid %ld); stop it first", dir,
	         (long)getpid());
	CHECK_STR(why, msg);
	free(why);
	why = NULL;
	CHECK_INT(sd_run_lock_busy(dir, &probe), 1);
	CHECK_INT(probe, -1);

	close(fd);
	CHECK_INT(sd_run_lock_busy(dir, &probe), 0);
	CHECK(probe >= 0);
	/* The probe holds the lock until it closes it. */
	CHECK_INT(sd_run_lock(dir, &fd2, &why), -1);
	free(why);
	why = NULL;
	close(probe);
	CHECK_INT(sd_run_lock(dir, &fd2, &why), 0);
	close(fd2);

	char *none = path_join(dir, "no/such/dir");
	CHECK_INT(sd_run_lock(none, &fd, &why), -1);
	snprintf(msg, sizeof msg, "%s/lock: No such file or directory", none);
	CHECK_STR(why, msg);
	free(why);
	free(none);
	free(lock);
}

static void test_journal(const char *dir)
{
	char *why = NULL;
	char *path = path_join(dir, "journal.jsonl");
	write_raw(path, "{\"a\":1}\n{\"b\":", 13);   /* a crash cut the second line */
	int fd = -1;
	off_t size = -1;
	CHECK_INT(sd_journal_open(path, 1, &fd, &size, &why), 0);
	CHECK_INT(size, 14);
	CHECK_INT(sd_journal_append(fd, &size, "{\"c\":3}\n", 8), 0);
	CHECK_INT(size, 22);
	close(fd);
	size_t len = 0;
	char *text = (char *)read_raw(path, &len);
	CHECK(len == 22 && memcmp(text, "{\"a\":1}\n{\"b\":\n{\"c\":3}\n", 22) == 0, "journal '%.*s'",
	      (int)len, text);
	free(text);

	/* Not torn: opened as it is. */
	CHECK_INT(sd_journal_open(path, 0, &fd, &size, &why), 0);
	CHECK_INT(size, 22);
	close(fd);

	/* A write that fails leaves the length where it was. */
	int ro = open(path, O_RDONLY);
	off_t at = 22;
	CHECK_INT(sd_journal_append(ro, &at, "{}\n", 3), EBADF);
	CHECK_INT(at, 22);
	close(ro);

	char *bad = path_join(dir, "missing/journal.jsonl");
	CHECK_INT(sd_journal_open(bad, 0, &fd, &size, &why), -1);
	char msg[1400];
	snprintf(msg, sizeof msg, "%s: No such file or directory", bad);
	CHECK_STR(why, msg);
	free(why);
	free(bad);
	free(path);
}

static void test_files(const char *dir)
{
	char *why = NULL;
	char *path = path_join(dir, "job.json");
	write_raw(path, "old", 3);
	CHECK_INT(sd_write_file_atomic(path, "new text", 8, &why), 0);
	char *buf = NULL;
	size_t len = 0;
	CHECK_INT(sd_read_file(path, 8, &buf, &len, &why), 0);
	CHECK(len == 8 && buf && strcmp(buf, "new text") == 0, "read '%s'", buf ? buf : "(null)");
	free(buf);
	char tmp[1400];
	snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
	CHECK(access(tmp, F_OK) != 0, "%s left behind", tmp);

	/* One byte over the bound is refused, with nothing handed out. */
	buf = (char *)1;
	CHECK_INT(sd_read_file(path, 7, &buf, &len, &why), -1);
	CHECK(buf == NULL);
	char msg[1400];
	snprintf(msg, sizeof msg, "%s: larger than 0 MiB", path);
	CHECK_STR(why, msg);
	free(why);
	why = NULL;

	char *bad = path_join(dir, "missing/x");
	CHECK_INT(sd_write_file_atomic(bad, "x", 1, &why), -1);
	snprintf(msg, sizeof msg, "%s.tmp.%ld: No such file or directory", bad, (long)getpid());
	CHECK_STR(why, msg);
	free(why);
	why = NULL;
	CHECK_INT(sd_read_file(bad, 8, &buf, &len, &why), -1);
	snprintf(msg, sizeof msg, "%s: cannot read: No such file or directory", bad);
	CHECK_STR(why, msg);
	free(why);
	free(bad);
	free(path);
}

int main(void)
{
	char dir[512];
	make_tmpdir(dir, sizeof dir, "test-run-files-XXXXXX");
	test_lock(dir);
	test_journal(dir);
	test_files(dir);
	rm_tree(dir);
	return check_exit("test-run-files");
}
