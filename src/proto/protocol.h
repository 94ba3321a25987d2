/* src/proto/protocol.h - the control-plane wire protocol between the controller and
 * its workers: newline-delimited JSON, one object per line, each with a
 * string field "type" (DESIGN.md, "Control plane").
 *
 * A connection starts with the worker's hello (protocol version, the shared
 * token, its server id and pid); the controller answers welcome (the worker
 * id and the whole job, see job.h) or error and closes.  Lines are at most
 * SD_PROTO_LINE_MAX bytes; anything longer, anything that is not a known
 * message with its required fields, closes the connection.
 *
 * Messages and their required fields (int: integral JSON number within the
 * int64 range; num: finite JSON number; str: string; obj: object; arr:
 * array).  Extra fields are allowed and ignored by the decoder; the optional
 * ones in [brackets] below are read when present.
 *   hello        version int, token str, server_id str, pid int
 *                [rejoin bool: connecting again after the controller
 *                dropped this worker]
 *   welcome      version int, worker_id str, job obj
 *                [heartbeat_ms int: send heartbeat this often;
 *                model_sha256 str, model_bytes int: the job's model is an
 *                ONNX file (its "model" ends in .onnx) of that many bytes
 *                with that SHA-256 (lower-case hex); the path in the job
 *                is the controller's and means nothing on the worker's
 *                host: the worker asks for the bytes with model_get]
 *   kv_set       key str, value str            (value: hex, sd_hex_encode)
 *   kv_get       id int, key str
 *   kv_value     id int, key str, value str
 *   generation   generation int, rank int, world_size int, offset int,
 *                count int, members arr
 *                [timeout_ms int: bounds this generation's rendezvous and
 *                every collective; see "Liveness" in controller.h]
 *   joined       generation int, step int
 *   step         generation int, step int, rank int, samples int,
 *                loss_sum num, correct int, compute_ms num, comm_ms num,
 *                images_per_sec num  [world_size int]
 *   comm_failed  generation int, step int, reason str
 *   leaving      reason str, step int  [left_at num: the worker's wall
 *                clock (Unix seconds) when it left, after its last step]
 *   ckpt_chunk   step int, offset int, total int, data str  (data: hex)
 *   stop         reason str
 *   error        reason str  [rejoin bool: the controller dropped this
 *                worker (it went silent) and takes it back if it connects
 *                again]
 *   log          level str, message str
 *   notice       seconds num
 *   checkpoint   (none)  controller -> rank 0: checkpoint after this step
 *                [reason str: "operator" (default) or "final" (the run
 *                quits after it)]
 *   pause        (none)  controller -> workers: leave the generation at the
 *                next step boundary and wait for a new one
 *   ready        worker -> controller: job loaded, can join (optional
 *                backend str, device str, backend_reason str:
 *                where the worker computes, engine/backend.h;
 *                precision str ("fp32", "bf16"), precision_reason str:
 *                the job's precision as resolved there, engine/train.h)
 *   abort        generation int  controller -> members: a collective of
 *                that generation failed on another member; give up on it
 *                (send comm_failed) instead of waiting out the timeout
 *   heartbeat    (none)  worker -> controller, every heartbeat_ms from a
 *                thread of its own, whatever the worker is doing: the
 *                controller drops a worker it has not heard from for longer
 *                than the current generation's timeout (a stopped or frozen
 *                process, a dead link), see controller.h
 *   cloud_notice source str ("gce", "aws", "azure"), event str (what said
 *                it: "preempted", "maintenance-event", "instance-action",
 *                "Preempt"), seconds num (until the server goes; -1
 *                unknown)  [deadline str: the cloud's own time string;
 *                detail str: AWS action, Azure EventId; step int: steps
 *                the worker had completed when it heard it]  worker ->
 *                controller, from the notice watcher's thread as soon as
 *                the metadata service says so (src/worker/notice-watch.h);
 *                the worker then leaves at its next step boundary
 *   cloud_warning source str, event str ("rebalance")  [deadline str,
 *                seconds num]  worker -> controller: a risk hint, the
 *                worker stays
 *   model_get    sha256 str  worker -> controller, after the welcome and
 *                before ready: send me the model file with this SHA-256
 *                (the welcome's model_sha256; any other is refused and the
 *                connection closed)
 *   model_chunk  sha256 str, offset int, total int, data str (data: hex)
 *                controller -> worker: the model file's bytes
 *                [offset, offset + len) of total (the welcome's
 *                model_bytes), in order, at most SD_MODEL_CHUNK bytes
 *                each, sent as the connection drains (as the checkpoint
 *                stream is); the worker checks the whole file's SHA-256
 *                against sha256 before it builds the model (sd_model_rx)
 * Further checks: kv_* keys are at most SD_PROTO_KEY_MAX bytes; generation,
 * rank, world_size, offset, count and total are never negative; in a
 * generation message rank < world_size; in a ckpt_chunk or model_chunk
 * offset <= total; a model_get's or model_chunk's sha256 is 64 hex digits.
 */
#ifndef SD_PROTO_PROTOCOL_H
#define SD_PROTO_PROTOCOL_H

#include <stddef.h>

#include <cJSON.h>

#include "src/base/hex.h"
#include "src/base/line-reader.h"

