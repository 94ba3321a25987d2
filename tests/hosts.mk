# tests/hosts.mk: the ssh provider's hosts file (src/provider/ssh/hosts.c,
# spotdeck-hosts(5)): its unit test and its fuzz target.
HOSTS_TESTS = tests/test-hosts tests/fuzz/fuzz-hosts
check_PROGRAMS += $(HOSTS_TESTS)
TESTS += $(HOSTS_TESTS)

tests_test_hosts_SOURCES = tests/test-hosts.c tests/check.h tests/tmpdir.h
tests_test_hosts_LDADD = $(SD_PROVIDER_LIBS) $(SD_ENGINE_LIBS)

# Built as a plain program with a main() that replays mutated hosts files;
# see the file for the libFuzzer build.
tests_fuzz_fuzz_hosts_SOURCES = tests/fuzz/fuzz-hosts.c tests/check.h tests/fuzz/mutate.h
tests_fuzz_fuzz_hosts_LDADD = $(SD_PROVIDER_LIBS) $(SD_ENGINE_LIBS)

# The ssh provider's close on the loop, with a stand-in ssh program.
check_PROGRAMS += tests/test-ssh-close
TESTS += tests/test-ssh-close
tests_test_ssh_close_SOURCES = tests/test-ssh-close.c tests/check.h tests/tmpdir.h
tests_test_ssh_close_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CJSON_CFLAGS)
tests_test_ssh_close_LDADD = $(SD_PROVIDER_LIBS) $(SD_PROTO_LIBS) $(SD_TRACE_LIBS) $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS) $(UV_LIBS)
