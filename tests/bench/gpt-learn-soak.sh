#!/bin/sh
# make soak's run of tests/bench/gpt-learn (the test harness's rules want a
# .sh name): the example char-GPT's 10 epochs in spotdeck and PyTorch, both
# validation losses, spotdeck's below 1.6 and within 5 % of PyTorch's.
# GPT_LEARN_STEPS and GPT_LEARN_EPOCHS shorten it (gpt-learn's usage).
exec "${top_srcdir:-$(dirname "$0")/../..}/tests/bench/gpt-learn"
