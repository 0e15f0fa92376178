#include "admin/admin_server.hpp"

#include <boost/asio/ip/address.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/write.hpp>
#include <memory>

namespace idem::admin {
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = boost::beast::http;
using asio::ip::tcp;

namespace {
constexpr auto kReadTimeout = std::chrono::seconds(10);
constexpr auto kWriteTimeout = std::chrono::seconds(10);
constexpr std::size_t kMaxBody = 64 * 1024;

bool token_matches(std::string_view presented, std::string_view expected) {
  // Constant time in the token's length: no early exit on the first differing byte.
  if (presented.size() != expected.size()) return false;
  unsigned char diff = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) diff |= static_cast<unsigned char>(presented[i] ^ expected[i]);
  return diff == 0;
}
}  // namespace

Response text_response(unsigned status, std::string body, std::string_view content_type) {
  Response response{static_cast<http::status>(status), 11};
  response.set(http::field::content_type, content_type);
  response.set(http::field::cache_control, "no-store");
  response.body() = std::move(body);
  response.prepare_payload();
  return response;
}

// One admin connection: read a request, hand it to the handler, write the answer, repeat.
struct AdminServer::Session : std::enable_shared_from_this<Session> {
  Session(tcp::socket socket, AdminServer& server) : stream(std::move(socket)), server(server) {}

  void read() {
    parser.emplace();
    parser->body_limit(kMaxBody);
    stream.expires_after(kReadTimeout);
    http::async_read(stream, buffer, *parser, [self = shared_from_this()](beast::error_code ec, std::size_t) {
      if (ec) return self->close();
      self->dispatch(parser_release(*self));
    });
  }

  static Request parser_release(Session& self) { return self.parser->release(); }

  void dispatch(const Request& request) {
    const std::string_view target = request.target();
    const std::string_view path = target.substr(0, target.find('?'));
    const bool open = path == "/healthz" || path == "/readyz";
    if (!server.token_.empty() && !open) {
      const std::string_view auth = request[http::field::authorization];
      const std::string_view prefix = "Bearer ";
      if (!auth.starts_with(prefix) || !token_matches(auth.substr(prefix.size()), server.token_)) {
        Response denied = text_response(401, "missing or wrong bearer token\n");
        denied.set(http::field::www_authenticate, "Bearer");
        return write(std::move(denied), request.keep_alive());
      }
    }
    const bool keep_alive = request.keep_alive();
    auto self = shared_from_this();
    server.handler_(request, [self, keep_alive](Response response) {
      // The handler may answer from another step on the admin thread; post keeps the order simple.
      asio::post(self->stream.get_executor(), [self, keep_alive, response = std::move(response)]() mutable {
        self->write(std::move(response), keep_alive);
      });
    });
  }

  void write(Response response, bool keep_alive) {
    response.keep_alive(keep_alive);
    auto shared = std::make_shared<Response>(std::move(response));
    stream.expires_after(kWriteTimeout);
    http::async_write(stream, *shared,
                      [self = shared_from_this(), shared, keep_alive](beast::error_code ec, std::size_t) {
                        if (ec || !keep_alive) return self->close();
                        self->read();
                      });
  }

  void close() {
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream.socket().close(ignored);
  }

  beast::tcp_stream stream;
  AdminServer& server;
  beast::flat_buffer buffer;
  std::optional<http::request_parser<http::string_body>> parser;
};

AdminServer::AdminServer(const std::string& host, unsigned short port, std::string bearer_token)
    : acceptor_(io_), token_(std::move(bearer_token)) {
  const tcp::endpoint endpoint(asio::ip::make_address(host), port);
  acceptor_.open(endpoint.protocol());
  acceptor_.set_option(asio::socket_base::reuse_address(true));
  acceptor_.bind(endpoint);
  acceptor_.listen();
  port_ = acceptor_.local_endpoint().port();
}

AdminServer::~AdminServer() { stop(); }

void AdminServer::start(Handler handler) {
  handler_ = std::move(handler);
  accept();
  thread_ = std::thread([this] { io_.run(); });
}

void AdminServer::stop() {
  if (!thread_.joinable()) return;
  io_.stop();
  thread_.join();
}

void AdminServer::accept() {
  acceptor_.async_accept([this](beast::error_code ec, tcp::socket socket) {
    if (ec == asio::error::operation_aborted) return;
    if (!ec) std::make_shared<Session>(std::move(socket), *this)->read();
    accept();
  });
}

}  // namespace idem::admin
