#include "support/http_client.hpp"

#include <algorithm>
#include <boost/asio.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <cctype>
#include <sstream>

namespace idem::test {

namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr std::uint64_t kMaxResponseBody = 512ULL * 1024 * 1024;
constexpr std::uint32_t kMaxResponseHeader = 1024 * 1024;

char lower(char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); }

bool has_header(const HttpRequest& request, std::string_view name) {
  return std::any_of(request.headers.begin(), request.headers.end(),
                     [&](const auto& header) { return beast::iequals(header.first, name); });
}

http::request<http::string_body> to_beast(const HttpRequest& request, std::uint16_t port) {
  http::request<http::string_body> message;
  message.version(11);
  message.method_string(request.method);
  message.target(request.target);
  for (const auto& [name, value] : request.headers) message.insert(name, value);
  if (!has_header(request, "Host")) message.set(http::field::host, "127.0.0.1:" + std::to_string(port));
  message.body() = request.body;
  if (!has_header(request, "Content-Length") && !has_header(request, "Transfer-Encoding")) {
    const bool body_expected = !request.body.empty() || request.method == "POST" || request.method == "PUT" ||
                               request.method == "PATCH";
    if (body_expected) message.content_length(request.body.size());
  }
  return message;
}

// Runs one asynchronous operation on a private io_context with a deadline: when it passes the
// socket is closed, which completes the operation with an error reported as timed_out.
class DeadlineRunner {
 public:
  explicit DeadlineRunner(std::chrono::milliseconds timeout) : timeout_(timeout) {}

  template <class Start>
  beast::error_code run(net::io_context& io, tcp::socket& socket, Start&& start) {
    bool done = false;
    bool timed_out = false;
    beast::error_code result;
    net::steady_timer timer(io);
    timer.expires_after(timeout_);
    timer.async_wait([&](beast::error_code ec) {
      if (ec || done) return;
      timed_out = true;
      beast::error_code ignored;
      socket.close(ignored);
    });
    start([&](beast::error_code ec) {
      done = true;
      result = ec;
      timer.cancel();
    });
    io.restart();
    io.run();  // returns once the operation and the timer handler have both completed
    if (timed_out) return net::error::timed_out;
    return result;
  }

 private:
  std::chrono::milliseconds timeout_;
};

HttpResponse from_beast(http::response<http::string_body>&& message) {
  HttpResponse response;
  response.status = static_cast<int>(message.result_int());
  for (const auto& field : message) response.headers.emplace(field.name_string(), field.value());
  response.keep_alive = message.keep_alive();
  response.body = std::move(message.body());
  return response;
}

HttpResponse failure(std::string_view step, const beast::error_code& ec) {
  HttpResponse response;
  response.error = std::string(step) + ": " + ec.message();
  return response;
}

}  // namespace

bool CaseInsensitiveLess::operator()(std::string_view a, std::string_view b) const {
  return std::lexicographical_compare(a.begin(), a.end(), b.begin(), b.end(),
                                      [](char x, char y) { return lower(x) < lower(y); });
}

HttpRequest HttpRequest::get(std::string target) {
  HttpRequest request;
  request.method = "GET";
  request.target = std::move(target);
  return request;
}

HttpRequest HttpRequest::post(std::string target, std::string body, std::string content_type) {
  HttpRequest request;
  request.method = "POST";
  request.target = std::move(target);
  request.body = std::move(body);
  if (!content_type.empty()) request.headers.emplace_back("Content-Type", std::move(content_type));
  return request;
}

HttpRequest& HttpRequest::with(std::string name, std::string value) & {
  headers.emplace_back(std::move(name), std::move(value));
  return *this;
}

HttpRequest&& HttpRequest::with(std::string name, std::string value) && {
  headers.emplace_back(std::move(name), std::move(value));
  return std::move(*this);
}

