// Fuzzes the head parser (Beast's, as the proxy configures it), the request validator
// (core/request_framing) and the target normalizer (core/request_target): what the proxy accepts
// from a client before anything routes it. Every input is read two ways:
//   - structured: "METHOD\nTARGET\nVERSION(10|11)\nName: value\n..." (missing parts are empty);
//   - as the bytes of a request on the wire.
// Invariants:
//   - an accepted target is origin-form (or "*" for OPTIONS), free of what a router could read
//     two ways ("//", dot segments, an encoded '/', '\' or NUL, '\', lower-case or broken '%'),
//     and normalizing it again changes nothing (one spelling per path);
//   - an accepted head has at most one Host and one Content-Length line, and Transfer-Encoding
//     only in HTTP/1.1 without Content-Length;
//   - a wire request the parser, the validator and the normalizer all accept, prepared as the
//     proxy forwards it (normalized target, its authority as Host, hop-by-hop framing fields
//     replaced by the body's length), re-serializes to bytes a fresh strict parser reads whole, as
//     one request with the same method, target, version, body and field lines: the upstream
//     cannot read it any other way;
//   - nothing reads outside its input (ASan).
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <sstream>
#include <string>
#include <string_view>
#include <optional>
#include <utility>
#include <vector>

#include "core/request_framing.hpp"
#include "core/request_target.hpp"
#include "fuzz_support.hpp"

namespace {

bool is_upper_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'A' && c <= 'F'); }

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

void check_target(std::string_view method, std::string_view target) {
  const idem::core::TargetResult result = idem::core::normalize_request_target(target, method);
  IDEM_FUZZ_CHECK(result.normalized.has_value() != result.problem.has_value());
  if (!result.normalized) return;
  const std::string& normalized = result.normalized->target;
  if (normalized == "*") {
    IDEM_FUZZ_CHECK(method == "OPTIONS");
    return;
  }
  IDEM_FUZZ_CHECK(normalized.starts_with('/'));
  const std::string_view path = std::string_view(normalized).substr(0, normalized.find('?'));
  IDEM_FUZZ_CHECK(path.find("//") == std::string_view::npos);
  IDEM_FUZZ_CHECK(path.find("/./") == std::string_view::npos && path.find("/../") == std::string_view::npos);
  IDEM_FUZZ_CHECK(!path.ends_with("/.") && !path.ends_with("/.."));
  IDEM_FUZZ_CHECK(path.find('\\') == std::string_view::npos && path.find('\0') == std::string_view::npos);
  for (std::size_t at = path.find('%'); at != std::string_view::npos; at = path.find('%', at + 1)) {
    IDEM_FUZZ_CHECK(at + 2 < path.size() && is_upper_hex(path[at + 1]) && is_upper_hex(path[at + 2]));
    const std::string_view encoded = path.substr(at, 3);
    IDEM_FUZZ_CHECK(encoded != "%2F" && encoded != "%5C" && encoded != "%00");
  }
  const idem::core::TargetResult again = idem::core::normalize_request_target(normalized, method);
  IDEM_FUZZ_CHECK(again.normalized && again.normalized->target == normalized && !again.normalized->authority);
}

void check_head(std::string_view method, unsigned version, const std::vector<std::string_view>& lines) {
  idem::core::RequestHead head{.method = method, .version = version, .fields = {}};
  for (const std::string_view line : lines) {
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    head.fields.emplace_back(line.substr(0, colon), line.substr(colon + 1));
  }
  if (idem::core::request_framing_problem(head)) return;
  int hosts = 0, lengths = 0, codings = 0;
  for (const auto& [name, value] : head.fields) {
    hosts += iequals(name, "Host") ? 1 : 0;
    lengths += iequals(name, "Content-Length") ? 1 : 0;
    codings += iequals(name, "Transfer-Encoding") ? 1 : 0;
  }
  IDEM_FUZZ_CHECK(hosts <= 1 && lengths <= 1);
  IDEM_FUZZ_CHECK(version < 11 ? hosts <= 1 : hosts == 1);
  if (codings > 0) IDEM_FUZZ_CHECK(version == 11 && lengths == 0);
}

namespace http = boost::beast::http;
using Request = http::request<http::string_body>;

// Parses one whole request from `bytes` (the proxy's header limit); nullopt unless it is complete.
std::optional<Request> parse_whole(std::string_view bytes, std::size_t* consumed) {
  http::request_parser<http::string_body> parser;
  parser.header_limit(16 * 1024);
  parser.body_limit(64 * 1024);
  parser.eager(true);
  std::size_t used = 0;
  while (!parser.is_done() && used < bytes.size()) {
    boost::system::error_code ec;
    const std::size_t n = parser.put(boost::asio::buffer(bytes.data() + used, bytes.size() - used), ec);
    if (ec && ec != http::error::need_more) return std::nullopt;
    if (n == 0) break;
    used += n;
  }
  if (!parser.is_done()) return std::nullopt;
  if (consumed != nullptr) *consumed = used;
  return parser.release();
}

void check_wire(std::string_view bytes) {
  std::optional<Request> request = parse_whole(bytes, nullptr);
  if (!request) return;
  idem::core::RequestHead head{.method = request->method_string(), .version = request->version(), .fields = {}};
  for (const auto& field : *request) head.fields.emplace_back(field.name_string(), field.value());
  if (idem::core::request_framing_problem(head)) return;
  const idem::core::TargetResult target = idem::core::normalize_request_target(request->target(), request->method_string());
  if (!target.normalized) return;

  // As forwarded: the normalized target, the absolute form's authority as Host, the body length.
  request->target(target.normalized->target);
  if (target.normalized->authority) request->set(http::field::host, *target.normalized->authority);
  request->erase(http::field::transfer_encoding);
  request->prepare_payload();
  std::ostringstream serialized;
  serialized << *request;
  const std::string wire = serialized.str();

  std::size_t consumed = 0;
  const std::optional<Request> reread = parse_whole(wire, &consumed);
  IDEM_FUZZ_CHECK(reread.has_value());
  IDEM_FUZZ_CHECK(consumed == wire.size());  // one request, nothing left over to be a second
  IDEM_FUZZ_CHECK(reread->method_string() == request->method_string());
  IDEM_FUZZ_CHECK(reread->target() == request->target());
  IDEM_FUZZ_CHECK(reread->version() == request->version());
  IDEM_FUZZ_CHECK(reread->body() == request->body());
  auto sent = request->begin();
  auto got = reread->begin();
  for (; sent != request->end() && got != reread->end(); ++sent, ++got) {
    IDEM_FUZZ_CHECK(iequals(sent->name_string(), got->name_string()));
    IDEM_FUZZ_CHECK(sent->value() == got->value());
  }
  IDEM_FUZZ_CHECK(sent == request->end() && got == reread->end());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text = idem::fuzz::as_text(data, size);
  check_wire(text);
  const std::vector<std::string_view> parts = idem::fuzz::split(text, '\n');
  const std::string_view method = parts.size() > 0 ? parts[0] : std::string_view();
  const std::string_view target = parts.size() > 1 ? parts[1] : std::string_view();
  const unsigned version = parts.size() > 2 && parts[2] == "10" ? 10 : 11;
  check_target(method, target);
  check_head(method, version, parts.size() > 3 ? std::vector<std::string_view>(parts.begin() + 3, parts.end())
                                                : std::vector<std::string_view>());
  return 0;
}
