#include "http/record_settlement.hpp"

#include <algorithm>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <memory>
#include <utility>

#include "crypto/sha256.hpp"
#include "http/pending_settlements.hpp"
#include "log/log.hpp"

namespace idem::http {
namespace asio = boost::asio;
using asio::use_awaitable;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

// A release or a completion in the background means this process knows the key's outcome (never
// ran, or its response) and the store does not yet: retries wait for it (pending_settlements.hpp).
// A mark_unknown does not: the record already answers what it will say, outcome unknown.
bool holds_key(core::OwnerWrite write) { return write != core::OwnerWrite::mark_unknown; }

void start_owner_write(store::Store& store, const OwnerWriteRequest& request, store::DoneHandler done) {
  const store::ReleaseRequest owned{request.complete.scope, request.complete.key, request.complete.owner,
                                    request.complete.ttl, request.unknown_retention};
  switch (request.write) {
    case core::OwnerWrite::complete: store.complete(request.complete, std::move(done)); return;
    case core::OwnerWrite::release: store.release(owned, std::move(done)); return;
    case core::OwnerWrite::mark_unknown: store.mark_unknown(owned, std::move(done)); return;
  }
}

template <typename CompletionToken>
auto async_owner_write(store::Store& store, const OwnerWriteRequest& request, CompletionToken&& token) {
  return asio::async_initiate<CompletionToken, void(store::StoreError)>(
      [&store, &request](auto handler) {
        start_owner_write(store, request,
                          [handler = std::make_shared<decltype(handler)>(std::move(handler))](
                              store::StoreError error) mutable { (*handler)(error); });
      },
      token);
}

asio::awaitable<void> retry_until_settled(WorkerServices& services, OwnerWriteRequest request,
                                          Clock::time_point horizon, std::string route) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  milliseconds delay{100};
  store::StoreError error = store::StoreError::unavailable;
  core::OwnerWriteNext next = core::OwnerWriteNext::retry;
  int attempts = 0;
  while (next == core::OwnerWriteNext::retry && Clock::now() + delay < horizon) {
    timer.expires_after(delay);
    co_await timer.async_wait(asio::as_tuple(use_awaitable));
    error = co_await async_owner_write(services.store, request, use_awaitable);
    ++attempts;
    next = core::after_owner_write(request.write, error);
    delay = std::min(delay * 2, milliseconds{2'000});
  }
  const std::string event = std::string(core::owner_write_name(request.write));
  if (next == core::OwnerWriteNext::done) {
    log::info(event + "_recovered", {{"route", route},
                                     {"key_sha256", key_hash(request.complete.key)},
                                     {"attempts", attempts},
                                     {"store", store::store_error_name(error)}});
  } else {
    // complete: the client had its response, but it is not stored; a retry finds the record in
    // flight, then lapsed (unknown). release/mark_unknown: the record stays in flight until its
    // lease lapses, then reads as unknown (lock) or is taken over (retry).
    log::error(event + "_abandoned", {{"route", route},
                                      {"key_sha256", key_hash(request.complete.key)},
                                      {"attempts", attempts},
                                      {"error", store::store_error_name(error)}});
  }
  if (holds_key(request.write)) services.pending_settlements.remove(request.complete.scope, request.complete.key);
  services.background.finished();
}

}  // namespace

OwnerWriteRequest owner_write_request(const store::ClaimRequest& claim, core::OwnerWrite write,
                                      std::chrono::milliseconds unknown_retention) {
  OwnerWriteRequest owned;
  owned.write = write;
  owned.complete.scope = claim.scope;
  owned.complete.key = claim.key;
  owned.complete.owner = claim.owner;
  owned.complete.ttl = claim.ttl;
  owned.unknown_retention = unknown_retention;
  return owned;
}

asio::awaitable<store::StoreError> send_owner_write(store::Store& store, const OwnerWriteRequest& request) {
  co_return co_await async_owner_write(store, request, use_awaitable);
}

void settle_in_background(WorkerServices& services, const asio::any_io_executor& executor, OwnerWriteRequest request,
                          Clock::time_point horizon, std::string route) {
  services.background.started();
  if (holds_key(request.write)) services.pending_settlements.add(request.complete.scope, request.complete.key);
  asio::co_spawn(executor, retry_until_settled(services, std::move(request), horizon, std::move(route)),
                 asio::detached);
}

std::string key_hash(std::string_view key) { return crypto::to_hex(crypto::sha256(key)).substr(0, 16); }

}  // namespace idem::http
