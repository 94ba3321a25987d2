# themes: rules for this subsystem
