# src/provider/: where servers come from, one room a provider.
#   provider.h   the ops table every provider fills in, its typed events
#   registry.c   the providers by name
#   fleet.c      ids, states, billing, journal (fleet.h); launcher.c: the
#                worker processes
#   cloud-vm.c   one VM lifecycle for the clouds behind struct sd_cloud_ops
#                (a new cloud: a room of its own with its API calls)
#   sim/         the simulated market
#   ssh/         your own hosts over OpenSSH, and the ssh transport the
#                clouds start their workers with
#   gce/, aws/   Spot VMs on Compute Engine and EC2
#   http/        what the clouds call their APIs with: HTTP on the loop,
#                AWS Signature Version 4, files that hold secrets
# Includes market/, proto/ and engine/.
noinst_LIBRARIES += src/provider/libsdprovider.a
src_provider_libsdprovider_a_SOURCES = src/provider/provider.h src/provider/fleet.h \
	src/provider/fleet-internal.h src/provider/fleet.c src/provider/launcher.c \
	src/provider/registry.c
src_provider_libsdprovider_a_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CJSON_CFLAGS) $(CURL_CFLAGS) \
	$(CRYPTO_CFLAGS) $(EXPAT_CFLAGS) $(INIH_CFLAGS)
# libcurl, libcrypto, expat, inih: the cloud providers' HTTP, tokens,
# signatures, EC2's XML and the AWS credentials files.
SD_PROVIDER_LIBS = src/provider/libsdprovider.a $(CURL_LIBS) $(CRYPTO_LIBS) $(EXPAT_LIBS) $(INIH_LIBS) $(SD_BASE_LIBS)

# ---- sim/: the simulated market ----
src_provider_libsdprovider_a_SOURCES += src/provider/sim/sim.c

# ---- ssh/: hosts over OpenSSH ----
# The ssh transport (transport.h: workers on other hosts over ssh, for the
# ssh provider and the clouds alike), and on top of it the ssh provider
# (ssh.c) and its hosts file (hosts.h; man/spotdeck-hosts.5).
src_provider_libsdprovider_a_SOURCES += src/provider/ssh/transport.h src/provider/ssh/transport.c
src_provider_libsdprovider_a_SOURCES += src/provider/ssh/ssh.c src/provider/ssh/hosts.h src/provider/ssh/hosts.c

# ---- http/: how the clouds reach their APIs ----
# HTTP on the loop (http.h: libcurl multi driven by libuv, retries with
# back-off).
src_provider_libsdprovider_a_SOURCES += src/provider/http/http.h src/provider/http/http.c
# A cloud API operation of several requests: its timer, clock and the
# client's list that a close ends (api-op.h).
src_provider_libsdprovider_a_SOURCES += src/provider/http/api-op.h src/provider/http/api-op.c
# Reading a file that holds a secret, and the one-line error (secret-file.h).
src_provider_libsdprovider_a_SOURCES += src/provider/http/secret-file.h src/provider/http/secret-file.c
# AWS Signature Version 4 for the EC2 Query API (sigv4.h), with libcrypto.
src_provider_libsdprovider_a_SOURCES += src/provider/http/sigv4.h src/provider/http/sigv4.c

# ---- the lifecycle every cloud shares ----
# Settings, journal, run label, and the VM lifecycle (cloud-vm.h).
src_provider_libsdprovider_a_SOURCES += src/provider/cloud-vm.h src/provider/cloud-vm.c

# ---- gce/: Spot VMs on Compute Engine ----
# The Compute Engine v1 bodies (gce-api.h).
src_provider_libsdprovider_a_SOURCES += src/provider/gce/gce-api.h src/provider/gce/gce-api.c
# A Spot VM's price from the Cloud Billing Catalog, and its cache (gce-price.h).
src_provider_libsdprovider_a_SOURCES += src/provider/gce/gce-price.h src/provider/gce/gce-price.c
# Service-account credentials: key file, JWT assertion, token answer
# (gce-auth.h; signed with libcrypto).
src_provider_libsdprovider_a_SOURCES += src/provider/gce/gce-auth.h src/provider/gce/gce-auth.c
# Compute Engine calls with an OAuth2 token kept fresh (gce-client.h).
src_provider_libsdprovider_a_SOURCES += src/provider/gce/gce-client.h src/provider/gce/gce-client.c
# A Spot VM's life on Compute Engine: create, delete, list, preempted or not
# (gce-vm.h).
src_provider_libsdprovider_a_SOURCES += src/provider/gce/gce-vm.h src/provider/gce/gce-vm.c
# The gce provider: its API calls behind the lifecycle (gce.c).
src_provider_libsdprovider_a_SOURCES += src/provider/gce/gce.c

# ---- aws/: Spot instances on EC2 ----
# The EC2 Query API's XML answers, read with expat (aws-api.h).
src_provider_libsdprovider_a_SOURCES += src/provider/aws/aws-api.h src/provider/aws/aws-api.c
# The AWS credential chain: environment, ~/.aws/credentials, ~/.aws/config
# (aws-creds.h).
src_provider_libsdprovider_a_SOURCES += src/provider/aws/aws-creds.h src/provider/aws/aws-creds.c
# Signed EC2 Query API calls on the loop (aws-client.h).
src_provider_libsdprovider_a_SOURCES += src/provider/aws/aws-client.h src/provider/aws/aws-client.c
# A Spot instance's life on EC2: launch, terminate, list (aws-vm.h).
src_provider_libsdprovider_a_SOURCES += src/provider/aws/aws-vm.h src/provider/aws/aws-vm.c
# The aws provider: its API calls behind the lifecycle (aws.c).
src_provider_libsdprovider_a_SOURCES += src/provider/aws/aws.c
