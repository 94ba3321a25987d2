# ui: rules for this subsystem
