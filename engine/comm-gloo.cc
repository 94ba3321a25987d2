// engine/comm-gloo.cc - the Gloo (TCP) backend of engine/comm.h, a C++ shim
// with a C interface (sd_comm_gloo_ops).
//
// Written against Debian's libgloo-dev 0.0~git20220518 (Gloo 0.5.0): the
// options-based collectives (gloo::allreduce with AllreduceOptions, which runs
// a segmented ring reduce-scatter + allgather; gloo::broadcast; gloo::barrier),
// gloo::rendezvous::Context::connectFullMesh and the TCP transport.
//
// No exception leaves this file: every entry point catches gloo::Exception
// and std::exception and turns them into a return code and a why message.
#include "config.h"

#include "engine/comm-backend.h"
extern "C" {
#include "src/base/errors.h"
}

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include <net/if.h>
#include <pthread.h>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

namespace {

// Error raised by StoreAdapter so that the C store's own return code
// (e.g. SD_COMM_ETIMEDOUT) survives the trip through connectFullMesh.
struct StoreError : public gloo::Exception {
	StoreError(int rc, const std::string &msg) : gloo::Exception(msg), code(rc) {}
	int code;
};

// Takes ownership of a C why message and returns it as a string.
std::string take_why(char *why, const char *fallback)
{
	std::string s = why ? why : fallback;
	free(why);
	return s;
}

// A gloo::rendezvous::Store over the caller's sd_store_ops.  Every key gets
// the generation prefix ("gen/<g>/"), and wait() keeps the values it fetched
// so that connectFullMesh's wait-then-get reads each key from the store once.
// Every get and wait ends by one deadline, timeout_ms after the adapter was
// made, whatever timeout Gloo passes: the rendezvous as a whole is bounded,
// not each of its (size - 1) waits.
class StoreAdapter : public gloo::rendezvous::Store {
public:
	StoreAdapter(const sd_store_ops *ops, void *ctx, std::string prefix, int timeout_ms)
		: ops_(ops), ctx_(ctx), prefix_(std::move(prefix)),
		  deadline_(std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms))
	{
	}

	void set(const std::string &key, const std::vector<char> &data) override
	{
		char *why = nullptr;
		std::string full = prefix_ + key;
		int rc = ops_->set(ctx_, full.c_str(), data.data(), data.size(), &why);
		if (rc < 0)
			throw StoreError(rc, "store set '" + full + "': " +
						     take_why(why, "failed"));
	}

	std::vector<char> get(const std::string &key) override
	{
		auto it = cache_.find(key);
		if (it != cache_.end()) {
			std::vector<char> v = std::move(it->second);
			cache_.erase(it);
			return v;
		}
		return fetch(key, left_ms());
	}

	void wait(const std::vector<std::string> &keys) override
	{
		for (const auto &key : keys)
			if (!cache_.count(key))
				cache_[key] = fetch(key, left_ms());
	}

	// Gloo passes its context's timeout, which gloo_create sets for the
	// pairs' connects (see there); the adapter's own deadline rules.
	void wait(const std::vector<std::string> &keys,
		  const std::chrono::milliseconds &timeout) override
	{
		(void)timeout;
		wait(keys);
	}

private:
	int left_ms() const
	{
		auto left = std::chrono::ceil<std::chrono::milliseconds>(
			deadline_ - std::chrono::steady_clock::now());
		return (int)std::max<long>(0, std::min<long>((long)left.count(), 0x7fffffff));
	}

	std::vector<char> fetch(const std::string &key, int timeout_ms)
	{
		char *why = nullptr;
		void *value = nullptr;
		size_t len = 0;
		std::string full = prefix_ + key;
		int rc = ops_->get(ctx_, full.c_str(), &value, &len, timeout_ms, &why);
		if (rc < 0)
			throw StoreError(rc, "store get '" + full + "': " +
						     take_why(why, "failed"));
		const char *p = static_cast<const char *>(value);
		std::vector<char> v(p, p + len);
		free(value);
		return v;
	}

