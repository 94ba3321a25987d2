# tests/market.mk
