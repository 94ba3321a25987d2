# tests/data.mk