	const sd_store_ops *ops_;
	void *ctx_;
	const std::string prefix_;
	const std::chrono::steady_clock::time_point deadline_;
	std::map<std::string, std::vector<char>> cache_;
};

// Blocks SIGPIPE in the calling thread while it lives.  Gloo's TCP pairs
// write with writev(2), which raises SIGPIPE when the peer has died; with
// the signal blocked the write fails with EPIPE instead and Gloo reports it.
// A SIGPIPE that became pending meanwhile is consumed before the old mask
// comes back (the same trick libcurl uses), so the caller never sees it.
// Threads created while the guard is up (Gloo's device loop) inherit the
// blocked mask for good.
class SigpipeGuard {
public:
	SigpipeGuard()
	{
		sigemptyset(&pipe_);
		sigaddset(&pipe_, SIGPIPE);
		sigset_t pending;
		sigemptyset(&pending);
		sigpending(&pending);
		was_pending_ = sigismember(&pending, SIGPIPE) == 1;
		pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
	}
	~SigpipeGuard()
	{
		if (!was_pending_) {
			sigset_t pending;
			sigemptyset(&pending);
			sigpending(&pending);
			if (sigismember(&pending, SIGPIPE) == 1) {
				struct timespec zero = {0, 0};
				sigtimedwait(&pipe_, nullptr, &zero);
			}
		}
		pthread_sigmask(SIG_SETMASK, &old_, nullptr);
	}
	SigpipeGuard(const SigpipeGuard &) = delete;
	SigpipeGuard &operator=(const SigpipeGuard &) = delete;

private:
	sigset_t pipe_;
	sigset_t old_;
	bool was_pending_;
};

struct GlooComm {
	std::shared_ptr<gloo::transport::Device> dev;
	std::shared_ptr<gloo::rendezvous::Context> ctx;
	int rank = 0;
	int size = 0;
	std::vector<char> scratch;   // the peer's half, for exchange_allreduce
};

// Gloo messages start with "[/full/build/path/gloo/transport/tcp/pair.cc:598] ";
// keep only the file name, and make the message one line.
std::string one_line(const char *what)
{
	std::string s = what ? what : "unknown error";
	if (!s.empty() && s[0] == '[') {
		size_t close = s.find(']');
		size_t slash = s.rfind('/', close);
		if (close != std::string::npos && slash != std::string::npos && slash < close)
			s = "[" + s.substr(slash + 1);
	}
	for (char &ch : s)
		if (ch == '\n' || ch == '\r')
			ch = ' ';
	return s;
}

// Maps the exception being handled to a return code and a why message.
// Must be called from inside a catch block.
int fail(const char *op, const GlooComm *g, char **why)
{
	int rank = g ? g->rank : -1, size = g ? g->size : -1;
	try {
		throw;
	} catch (const StoreError &e) {
		sd_why(why, "gloo %s (rank %d of %d): %s", op, rank, size, e.what());
		return e.code;
	} catch (const gloo::IoException &e) {
		sd_why(why, "gloo %s (rank %d of %d): %s", op, rank, size, one_line(e.what()).c_str());
		return SD_COMM_EPEER;
	} catch (const std::bad_alloc &) {
		sd_oom();
	} catch (const std::exception &e) {
		sd_why(why, "gloo %s (rank %d of %d): %s", op, rank, size, one_line(e.what()).c_str());
		return SD_COMM_EFAIL;
	} catch (...) {
		sd_why(why, "gloo %s (rank %d of %d): unknown C++ exception", op, rank, size);
		return SD_COMM_EFAIL;
	}
}

