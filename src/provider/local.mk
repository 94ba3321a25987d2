# src/provider/: where servers come from — provider.h (the ops table every
# provider fills in, its typed events, the registry), the fleet (fleet.c:
# ids, states, billing, journal; launcher.c: worker processes) and the
# providers themselves (sim.c: the simulated market; ssh.c with hosts.c:
# your own hosts over OpenSSH).  Includes market/,
# proto/ and engine/.
noinst_LIBRARIES += src/provider/libsdprovider.a
src_provider_libsdprovider_a_SOURCES = src/provider/provider.h src/provider/fleet.h \
	src/provider/fleet-internal.h src/provider/fleet.c src/provider/launcher.c \
	src/provider/registry.c src/provider/sim.c \
	src/provider/ssh.h src/provider/ssh.c
src_provider_libsdprovider_a_CPPFLAGS = $(AM_CPPFLAGS) $(UV_CFLAGS) $(CJSON_CFLAGS) $(CURL_CFLAGS) \
	$(CRYPTO_CFLAGS) $(EXPAT_CFLAGS) $(INIH_CFLAGS)
# libcurl, libcrypto, expat, inih: the cloud providers' HTTP, tokens,
# signatures, EC2's XML and the AWS credentials files.
SD_PROVIDER_LIBS = src/provider/libsdprovider.a $(CURL_LIBS) $(CRYPTO_LIBS) $(EXPAT_LIBS) $(INIH_LIBS)
# The ssh provider's hosts file (hosts.h; man/spotdeck-hosts.5).
src_provider_libsdprovider_a_SOURCES += src/provider/hosts.h src/provider/hosts.c
# HTTP on the loop for the cloud providers (http.h: libcurl multi driven
# by libuv, retries with back-off).
src_provider_libsdprovider_a_SOURCES += src/provider/http.h src/provider/http.c
# The Compute Engine v1 bodies of the gce provider (gce-api.h).
src_provider_libsdprovider_a_SOURCES += src/provider/gce-api.h src/provider/gce-api.c
# A Spot VM's price from the Cloud Billing Catalog, and its cache (gce-price.h).
src_provider_libsdprovider_a_SOURCES += src/provider/gce-price.h src/provider/gce-price.c
# Reading a file that holds a secret, and the one-line error (secret-file.h).
src_provider_libsdprovider_a_SOURCES += src/provider/secret-file.h src/provider/secret-file.c
# GCE service-account credentials: key file, JWT assertion, token answer
# (gce-auth.h; signed with libcrypto).
src_provider_libsdprovider_a_SOURCES += src/provider/gce-auth.h src/provider/gce-auth.c
# AWS Signature Version 4 for the EC2 Query API (sigv4.h), with libcrypto.
src_provider_libsdprovider_a_SOURCES += src/provider/sigv4.h src/provider/sigv4.c
# Compute Engine calls with an OAuth2 token kept fresh (gce-client.h).
src_provider_libsdprovider_a_SOURCES += src/provider/gce-client.h src/provider/gce-client.c
# A Spot VM's life on Compute Engine: create, delete, list, preempted or not
# (gce-vm.h).
src_provider_libsdprovider_a_SOURCES += src/provider/gce-vm.h src/provider/gce-vm.c
# The EC2 Query API's XML answers, read with expat (ec2-api.h).
src_provider_libsdprovider_a_SOURCES += src/provider/ec2-api.h src/provider/ec2-api.c
# A Spot instance's life on EC2: launch, terminate, list (ec2-vm.h).
src_provider_libsdprovider_a_SOURCES += src/provider/ec2-vm.h src/provider/ec2-vm.c
# The AWS credential chain: environment, ~/.aws/credentials, ~/.aws/config
# (aws-creds.h).
src_provider_libsdprovider_a_SOURCES += src/provider/aws-creds.h src/provider/aws-creds.c
# Signed EC2 Query API calls on the loop (aws-client.h).
src_provider_libsdprovider_a_SOURCES += src/provider/aws-client.h src/provider/aws-client.c
# What the cloud providers share: settings, journal, run label (cloud-vm.h).
src_provider_libsdprovider_a_SOURCES += src/provider/cloud-vm.h src/provider/cloud-vm.c
# The gce provider: Spot VMs on Compute Engine, the worker over ssh (gce.c).
src_provider_libsdprovider_a_SOURCES += src/provider/gce.c
# The aws provider: Spot instances on EC2, the worker over ssh (aws.c).
src_provider_libsdprovider_a_SOURCES += src/provider/aws.c
