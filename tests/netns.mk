# tests/netns.mk: the multi-host test bed (issue 12): network namespaces
# with a real sshd each, joined by a bridge on 198.18.0.0/15
# (tests/netns/lib.sh, tests/netns/README).  Needs root; SKIPs without.
TESTS += tests/test-netns-bed.sh
EXTRA_DIST += tests/test-netns-bed.sh tests/netns/lib.sh tests/netns/README