int gloo_create(void **impl, int rank, int world_size, const char *key_prefix,
		const sd_store_ops *store, void *store_ctx, int timeout_ms, char **why)
{
	*impl = nullptr;
	GlooComm *g = nullptr;
	try {
		SigpipeGuard guard;
		g = new GlooComm;
		g->rank = rank;
		g->size = world_size;

		gloo::transport::tcp::attr attr;
		const char *host = getenv("SPOTDECK_COMM_HOST");
		if (!host || !*host)
			attr.hostname = "127.0.0.1";
		else if (if_nametoindex(host) != 0)
			attr.iface = host; // bind to that interface's address
		else
			attr.hostname = host;
		g->dev = gloo::transport::tcp::CreateDevice(attr);

		g->ctx = std::make_shared<gloo::rendezvous::Context>(rank, world_size);
		// Gloo waits up to 5 x its timeout for each pair's TCP connection
		// ("a longer timeout when waiting for initial connect",
		// gloo/transport/tcp/pair.h, waitUntil), so a peer that died after
		// publishing its address held the others for 5 x timeout_ms.  Pairs
		// get a fifth; collectives, which take the context's timeout when
		// they start, get all of it.
		g->ctx->setTimeout(std::chrono::milliseconds(std::max(1, timeout_ms / 5)));
		StoreAdapter adapter(store, store_ctx, key_prefix, timeout_ms);
		g->ctx->connectFullMesh(adapter, g->dev);
		g->ctx->setTimeout(std::chrono::milliseconds(timeout_ms));
		*impl = g;
		return 0;
	} catch (...) {
		int rc = fail("rendezvous", g, why);
		delete g;
		return rc;
	}
}

// Element-wise sum for Gloo's reduce hook (picks the void* overload).
template <typename T> void sum_fn(void *c, const void *a, const void *b, size_t n)
{
	gloo::sum<T>(c, a, b, n);
}

// Slots of exchange_allreduce's two rounds: a prefix none of Gloo's own
// collectives uses (gloo/types.h has 0x01..0x0a), so its messages can never
// be taken for theirs.
constexpr uint8_t kExchangeSlotPrefix = 0xd5;

void wait_or_throw(bool ok, const char *what)
{
	if (!ok)
		throw gloo::IoException(std::string("exchange all-reduce: ") + what + " aborted");
}

// All-reduce of 2 ranks as one direct exchange each way (reduce-scatter then
// allgather of halves, i.e. recursive halving-doubling at world 2): rank r
// receives the peer's copy of half r, adds it to its own (own + peer, so
// both halves are summed once, and a + b == b + a in IEEE arithmetic: both
// ranks end with the same bits), and sends the sum back for the peer's copy.
// Two messages per rank of half the buffer, against the ring's segmented
// pipeline: 1.0-1.4 ms against 3.6 ms for the cnn's gradient (tests/bench/
// bench-allreduce, 2 ranks, loopback).  Gloo's own BCUBE does the
// same but waits with each pair's timeout, a fifth of ours (gloo_create),
// where every wait here takes the context's full timeout, as the ring does.
template <typename T> void exchange_allreduce(GlooComm *g, T *buf, size_t count)
{
	int peer = 1 - g->rank;
	size_t half = count / 2;
	size_t off[2] = { 0, half }, len[2] = { half, count - half };
	size_t mine = off[g->rank], n = len[g->rank];
	if (g->scratch.size() < n * sizeof(T))
		g->scratch.resize(n * sizeof(T));
	T *theirs = reinterpret_cast<T *>(g->scratch.data());
	auto timeout = g->ctx->getTimeout();
	auto slot = gloo::Slot::build(kExchangeSlotPrefix, 0);
	auto whole = g->ctx->createUnboundBuffer(buf, count * sizeof(T));
	auto tmp = g->ctx->createUnboundBuffer(theirs, std::max<size_t>(n, 1) * sizeof(T));
	if (n > 0)
		tmp->recv(peer, slot, 0, n * sizeof(T));
	if (len[peer] > 0)
		whole->send(peer, slot, off[peer] * sizeof(T), len[peer] * sizeof(T));
	if (n > 0)
		wait_or_throw(tmp->waitRecv(timeout), "receive");
	if (len[peer] > 0)
		wait_or_throw(whole->waitSend(timeout), "send");
	for (size_t i = 0; i < n; i++)
		buf[mine + i] = buf[mine + i] + theirs[i];
	if (len[peer] > 0)
		whole->recv(peer, slot + 1, off[peer] * sizeof(T), len[peer] * sizeof(T));
	if (n > 0)
		whole->send(peer, slot + 1, mine * sizeof(T), n * sizeof(T));
	if (len[peer] > 0)
		wait_or_throw(whole->waitRecv(timeout), "receive");
	if (n > 0)
		wait_or_throw(whole->waitSend(timeout), "send");
}

