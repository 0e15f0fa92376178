#include "http/record_lookup.hpp"

#include <boost/asio/async_result.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <utility>

#include "http/pending_settlements.hpp"
#include "http/proxy_metrics.hpp"
#include "cache/shared_replay_cache.hpp"
#include "crypto/sha256.hpp"
#include "store/store_awaitable.hpp"

// Note for every co_await in this file: arguments are named values, never braced temporaries
// (GCC 12 destroys some temporaries of a co_await full-expression twice).

namespace idem::http {
namespace asio = boost::asio;
using asio::use_awaitable;

namespace {

// SharedReplayCache::lookup() as an Asio awaitable (its handler runs on the worker's thread).
template <class Token>
auto async_shared_lookup(cache::SharedReplayCache& cache, std::string_view scope, std::string_view key, Token&& token) {
  return asio::async_initiate<Token, void(cache::SharedLookup)>(
      [&cache, scope, key](auto handler) {
        cache.lookup(scope, key, store::detail::shared_completion(std::move(handler)));
      },
      token);
}

FoundRecord from_cache(const std::shared_ptr<const cache::CachedRecord>& cached, RecordSource source) {
  FoundRecord found;
  found.source = source;
  found.claim.existing.fingerprint = cached->fingerprint;
  found.claim.existing.state = cached->state;
  found.claim.existing.response.status = cached->response.status;
  found.cached = cached;
  return found;
}

}  // namespace

RecordLookup::RecordLookup(WorkerServices& services, store::ClaimRequest& claim, RequestTrace& trace)
    : services_(services), claim_(claim), trace_(trace) {}

const cache::CachedRecord* RecordLookup::find_local() {
  local_ = services_.cache.find(claim_.scope, claim_.key);
  return local_->get();
}

asio::awaitable<FoundRecord> RecordLookup::find() {
  const std::shared_ptr<const cache::CachedRecord> cached =
      local_ ? std::move(*local_) : services_.cache.find(claim_.scope, claim_.key);
  local_.reset();
  if (cached) {
    trace_.cache_hit = true;
    co_return from_cache(cached, RecordSource::local_cache);
  }
  if (services_.shared_cache != nullptr) {
    const cache::SharedLookup shared =
        co_await async_shared_lookup(*services_.shared_cache, claim_.scope, claim_.key, use_awaitable);
    if (shared.outcome == cache::SharedLookupOutcome::hit) {
      services_.cache.insert(claim_.scope, claim_.key, shared.record);
      co_return from_cache(shared.record, RecordSource::shared_cache);
    }
  }
  co_return co_await claim_in_store(true);
}

asio::awaitable<FoundRecord> RecordLookup::poll() { co_return co_await claim_in_store(false); }

asio::awaitable<FoundRecord> RecordLookup::claim_in_store(bool share) {
  if (services_.pending_settlements.contains(claim_.scope, claim_.key)) {
    FoundRecord pending;
    pending.settle_pending = true;
    co_return pending;
  }
  if (claim_.owner.empty()) claim_.owner = crypto::random_token();
  claim_sent_at_ = Clock::now();
  auto [error, claimed] = co_await store::async_claim(services_.store, claim_, use_awaitable);
  const auto elapsed = std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - claim_sent_at_);
  trace_.store += elapsed;
  services_.metrics.observe_store("claim", elapsed);
  FoundRecord found;
  found.error = error;
  if (error == store::StoreError::ok) {
    remember_if_finished(claimed, share);
    found.claim = std::move(claimed);
  }
  co_return found;
}

void RecordLookup::remember_if_finished(const core::ClaimResult& claimed, bool share) {
  const core::Record& record = claimed.existing;
  if (claimed.claimed) return;
  if (record.state != core::RecordState::completed && record.state != core::RecordState::too_large) return;
  const bool to_shared = share && services_.shared_cache != nullptr;
  if (!services_.cache.enabled() && !to_shared) return;
  auto cached = std::make_shared<cache::CachedRecord>();
  cached->fingerprint = record.fingerprint;
  cached->state = record.state;
  cached->response = record.response;
  // expires_in is the store's, measured when the claim ran: after claim_sent_at_.
  cached->expires_at = claim_sent_at_ + record.expires_in;
  if (to_shared) services_.shared_cache->put(claim_.scope, claim_.key, cached);
  services_.cache.insert(claim_.scope, claim_.key, std::move(cached));
}

void RecordLookup::remember_completion(core::RecordState state, const core::StoredResponse& response,
                                       std::string fingerprint_inputs) {
  if (!services_.cache.enabled() && services_.shared_cache == nullptr) return;
  auto cached = std::make_shared<cache::CachedRecord>();
  cached->fingerprint = claim_.fingerprint;
  cached->state = state;
  cached->response = response;
  // The store set expires_at from its clock when the claim arrived, after claim_sent_at_.
  cached->expires_at = claim_sent_at_ + claim_.ttl;
  // Redis's layout (cache/redis_record.hpp) has no place for the inputs: they stay in-process.
  cached->fingerprint_inputs = std::move(fingerprint_inputs);
  // Fire and forget: the write goes out now, the client's response does not wait for it.
  if (services_.shared_cache != nullptr) services_.shared_cache->put(claim_.scope, claim_.key, cached);
  services_.cache.insert(claim_.scope, claim_.key, std::move(cached));
}

}  // namespace idem::http
