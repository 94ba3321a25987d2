# src/app/: what the spotdeck program adds on top — the view model (the
# cockpit's view struct built from the controller, provider and market), the
# what-if dialog's rows and runs, and `spotdeck plan`.  May include every
# layer below it and ui/.
noinst_LIBRARIES += src/app/libsdapp.a
src_app_libsdapp_a_SOURCES = src/app/view-model.c src/app/view-model.h \
	src/app/plan-cli.c src/app/plan-cli.h \
	src/app/whatif.c src/app/whatif.h src/app/whatif-run.c \
	src/app/view-codec.c src/app/view-codec.h \
	src/app/control.c src/app/control.h src/app/attach.c src/app/attach.h \
	src/app/doctor.c src/app/doctor.h src/app/doctor-internal.h src/app/doctor-aws.c \
	src/app/export-cli.c src/app/export-cli.h \
	src/app/subcommand.h src/app/subcommands.c src/app/cmd-run.c src/app/cmd-attach.c \
	src/app/cmd-ls.c src/app/cmd-kill.c src/app/cmd-plan.c src/app/cmd-doctor.c \
	src/app/cmd-export.c src/app/run-setup.c src/app/run-setup.h src/app/run-options.c src/app/run-options.h \
	src/app/background.c src/app/background.h
src_app_libsdapp_a_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CJSON_CFLAGS) $(ZLIB_CFLAGS) \
	$(CRYPTO_CFLAGS)
SD_APP_LIBS = src/app/libsdapp.a $(SD_RUN_LIBS)
