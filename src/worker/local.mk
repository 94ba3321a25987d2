# src/worker/: the worker agent — the training process's side of the
# protocol (connect, ready, generations, steps, checkpoints, heartbeats) and the cloud preemption-notice watcher.
# Includes proto/ and engine/.  spotdeck-worker links $(SD_WORKER_LIBS).
noinst_LIBRARIES += src/worker/libsdworker.a
src_worker_libsdworker_a_SOURCES = src/worker/worker-agent.c src/worker/worker-agent.h \
	src/worker/notice-watch.c src/worker/notice-watch.h \
	src/worker/standalone.c src/worker/standalone.h \
	src/worker/worker-options.c src/worker/worker-options.h
src_worker_libsdworker_a_CPPFLAGS = $(AM_CPPFLAGS) $(OPENBLAS_CFLAGS) $(CJSON_CFLAGS) $(CURL_CFLAGS)
# The notice watcher speaks HTTP to the metadata service through libcurl.
SD_WORKER_LIBS = src/worker/libsdworker.a $(CURL_LIBS) $(SD_BASE_LIBS)
