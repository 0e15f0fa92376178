#pragma once
// The admin listener shared by idemproxy and idemrelay: a small HTTP/1.1 server on its own thread
// and io_context, so probes and scrapes never queue behind proxied traffic, and traffic never
// waits on them. Routes are the caller's; this class does connections, deadlines, bounds and the
// optional bearer token (required on everything but /healthz and /readyz, which kubelets probe
// without credentials).
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/string_body.hpp>
#include <functional>
#include <string>
#include <thread>

namespace idem::admin {

using Request = boost::beast::http::request<boost::beast::http::string_body>;
using Response = boost::beast::http::response<boost::beast::http::string_body>;
using Respond = std::function<void(Response)>;
// Runs on the admin thread; answers exactly once through `respond` (now or later).
using Handler = std::function<void(const Request&, Respond)>;

Response text_response(unsigned status, std::string body, std::string_view content_type = "text/plain; charset=utf-8");

class AdminServer {
 public:
  // Binds at once (throws boost::system::system_error when it cannot). Port 0 picks a free port.
  AdminServer(const std::string& host, unsigned short port, std::string bearer_token);
  ~AdminServer();  // stops and joins
  AdminServer(const AdminServer&) = delete;
  AdminServer& operator=(const AdminServer&) = delete;

  // Spawns the admin thread. The handler may use objects built on io() after construction.
  void start(Handler handler);
  void stop();  // idempotent
  unsigned short port() const { return port_; }
  boost::asio::io_context& io() { return io_; }  // for components the handler needs (its own store)

 private:
  struct Session;
  void accept();

  boost::asio::io_context io_{1};
  boost::asio::ip::tcp::acceptor acceptor_;
  unsigned short port_ = 0;
  std::string token_;
  Handler handler_;
  std::thread thread_;
};

}  // namespace idem::admin
