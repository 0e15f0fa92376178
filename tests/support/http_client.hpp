#pragma once
// A synchronous HTTP/1.1 client for tests, with a deadline on every exchange. Requests are given
// exactly (method, target, an ordered header list that may repeat a name, body bytes) so tests can
// send what real clients would never send.
#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace idem::test {

inline constexpr std::chrono::milliseconds kDefaultHttpTimeout{15'000};

struct HttpRequest {
  std::string method = "GET";
  std::string target = "/";
  std::vector<std::pair<std::string, std::string>> headers;  // sent in this order, duplicates kept
  std::string body;
  // Content-Length is computed from body unless headers already carry Content-Length or
  // Transfer-Encoding; Host is added unless present.

  static HttpRequest get(std::string target);
  // An empty content_type sends no Content-Type header.
  static HttpRequest post(std::string target, std::string body = {}, std::string content_type = "application/json");

  HttpRequest& with(std::string name, std::string value) &;
  HttpRequest&& with(std::string name, std::string value) &&;
};

struct CaseInsensitiveLess {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const;
};
using HeaderMap = std::multimap<std::string, std::string, CaseInsensitiveLess>;

struct HttpResponse {
  std::string error;  // empty when a complete response was read
  int status = 0;
  HeaderMap headers;  // as received; equal names keep their order
  std::string body;
  bool keep_alive = false;

  bool ok() const { return error.empty(); }
  std::optional<std::string> header(std::string_view name) const;  // first value
  std::vector<std::string> header_values(std::string_view name) const;
  bool has_header(std::string_view name) const { return headers.find(name) != headers.end(); }
};

// Status line, headers and (a prefix of) the body: for assertion messages.
std::string describe(const HttpResponse& response, std::size_t max_body = 512);

// One request on a fresh connection to 127.0.0.1:port, then the connection is closed.
HttpResponse send(std::uint16_t port, const HttpRequest& request,
                  std::chrono::milliseconds timeout = kDefaultHttpTimeout);

// Several requests over one keep-alive connection (opened on the first send). After an error or a
// response that closes the connection, is_open() is false and further sends fail.
class HttpConnection {
 public:
  explicit HttpConnection(std::uint16_t port, std::chrono::milliseconds timeout = kDefaultHttpTimeout);
  ~HttpConnection();
  HttpConnection(const HttpConnection&) = delete;
  HttpConnection& operator=(const HttpConnection&) = delete;

  HttpResponse send(const HttpRequest& request);
  bool is_open() const;
  std::uint64_t requests_sent() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct RawExchange {
  std::string received;     // every byte the server sent back
  bool peer_closed = false;  // the server closed the connection (EOF or reset)
  bool timed_out = false;    // the deadline passed with the connection still open
  std::string error;        // connect/write failure
};

// Sends bytes as they are and reads until the server closes or timeout passes.
RawExchange raw_exchange(std::uint16_t port, std::string_view bytes, std::chrono::milliseconds timeout);

// RFC 3986 percent-encoding of everything but unreserved characters (for query values).
std::string percent_encode(std::string_view text);

}  // namespace idem::test
