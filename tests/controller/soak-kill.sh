#!/bin/sh
# Long soak of the fault test: 100 trials of a SIGKILLed worker (not part of
# make check; takes about an hour on 2 cores).
TRIALS=${TRIALS:-100} exec sh "$(dirname "$0")/test-elastic-fault.sh"
