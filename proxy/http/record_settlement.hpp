#pragma once
// The writes that settle a record this request claimed (complete, release, mark_unknown), and
// their background retries. Every owner write is fenced by the claim's owner token and idempotent
// for that owner (core/failure_policy.hpp), so one the store did not confirm is simply run again.
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <chrono>
#include <string>
#include <string_view>

#include "core/failure_policy.hpp"
#include "http/runtime.hpp"
#include "store/store.hpp"

namespace idem::http {

// One owner write, as the store takes it.
struct OwnerWriteRequest {
  core::OwnerWrite write = core::OwnerWrite::release;
  store::CompleteRequest complete;  // scope, key and owner for every write; state and response for complete
  std::chrono::milliseconds unknown_retention{0};  // mark_unknown
};

// The owner write `write` on the record `claim` took.
OwnerWriteRequest owner_write_request(const store::ClaimRequest& claim, core::OwnerWrite write,
                                      std::chrono::milliseconds unknown_retention);

// Sends it once; the store's answer.
boost::asio::awaitable<store::StoreError> send_owner_write(store::Store& store, const OwnerWriteRequest& request);

// Runs it again and again on `executor` with capped backoff until the store settles it or
// `horizon` (the record's life, from the claim) passes; logs <write>_recovered or
// <write>_abandoned. Counted in services.background, so a drain waits for it.
void settle_in_background(WorkerServices& services, const boost::asio::any_io_executor& executor,
                          OwnerWriteRequest request, std::chrono::steady_clock::time_point horizon, std::string route);

// Logs never carry the raw key (it may be guessable or sensitive): the first 16 hex digits of its SHA-256.
std::string key_hash(std::string_view key);

}  // namespace idem::http
