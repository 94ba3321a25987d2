# tests/netns.mk: the multi-host test bed: network namespaces
# with a real sshd each, joined by a bridge on 198.18.0.0/15
# (tests/netns/lib.sh, tests/netns/README).  Both need root and SKIP
# without.  test-netns-forward-drop.sh runs the bed's test again inside a
# namespace that plays a Docker-like machine (br_netfilter, FORWARD DROP).
TESTS += tests/test-netns-bed.sh tests/test-netns-forward-drop.sh
EXTRA_DIST += tests/test-netns-bed.sh tests/test-netns-forward-drop.sh \
	tests/netns/lib.sh tests/netns/README
# The ssh provider on the bed: a cnn run on three hosts against three local
# workers, a host that refuses the key, a host without the worker program;
# a link cut and a frozen worker mid-training; the controller SIGKILLed
# and resumed; a worker whose ssh session ends trains on; an ONNX model
# whose file only the controller has trains on three hosts; hosts that
# cannot reach the controller train through the ssh forwards (a capture on
# the bridge, tests/netns/sniff.py, sees no worker protocol in the clear).
TESTS += tests/test-ssh-hosts.sh tests/test-ssh-link-cut.sh tests/test-ssh-resume.sh tests/test-ssh-onnx.sh \
	tests/test-ssh-session-lost.sh tests/test-ssh-forward.sh
# The end of an ssh run on a slow host: spotdeck answers while the
# provider cleans the host, and exits once it is done, leaving no ssh.
TESTS += tests/test-ssh-close-run.sh
EXTRA_DIST += tests/test-ssh-close-run.sh
EXTRA_DIST += tests/test-ssh-hosts.sh tests/test-ssh-link-cut.sh tests/test-ssh-resume.sh tests/test-ssh-onnx.sh \
	tests/test-ssh-session-lost.sh tests/test-ssh-forward.sh tests/netns/sniff.py
