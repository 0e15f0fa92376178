#pragma once
// A TLS half-close: sends close_notify and nothing more, so the peer reads the end of our stream
// while its own direction goes on (RFC 8446 §6.1: each side closes its sending side; OpenSSL reads
// on after sending one). Asio's async_shutdown would then wait for the peer's close_notify, reading
// and discarding the application data still on its way, and would compete with a read already
// pending on the stream. So the shutdown is started with the peer's close_notify marked as received:
// OpenSSL then writes its own alert and reports the shutdown done, Asio only flushes the alert;
// the mark is taken back at once, before any read can see it (the start runs synchronously, and
// every later step of the stream runs on the same executor).
#include <openssl/ssl.h>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>
#include <tuple>
#include <utility>

namespace idem::wire {

template <class SslStream>
boost::asio::awaitable<std::tuple<boost::system::error_code>> send_close_notify(SslStream& stream) {
  constexpr auto token = boost::asio::as_tuple(boost::asio::use_awaitable);
  return boost::asio::async_initiate<decltype(token), void(boost::system::error_code)>(
      [&stream](auto handler) {
        SSL* ssl = stream.native_handle();
        const int received = SSL_get_shutdown(ssl) & SSL_RECEIVED_SHUTDOWN;
        SSL_set_shutdown(ssl, SSL_get_shutdown(ssl) | SSL_RECEIVED_SHUTDOWN);
        stream.async_shutdown(std::move(handler));
        SSL_set_shutdown(ssl, (SSL_get_shutdown(ssl) & ~SSL_RECEIVED_SHUTDOWN) | received);
      },
      token);
}

}  // namespace idem::wire
