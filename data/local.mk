# data: rules for this subsystem
