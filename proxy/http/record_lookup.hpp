#pragma once
// The record of one request's (scope, key), from the cheapest place that has it: the in-process
// replay cache, the shared (Redis) replay cache, then the store's claim, which takes the key when
// nobody holds it. The exchange decides on what this finds (core::decide) and never asks where a
// finished record came from except to label the replay.
//
// One per exchange, used on the worker's io thread, until the claim it made is handed on to the
// ClaimedRecord that settles it (claimed_record.hpp), which takes the lookup along. Finished
// records the store returns are copied into the caches here, and so is this request's own
// completion once the store confirmed it: a finished record is immutable until it expires, so any
// copy is as good as the store's.
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "core/decision.hpp"
#include "cache/replay_cache.hpp"
#include "http/request_trace.hpp"
#include "http/runtime.hpp"
#include "store/store.hpp"

namespace idem::http {

enum class RecordSource { local_cache, shared_cache, store };

struct FoundRecord {
  store::StoreError error = store::StoreError::ok;  // not ok: the claim failed, nothing else is meaningful
  // This process is still settling the key's record in the background (pending_settlements.hpp):
  // the store was not asked, nothing else is meaningful.
  bool settle_pending = false;
  RecordSource source = RecordSource::store;
  // What decide() reads. For a cache hit: not claimed, and `existing` carries the fingerprint,
  // state and status only; the response to replay is `cached`'s.
  core::ClaimResult claim;
  std::shared_ptr<const cache::CachedRecord> cached;  // a cache hit's copy

  const core::StoredResponse& response() const { return cached ? cached->response : claim.existing.response; }
};

class RecordLookup {
 public:
  using Clock = std::chrono::steady_clock;

  // `claim` and `trace` must outlive the lookup; store time is added to `trace.store`. The claim's
  // owner token is drawn here, when the claim first goes to the store: a cache hit needs none.
  RecordLookup(WorkerServices& services, store::ClaimRequest& claim, RequestTrace& trace);

  // In-process cache, Redis (which answers within its deadline or not at all: either way the store
  // decides next), then the claim, unless this process is still settling the key. A finished record the claim returns
  // is offered to Redis too, so the other proxies find it there.
  boost::asio::awaitable<FoundRecord> find();
  // The in-process cache's entry for the claim's (scope, key), or nullptr, before find(): the
  // exchange reads the entry's fingerprint inputs, and find() answers from the same entry.
  const cache::CachedRecord* find_local();
  // The claim alone: a waiting duplicate's poll. A finished record it returns goes to the
  // in-process cache only (Redis gets it from the request that completes it).
  boost::asio::awaitable<FoundRecord> poll();

  // This request's completion, confirmed by the store: cached in-process (with the request's
  // fingerprint inputs, empty when not kept) and offered to Redis (without them).
  void remember_completion(core::RecordState state, const core::StoredResponse& response,
                           std::string fingerprint_inputs);

  // When the last claim went out: the lease and the expiry are measured from here (a lower bound).
  Clock::time_point claim_sent_at() const { return claim_sent_at_; }
  // The claim it makes (its owner token drawn with the first claim that went to the store).
  const store::ClaimRequest& claim() const { return claim_; }

 private:
  boost::asio::awaitable<FoundRecord> claim_in_store(bool share);
  void remember_if_finished(const core::ClaimResult& claimed, bool share);

  WorkerServices& services_;
  store::ClaimRequest& claim_;
  RequestTrace& trace_;
  Clock::time_point claim_sent_at_{};
  // What find_local() found (perhaps nothing), until find() takes it; empty: not looked up yet.
  std::optional<std::shared_ptr<const cache::CachedRecord>> local_;
};

}  // namespace idem::http
