# engine/comm.mk: collectives (Gloo shim, NCCL) - rules for engine/comm-*.
