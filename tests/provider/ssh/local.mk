# tests/provider/ssh/local.mk: ssh hosts (src/provider/ssh/) and the network-namespace bed they run in.
# The ssh provider's hosts file (src/provider/ssh/hosts.c,
# spotdeck-hosts(5)): its unit test and its fuzz target.
check_PROGRAMS += tests/provider/ssh/test-hosts
TESTS += tests/provider/ssh/test-hosts
tests_provider_ssh_test_hosts_SOURCES = tests/provider/ssh/test-hosts.c tests/check.h tests/tmpdir.h
tests_provider_ssh_test_hosts_LDADD = $(SD_PROVIDER_LIBS) $(SD_ENGINE_LIBS)

# The multi-host test bed: network namespaces
# with a real sshd each, joined by a bridge on 198.18.0.0/15
# (tests/netns/lib.sh, tests/netns/README).  Both need root and SKIP
# without.  test-netns-forward-drop.sh runs the bed's test again inside a
# namespace that plays a Docker-like machine (br_netfilter, FORWARD DROP).
TESTS += tests/provider/ssh/test-netns-bed.sh tests/provider/ssh/test-netns-forward-drop.sh
EXTRA_DIST += tests/provider/ssh/test-netns-bed.sh tests/provider/ssh/test-netns-forward-drop.sh
# The ssh provider on the bed: a cnn run on three hosts against three local
# workers, a host that refuses the key, a host without the worker program;
# a link cut and a frozen worker mid-training; the controller SIGKILLed
# and resumed; a worker whose ssh session ends trains on; an ONNX model
# whose file only the controller has trains on three hosts; hosts that
# cannot reach the controller train through the ssh forwards (a capture on
# the bridge, tests/netns/sniff.py, sees no worker protocol in the clear).
TESTS += tests/provider/ssh/test-ssh-hosts.sh tests/provider/ssh/test-ssh-link-cut.sh \
	tests/provider/ssh/test-ssh-resume.sh tests/provider/ssh/test-ssh-onnx.sh \
	tests/provider/ssh/test-ssh-session-lost.sh tests/provider/ssh/test-ssh-forward.sh
EXTRA_DIST += tests/provider/ssh/test-ssh-hosts.sh tests/provider/ssh/test-ssh-link-cut.sh \
	tests/provider/ssh/test-ssh-resume.sh tests/provider/ssh/test-ssh-onnx.sh \
	tests/provider/ssh/test-ssh-session-lost.sh tests/provider/ssh/test-ssh-forward.sh

# The ssh provider's close on the loop, with a stand-in ssh program.
check_PROGRAMS += tests/provider/ssh/test-ssh-close
TESTS += tests/provider/ssh/test-ssh-close
tests_provider_ssh_test_ssh_close_SOURCES = tests/provider/ssh/test-ssh-close.c tests/check.h tests/tmpdir.h
tests_provider_ssh_test_ssh_close_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CJSON_CFLAGS)
tests_provider_ssh_test_ssh_close_LDADD = $(SD_PROVIDER_LIBS) $(SD_PROTO_LIBS) $(SD_TRACE_LIBS) $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS) $(UV_LIBS)

# The end of an ssh run on a slow host: spotdeck answers while the
# provider cleans the host, and exits once it is done, leaving no ssh.
TESTS += tests/provider/ssh/test-ssh-close-run.sh
EXTRA_DIST += tests/provider/ssh/test-ssh-close-run.sh
