#pragma once
// The request this proxy sends upstream, made from the client's (RequestParts): hop-by-hop fields
// and Expect removed, X-Forwarded-For appended with the client's address, keep-alive towards the
// upstream, Content-Length recomputed. The Host header and the idempotency key header are kept.
// X-Forwarded-Proto is set earlier, by the client connection (the only layer that knows whether
// the client used TLS), which replaces any value the client sent; it survives a Connection header
// that names it. Every field is a view: of the client's request, or of the values added here.
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "http/request_parts.hpp"

namespace idem::http {

// How the request's body reaches the upstream.
enum class RequestBodyFraming {
  whole,             // read whole (`body`, a chunked one decoded): sent with its length
  streamed_length,   // streamed as it arrives: the client's Content-Length (`length`), written as digits
  streamed_chunked,  // streamed as it arrives, chunk by chunk: Transfer-Encoding: chunked
};

class UpstreamRequest {
 public:
  // `request` must outlive this, and so must `upgrade`: when set, the protocols the request may
  // switch to (core/upgrade_decision.hpp), sent as Upgrade with `Connection: upgrade` (the
  // client's own are hop-by-hop and go with the rest).
  UpstreamRequest(const RequestParts& request, std::string_view client_address,
                  RequestBodyFraming framing = RequestBodyFraming::whole, std::uint64_t length = 0,
                  std::string_view upgrade = {});
  // Its fields view its own members.
  UpstreamRequest(const UpstreamRequest&) = delete;
  UpstreamRequest& operator=(const UpstreamRequest&) = delete;

  const RequestParts& parts() const { return parts_; }
  // Replaces `out` with the head, as bytes.
  void write_head(std::string& out) const;

 private:
  RequestParts parts_;
  std::string forwarded_for_;
  std::array<char, 24> content_length_{};
};

}  // namespace idem::http
