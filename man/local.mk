# man: rules for this subsystem
