# tests/netns.mk: the multi-host test bed (issue 12): network namespaces
# with a real sshd each, joined by a bridge on 198.18.0.0/15
# (tests/netns/lib.sh, tests/netns/README).  Both need root and SKIP
# without.  test-netns-forward-drop.sh runs the bed's test again inside a
# namespace that plays a Docker-like machine (br_netfilter, FORWARD DROP).
TESTS += tests/test-netns-bed.sh tests/test-netns-forward-drop.sh
EXTRA_DIST += tests/test-netns-bed.sh tests/test-netns-forward-drop.sh \
	tests/netns/lib.sh tests/netns/README
