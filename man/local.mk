# man: rules for this subsystem
dist_man_MANS += man/spotdeck-worker.1
dist_man_MANS += man/spotdeck.1
dist_man_MANS += man/spotdeck-job.5
dist_man_MANS += man/spotdeck-catalog.5
dist_man_MANS += man/spotdeck-plan.1
dist_man_MANS += man/spotdeck-hosts.5
dist_man_MANS += man/spotdeck-export.1
