/* src/provider/gce/gce-client.h - authorised Compute Engine calls on the loop:
 * an OAuth2 access token kept fresh, and each request sent with it.
 *
 * Where the token comes from (cloud-apis.md section 1, "Auth."):
 *   - a service-account key file (gce-auth.h): a signed JWT is exchanged at
 *     the key's token_uri;
 *   - otherwise the metadata server of the VM the controller runs on:
 *     GET http://HOST/computeMetadata/v1/instance/service-accounts/default/token
 *     with "Metadata-Flavor: Google", HOST being $GCE_METADATA_HOST (the
 *     override Google's own libraries honour) or metadata.google.internal;
 *   - or, when the config names a gcloud program, the login of the person
 *     running spotdeck: `GCLOUD config config-helper --format=json` (what
 *     google-auth-library-python runs for a gcloud login; it prints the
 *     token with its expiry, where `gcloud auth print-access-token` prints
 *     the token alone), run on the loop with stdin from /dev/null, given
 *     60 s before it gets SIGTERM (a prompt it cannot show).  gcloud
 *     refreshes its own login; it is asked again before the expiry it gave.
 *     The token comes on gcloud's stdout, never on a command line.
 * The token is fetched once for all the calls that wait for it, renewed
 * before it lapses (SD_GCE_TOKEN_REFRESH_MARGIN), and a call answered 401
 * fetches a new one and is sent once more.  The token only ever travels in
 * the Authorization header, which the HTTP layer never logs.
 *
 * Threads: the loop's thread only, like http.h. */
#ifndef SD_PROVIDER_GCE_GCE_CLIENT_H
#define SD_PROVIDER_GCE_GCE_CLIENT_H

#include <stddef.h>

#include "src/provider/http/http.h"

struct sd_gce_client;

struct sd_gce_client_config {
	const char *project;       /* required */
	const char *compute_root;  /* NULL: SD_GCE_COMPUTE_ROOT (gce-api.h); a fake's
	                            * "http://127.0.0.1:PORT/compute/v1" in the tests */
	const char *key_file;      /* service-account key JSON; NULL: the metadata server */
	const char *metadata_host; /* NULL: $GCE_METADATA_HOST, else metadata.google.internal */
	const char *gcloud;        /* the gcloud program ("gcloud": found on PATH) to take the
	                            * token from; NULL: not used.  Ignored with a key_file. */
};

/* A client sending through HTTP (borrowed; it must outlive the client).
 * Loads and checks the key file now, so a bad or world-readable key is
 * refused here with gce-auth.h's message.  NULL with ERR on failure. */
struct sd_gce_client *sd_gce_client_new(struct sd_http *http, const struct sd_gce_client_config *cfg,
					char *err, size_t errlen);

/* Ends every call still waiting for a token (their callbacks run with
 * cancelled = 1) and frees the client.  Calls already handed to the HTTP
 * layer still point at the client: free it when none is in flight, or
 * after sd_http_close has ended them. */
void sd_gce_client_free(struct sd_gce_client *c);

/* ROOT/projects/PROJECT/PATH into OUT ("zones/us-central1-a/instances").
 * -1 when it does not fit. */
int sd_gce_url(const struct sd_gce_client *c, const char *path, char *out, size_t outlen);

/* Sends METHOD URL (absolute) with BODY (JSON, NULL: none) and a token;
 * CB as in http.h.  IDEMPOTENT as in sd_http_request (an insert or delete
 * is idempotent only with a requestId in the URL).  When no token can be
 * had, CB gets status 0 and the error "token: ...".  0, or -1 with ERR
 * (a malformed request; nothing was queued). */
int sd_gce_call(struct sd_gce_client *c, const char *label, const char *method, const char *url,
		const char *body, int idempotent, sd_http_cb cb, void *arg, char *err, size_t errlen);

/* The HTTP client it sends through (and so its loop: sd_http_loop). */
struct sd_http *sd_gce_client_http(const struct sd_gce_client *c);

/* Who the calls run as: the key's client_email, gcloud's account once a
 * token is had ("gcloud's active account" before), or "the metadata
 * server's default service account". */
const char *sd_gce_client_identity(const struct sd_gce_client *c);

/* Seconds the current token has left (uv_now clock), or -1 when none has
 * been had yet. */
double sd_gce_client_token_left(const struct sd_gce_client *c);

#endif