template <typename T> int gloo_allreduce(void *impl, T *buf, size_t count, char **why)
{
	GlooComm *g = static_cast<GlooComm *>(impl);
	try {
		SigpipeGuard guard;
		if (g->size == 2) {
			exchange_allreduce(g, buf, count);
			return 0;
		}
		gloo::AllreduceOptions opts(g->ctx);
		opts.setOutput<T>(buf, count);
		opts.setReduceFunction(&sum_fn<T>);
		// Ring above 2 ranks (2: exchange_allreduce).  BCUBE measured
		// 3.3-3.5 ms against the ring's 2.0-2.3 ms at world 3 and 4.5-5.2
		// against 6.2-6.9 at world 4 (cnn and resnet32 gradients, loopback,
		// bench-allreduce), but it waits with each pair's own
		// timeout, fixed when the pair was made, which gloo_create sets to a
		// fifth of the collective timeout while connecting (a stopped peer
		// failed the group after 0.42 s of a 2 s timeout); the ring takes the
		// context's full timeout, which the elastic fault handling relies on.
		opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
		gloo::allreduce(opts);
		return 0;
	} catch (...) {
		return fail("allreduce", g, why);
	}
}

int gloo_allreduce_f32(void *impl, float *buf, size_t count, char **why)
{
	return gloo_allreduce<float>(impl, buf, count, why);
}

int gloo_allreduce_f64(void *impl, double *buf, size_t count, char **why)
{
	return gloo_allreduce<double>(impl, buf, count, why);
}

int gloo_broadcast(void *impl, void *buf, size_t bytes, int root, char **why)
{
	GlooComm *g = static_cast<GlooComm *>(impl);
	try {
		SigpipeGuard guard;
		gloo::BroadcastOptions opts(g->ctx);
		opts.setOutput<unsigned char>(static_cast<unsigned char *>(buf), bytes);
		opts.setRoot(root);
		gloo::broadcast(opts);
		return 0;
	} catch (...) {
		return fail("broadcast", g, why);
	}
}

int gloo_barrier(void *impl, char **why)
{
	GlooComm *g = static_cast<GlooComm *>(impl);
	try {
		SigpipeGuard guard;
		gloo::BarrierOptions opts(g->ctx);
		gloo::barrier(opts);
		return 0;
	} catch (...) {
		return fail("barrier", g, why);
	}
}

// Closing our sockets makes every peer still blocked on us fail with a read
// error now, so one dead rank brings the whole group down in milliseconds
// instead of each survivor waiting out its own timeout.
void gloo_abort(void *impl)
{
	GlooComm *g = static_cast<GlooComm *>(impl);
	try {
		SigpipeGuard guard;
		if (g->ctx)
			g->ctx->closeConnections();
	} catch (...) {
		// Already broken; destroy will free what is left.
	}
}

void gloo_destroy(void *impl)
{
	GlooComm *g = static_cast<GlooComm *>(impl);
	try {
		SigpipeGuard guard;
		g->ctx.reset();
		g->dev.reset(); // joins the device's loop thread
	} catch (...) {
		// Destructors should not throw; nothing useful to do if they do.
	}
	delete g;
}

} // namespace

extern "C" const struct sd_comm_backend_ops sd_comm_gloo_ops = {
	"gloo",
	gloo_create,
	gloo_allreduce_f32,
	gloo_allreduce_f64,
	gloo_broadcast,
	gloo_barrier,
	gloo_abort,
	gloo_destroy,
};
