# tests/: unit, integration, TUI, fuzz and benchmark programs.
# Each area keeps its own fragment.
include tests/engine.mk
include tests/data.mk
include tests/train.mk
include tests/market.mk
include tests/comm.mk
include tests/ui.mk
include tests/ui-e2e.mk