std::optional<std::string> HttpResponse::header(std::string_view name) const {
  const auto it = headers.find(name);
  if (it == headers.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> HttpResponse::header_values(std::string_view name) const {
  std::vector<std::string> values;
  const auto [first, last] = headers.equal_range(name);
  for (auto it = first; it != last; ++it) values.push_back(it->second);
  return values;
}

std::string describe(const HttpResponse& response, std::size_t max_body) {
  std::ostringstream out;
  if (!response.ok()) {
    out << "<no response: " << response.error << ">";
    return out.str();
  }
  out << "HTTP " << response.status << "\n";
  for (const auto& [name, value] : response.headers) out << name << ": " << value << "\n";
  out << "\n" << response.body.substr(0, max_body);
  if (response.body.size() > max_body) out << "[... " << response.body.size() - max_body << " more bytes]";
  return out.str();
}

struct HttpConnection::Impl {
  Impl(std::uint16_t port_, std::chrono::milliseconds timeout_) : port(port_), timeout(timeout_), socket(io) {}

  HttpResponse exchange(const HttpRequest& request) {
    if (broken) return failure("send", net::error::not_connected);
    DeadlineRunner runner(timeout);
    if (!connected) {
      const tcp::endpoint endpoint(net::ip::address_v4::loopback(), port);
      const auto ec = runner.run(io, socket, [&](auto done) { socket.async_connect(endpoint, done); });
      if (ec) {
        broken = true;
        return failure("connect", ec);
      }
      connected = true;
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);
    }
    auto message = to_beast(request, port);
    http::response_parser<http::string_body> parser;
    parser.body_limit(kMaxResponseBody);
    parser.header_limit(kMaxResponseHeader);
    if (request.method == "HEAD") parser.skip(true);
    std::string_view failed_step = "write";
    const auto ec = runner.run(io, socket, [&](auto done) {
      http::async_write(socket, message, [&, done](beast::error_code write_ec, std::size_t) {
        // A server may answer early (413, 400) and close before taking the whole body: its response
        // can still be waiting in our receive buffer.
        const bool peer_stopped_reading = write_ec == net::error::broken_pipe || write_ec == net::error::connection_reset;
        if (write_ec && !peer_stopped_reading) return done(write_ec);
        failed_step = write_ec ? "write (then read)" : "read";
        http::async_read(socket, buffer, parser, [done](beast::error_code read_ec, std::size_t) { done(read_ec); });
      });
    });
    ++sent;
    if (ec) {
      close();
      return failure(failed_step, ec);
    }
    HttpResponse response = from_beast(parser.release());
    if (!response.keep_alive) close();
    return response;
  }

  void close() {
    broken = true;
    beast::error_code ignored;
    socket.shutdown(tcp::socket::shutdown_both, ignored);
    socket.close(ignored);
  }

  std::uint16_t port;
  std::chrono::milliseconds timeout;
  net::io_context io{1};
  tcp::socket socket;
  beast::flat_buffer buffer;
  bool connected = false;
  bool broken = false;
  std::uint64_t sent = 0;
};

HttpConnection::HttpConnection(std::uint16_t port, std::chrono::milliseconds timeout)
    : impl_(std::make_unique<Impl>(port, timeout)) {}

HttpConnection::~HttpConnection() {
  if (impl_->connected && !impl_->broken) impl_->close();
}

HttpResponse HttpConnection::send(const HttpRequest& request) { return impl_->exchange(request); }

bool HttpConnection::is_open() const { return impl_->connected && !impl_->broken; }

std::uint64_t HttpConnection::requests_sent() const { return impl_->sent; }

HttpResponse send(std::uint16_t port, const HttpRequest& request, std::chrono::milliseconds timeout) {
  HttpConnection connection(port, timeout);
  return connection.send(request);
}

RawExchange raw_exchange(std::uint16_t port, std::string_view bytes, std::chrono::milliseconds timeout) {
  RawExchange exchange;
  net::io_context io{1};
  tcp::socket socket(io);
  DeadlineRunner runner(timeout);
  const tcp::endpoint endpoint(net::ip::address_v4::loopback(), port);
  if (const auto ec = runner.run(io, socket, [&](auto done) { socket.async_connect(endpoint, done); })) {
    exchange.error = "connect: " + ec.message();
    return exchange;
  }
  // One deadline for writing and for reading everything back.
  std::array<char, 16 * 1024> chunk{};
  const auto ec = runner.run(io, socket, [&](auto done) {
    net::async_write(socket, net::buffer(bytes.data(), bytes.size()), [&, done](beast::error_code write_ec, std::size_t) {
      // A server may close before reading all we sent (e.g. after a 400); still collect its answer.
      if (write_ec && write_ec != net::error::broken_pipe && write_ec != net::error::connection_reset)
        return done(write_ec);
      auto read_more = std::make_shared<std::function<void()>>();
      *read_more = [&, done, read_more]() {
        socket.async_read_some(net::buffer(chunk), [&, done, read_more](beast::error_code read_ec, std::size_t n) {
          exchange.received.append(chunk.data(), n);
          if (read_ec) {
            *read_more = nullptr;  // break the self-reference
            return done(read_ec);
          }
          (*read_more)();
        });
      };
      (*read_more)();
    });
  });
  if (ec == net::error::timed_out) {
    exchange.timed_out = true;
  } else if (ec == net::error::eof || ec == net::error::connection_reset || ec == net::error::broken_pipe) {
    exchange.peer_closed = true;
  } else if (ec) {
    exchange.error = ec.message();
  }
  return exchange;
}

std::string percent_encode(std::string_view text) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (std::isalnum(byte) || c == '-' || c == '.' || c == '_' || c == '~') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[byte >> 4]);
      out.push_back(kHex[byte & 0x0f]);
    }
  }
  return out;
}

}  // namespace idem::test
