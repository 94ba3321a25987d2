# man: rules for this subsystem
dist_man_MANS += man/spotdeck-job.5