/* 2: a step's metrics ride in the gradient all-reduce (worker-agent.c's
 * gen_allreduce), so workers of version 1 and 2 cannot share a generation.
 * 3: the gradients go in buckets that overlap backward, the metrics with
 * the last (engine/grad-sync.h, the job's bucket_kib): a step is several
 * collectives, not one.  The controller refuses a hello of another
 * version.
 * 4: the welcome names the ONNX model's bytes (model_sha256, model_bytes)
 * and the worker fetches them with model_get / model_chunk: a version-3
 * worker would open the job's path, which is the controller's. */
#define SD_PROTO_VERSION 4
#define SD_PROTO_LINE_MAX (1u << 20)   /* bytes per line incl. newline; longer = protocol error */
#define SD_PROTO_KEY_MAX 256           /* bytes per kv_* key */

enum sd_msg_type { SD_MSG_HELLO, SD_MSG_WELCOME, SD_MSG_KV_SET, SD_MSG_KV_GET, SD_MSG_KV_VALUE, SD_MSG_GENERATION, SD_MSG_JOINED, SD_MSG_STEP, SD_MSG_COMM_FAILED, SD_MSG_LEAVING, SD_MSG_CKPT_CHUNK, SD_MSG_STOP, SD_MSG_ERROR, SD_MSG_LOG, SD_MSG_NOTICE, SD_MSG_CHECKPOINT, SD_MSG_PAUSE, SD_MSG_READY, SD_MSG_HEARTBEAT, SD_MSG_ABORT, SD_MSG_CLOUD_NOTICE, SD_MSG_CLOUD_WARNING, SD_MSG_MODEL_GET, SD_MSG_MODEL_CHUNK, SD_MSG__COUNT };
/* The wire name ("hello", "kv_set", ...); "?" for a value out of range. */
const char *sd_msg_type_name(enum sd_msg_type t);
/* Looks a wire name up; returns 0 and *t, or -1. */
int sd_msg_type_parse(const char *name, enum sd_msg_type *t);

/* Decodes one line (without its newline; a trailing newline or whitespace is
 * tolerated): must be a JSON object, len <= SD_PROTO_LINE_MAX, with a string
 * "type" among the known types, and the required fields of that type present
 * with the right JSON types (table above; extra fields are allowed).  Returns
 * 0 with *type and *obj (caller frees with cJSON_Delete) or -1 with *why (and
 * *obj NULL), e.g. "invalid JSON at byte 17" (1-based), "unknown message type
 * 'foo'", "step: field 'loss_sum' must be a number", "hello: protocol
 * version 2, this controller speaks 1" (the version check is made for hello,
 * which the controller reads, and welcome, which the worker reads).  Never
 * crashes on any input; NUL bytes are rejected as invalid JSON. */
int sd_msg_decode(const char *line, size_t len, enum sd_msg_type *type, cJSON **obj, char **why);
/* Serialises obj compactly plus '\n'; returns a malloc'd NUL-terminated
 * string of *len bytes (the newline included).  Aborts via sd_oom on OOM.
 * The caller keeps lines within SD_PROTO_LINE_MAX (hex payloads in chunks). */
char *sd_msg_encode(const cJSON *obj, size_t *len);
/* Creates {"type": NAME} to which the caller adds fields (caller frees with
 * cJSON_Delete); NULL for a type out of range.  Aborts via sd_oom on OOM. */
cJSON *sd_msg_new(enum sd_msg_type t);
/* Field getters for decoded (hence validated) messages: the field's value, or
 * dflt when it is absent or of another type (for sd_msg_int also when it is
 * not an integral number within the int64 range). */
long long sd_msg_int(const cJSON *obj, const char *field, long long dflt);
double sd_msg_num(const cJSON *obj, const char *field, double dflt);
const char *sd_msg_str(const cJSON *obj, const char *field, const char *dflt);

/* The model file's bytes at the worker's end of model_chunk: assembled in
 * order and checked against the welcome's SHA-256 and size.  Bytes per
 * chunk the controller sends (hex doubles them: a line stays well under
 * SD_PROTO_LINE_MAX), and the largest model the wire carries (the ONNX
 * loader's own bound, engine/onnx.h). */
#define SD_MODEL_CHUNK (256u * 1024u)
#define SD_MODEL_WIRE_MAX ((long long)1 << 30)
struct sd_model_rx {
	char sha256[65];       /* what the welcome named */
	size_t total, len;     /* bytes expected, bytes received so far */
	unsigned char *buf;    /* total bytes, malloc'd; NULL before begin */
};
/* Starts receiving a model of total bytes (1 to SD_MODEL_WIRE_MAX) whose
 * SHA-256 is sha256 (64 hex digits).  0, or -1 with *why. */
int sd_model_rx_begin(struct sd_model_rx *rx, const char *sha256, long long total, char **why);
/* Takes one decoded model_chunk.  Returns 0 when more is needed, 1 when the
 * whole file is in rx->buf and its SHA-256 is the one named, or -1 with *why
 * (one line: a chunk for another model, one out of order or beyond the end,
 * data that is not hex, a total unlike the welcome's, or bytes whose
 * SHA-256 is not the one named: corrupted in transit). */
int sd_model_rx_chunk(struct sd_model_rx *rx, const cJSON *chunk, char **why);
/* Frees rx->buf and clears rx. */
void sd_model_rx_free(struct sd_model_rx *rx);

#endif
