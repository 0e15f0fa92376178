#include "http/upstream_request.hpp"

#include <boost/beast/core/string.hpp>
#include <charconv>

#include "core/stored_headers.hpp"

namespace idem::http {
namespace {

bool named(const FieldView& field, std::string_view name) { return boost::beast::iequals(field.name, name); }

// Whether the upstream's request states its body's length: it has one, or its method usually
// does (as Beast's prepare_payload decides).
bool states_length(const RequestParts& request) {
  const beast_http::verb method = request.method;
  return !request.body.empty() || method == beast_http::verb::options || method == beast_http::verb::put ||
         method == beast_http::verb::post;
}

}  // namespace

UpstreamRequest::UpstreamRequest(const RequestParts& request, std::string_view client_address,
                                 RequestBodyFraming framing, std::uint64_t length, std::string_view upgrade)
    : parts_{.method = request.method,
             .method_string = request.method_string,
             .target = request.target,
             .version = request.version,
             .fields = {},
             .body = request.body} {
  const std::string connection = wire::connection_list(request.fields);
  // A body read whole (a chunked one decoded): a length replaces the client's framing. A streamed
  // one keeps the client's length (its digits as the parser read them, last, as for a whole
  // body), or goes on chunked.
  const bool replace_length = framing == RequestBodyFraming::streamed_length ||
                              (framing == RequestBodyFraming::whole && states_length(request));
  if (framing != RequestBodyFraming::streamed_length) length = parts_.body.size();
  parts_.fields.reserve(request.fields.size() + 6);
  for (const FieldView& field : request.fields) {
    if (named(field, "X-Forwarded-Proto")) {
      // The connection layer set it (it alone knows the transport): a client's Connection header
      // naming it must not take it away.
      parts_.fields.push_back(field);
      continue;
    }
    // Transfer-Encoding is hop-by-hop: a chunked body goes on with a length, or with none.
    if (core::is_hop_by_hop(field.name, connection)) continue;
    // The proxy answered it itself, before reading the body.
    if (field.id == beast_http::field::expect) continue;
    if (replace_length && field.id == beast_http::field::content_length) continue;
    if (named(field, "X-Forwarded-For")) {
      // Every line the client (or a proxy before us, HAProxy adds a line) sent, then this hop.
      if (!field.value.empty()) forwarded_for_.append(field.value).append(", ");
      continue;
    }
    parts_.fields.push_back(field);
  }
  forwarded_for_.append(client_address);
  parts_.fields.push_back({beast_http::field::unknown, "X-Forwarded-For", forwarded_for_});
  // Keep-alive towards the upstream: HTTP/1.1 is persistent without a Connection field, and every
  // Connection field is gone.
  if (!upgrade.empty()) {
    parts_.fields.push_back({beast_http::field::connection, "Connection", "upgrade"});
    parts_.fields.push_back({beast_http::field::upgrade, "Upgrade", upgrade});
  } else if (parts_.version < 11) {
    parts_.fields.push_back({beast_http::field::connection, "Connection", "keep-alive"});
  }
  if (framing == RequestBodyFraming::streamed_chunked) {
    parts_.fields.push_back({beast_http::field::transfer_encoding, "Transfer-Encoding", "chunked"});
  }
  if (replace_length) {
    const auto [end, error] =
        std::to_chars(content_length_.data(), content_length_.data() + content_length_.size(), length);
    (void)error;  // 24 characters hold any size_t
    parts_.fields.push_back(
        {beast_http::field::content_length, "Content-Length",
         std::string_view(content_length_.data(), static_cast<std::size_t>(end - content_length_.data()))});
  }
}

void UpstreamRequest::write_head(std::string& out) const {
  wire::write_head(parts_.method_string, parts_.target, parts_.version, parts_.fields, out);
}

}  // namespace idem::http
