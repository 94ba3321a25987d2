# tests/comm.mk
