# src: rules for this subsystem
