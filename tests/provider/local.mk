# tests/provider/local.mk: the provider core (src/provider/): the ops table, a provider from the test suite alone, the clouds' revocation model.
TESTS += tests/provider/test-provider-script.sh
EXTRA_DIST += tests/provider/test-provider-script.sh
# The calibrated market's revocation model on the cloud providers' offers
# (src/provider/cloud-vm.c).
check_PROGRAMS += tests/provider/test-cloud-model
TESTS += tests/provider/test-cloud-model
tests_provider_test_cloud_model_SOURCES = tests/provider/test-cloud-model.c tests/check.h
tests_provider_test_cloud_model_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CJSON_CFLAGS)
tests_provider_test_cloud_model_LDADD = $(SD_APP_LIBS) $(SD_CONTROLLER_LIBS) $(SD_PROVIDER_LIBS) $(SD_UI_LIBS) \
	$(SD_PROTO_LIBS) $(SD_MARKET_LIBS) $(SD_ENGINE_LIBS) $(UV_LIBS)
