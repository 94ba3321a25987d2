# tests/ui-e2e.mk: the real spotdeck cockpit end to end in tmux (real
# workers, a scripted simulated market; screen and journal checked), and the
# cockpit overhead benchmark (run by hand: tests/bench/cockpit-bench).
TESTS += tests/test-ui-cockpit.sh
# What the cockpit says servers cost: billed rates, '*', local servers.
TESTS += tests/test-ui-billing.sh tests/test-ui-provider-script.sh
EXTRA_DIST += tests/ui-e2e/lib.sh tests/test-ui-billing.sh tests/test-ui-provider-script.sh tests/ui-e2e/billing-job.json tests/ui-e2e/billing-trace.jsonl
# The cockpit asks about an earlier controller's VMs on the fake GCE, and y
# adopts them.
TESTS += tests/test-ui-orphans.sh
EXTRA_DIST += tests/test-ui-orphans.sh
# The replacement suggested after revocations in two zones, and why (issue
# 9, item 4).
TESTS += tests/test-ui-suggest.sh
EXTRA_DIST += tests/test-ui-suggest.sh tests/ui-e2e/suggest-job.json tests/ui-e2e/suggest-trace.jsonl
# The live autopilot: its announced action, A holding it, and an
# operator's drop it does not undo.
TESTS += tests/test-ui-autopilot.sh
EXTRA_DIST += tests/test-ui-autopilot.sh tests/ui-e2e/autopilot-job.json
# The revocation pane marks the autopilot's replacements.
TESTS += tests/test-ui-autopilot-revocations.sh
EXTRA_DIST += tests/test-ui-autopilot-revocations.sh tests/ui-e2e/autopilot-revocations-job.json
# A journal that cannot be written: the status line says so.
TESTS += tests/test-ui-journal-full.sh
EXTRA_DIST += tests/test-ui-journal-full.sh
# A crash (SIGSEGV, SIGFPE) gives the terminal back.
TESTS += tests/test-ui-crash.sh
EXTRA_DIST += tests/test-ui-crash.sh
EXTRA_DIST += tests/test-ui-cockpit.sh tests/ui-e2e/check.py \
	tests/ui-e2e/cockpit-job.json tests/ui-e2e/cockpit-trace.jsonl \
	tests/bench/cockpit-bench tests/bench/attach-bench
# The background run: detach by losing the terminal, attach again,
# two cockpits, the final screen; the control socket from scripts.
TESTS += tests/test-ui-attach.sh tests/test-control-socket.sh
EXTRA_DIST += tests/test-ui-attach.sh tests/test-control-socket.sh
