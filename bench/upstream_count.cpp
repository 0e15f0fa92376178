#include "upstream_count.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>
#include <string>

#include "bench_protocol.hpp"

namespace idem::bench {
namespace asio = boost::asio;
namespace beast = boost::beast;
using asio::ip::tcp;

namespace {

constexpr auto use_tuple = asio::as_tuple(asio::use_awaitable);

asio::awaitable<void> fetch(tcp::socket& socket, tcp::endpoint endpoint, std::optional<std::string>& body) {
  auto [connect_ec] = co_await socket.async_connect(endpoint, use_tuple);
  if (connect_ec) co_return;
  const std::string request = "GET " + std::string(kCountPath) + " HTTP/1.1\r\nHost: " +
                              endpoint.address().to_string() + "\r\nConnection: close\r\n\r\n";
  auto [write_ec, written] = co_await asio::async_write(socket, asio::buffer(request), use_tuple);
  if (write_ec) co_return;
  beast::flat_buffer buffer;
  beast::http::response<beast::http::string_body> response;
  auto [read_ec, read] = co_await beast::http::async_read(socket, buffer, response, use_tuple);
  if (read_ec || response.result_int() != 200) co_return;
  body = std::move(response.body());
}

}  // namespace

std::optional<std::uint64_t> read_execution_count(const tcp::endpoint& upstream, std::chrono::nanoseconds timeout) {
  asio::io_context io{1};
  tcp::socket socket(io);
  std::optional<std::string> body;
  asio::co_spawn(io, fetch(socket, upstream, body), asio::detached);
  io.run_for(timeout);
  if (!body) return std::nullopt;
  boost::system::error_code ec;
  const boost::json::value parsed = boost::json::parse(*body, ec);
  if (ec || !parsed.is_object()) return std::nullopt;
  const auto* executions = parsed.as_object().if_contains("executions");
  if (executions == nullptr) return std::nullopt;
  if (executions->is_uint64()) return executions->as_uint64();
  if (executions->is_int64() && executions->as_int64() >= 0) return static_cast<std::uint64_t>(executions->as_int64());
  return std::nullopt;
}

}  // namespace idem::bench
