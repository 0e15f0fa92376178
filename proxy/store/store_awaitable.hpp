#pragma once
// Store operations as Asio awaitables for the request coroutine. The completion is posted to the
// coroutine's executor, so a store that answers inline never re-enters the caller.
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/post.hpp>
#include <memory>
#include <utility>

#include "store/store.hpp"

namespace idem::store {

namespace detail {
// Adapts a move-only Asio completion handler to the Store's copyable std::function callbacks.
template <class Handler>
auto shared_completion(Handler handler) {
  auto shared = std::make_shared<Handler>(std::move(handler));
  return [shared](auto... results) {
    auto executor = boost::asio::get_associated_executor(*shared);
    boost::asio::post(executor,
                      [shared, ... moved = std::move(results)]() mutable { std::move (*shared)(std::move(moved)...); });
  };
}
}  // namespace detail

template <class Token>
auto async_claim(store::Store& store, const store::ClaimRequest& request, Token&& token) {
  return boost::asio::async_initiate<Token, void(store::StoreError, core::ClaimResult)>(
      [&store, &request](auto handler) { store.claim(request, detail::shared_completion(std::move(handler))); }, token);
}

template <class Token>
auto async_complete(store::Store& store, const store::CompleteRequest& request, Token&& token) {
  return boost::asio::async_initiate<Token, void(store::StoreError)>(
      [&store, &request](auto handler) { store.complete(request, detail::shared_completion(std::move(handler))); },
      token);
}

template <class Token>
auto async_release(store::Store& store, const store::ReleaseRequest& request, Token&& token) {
  return boost::asio::async_initiate<Token, void(store::StoreError)>(
      [&store, &request](auto handler) { store.release(request, detail::shared_completion(std::move(handler))); },
      token);
}

template <class Token>
auto async_mark_unknown(store::Store& store, const store::ReleaseRequest& request, Token&& token) {
  return boost::asio::async_initiate<Token, void(store::StoreError)>(
      [&store, &request](auto handler) { store.mark_unknown(request, detail::shared_completion(std::move(handler))); },
      token);
}

template <class Token>
auto async_sweep_expired(store::Store& store, std::size_t batch, Token&& token) {
  return boost::asio::async_initiate<Token, void(store::StoreError, std::size_t)>(
      [&store, batch](auto handler) { store.sweep_expired(batch, detail::shared_completion(std::move(handler))); },
      token);
}

}  // namespace idem::store
