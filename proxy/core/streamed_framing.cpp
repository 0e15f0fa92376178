#include "core/streamed_framing.hpp"

#include "core/ascii.hpp"

namespace idem::core {
bool names_other_codings(std::string_view codings) {
  while (!codings.empty()) {
    const auto comma = codings.find(',');
    const std::string_view coding = ascii::trim_ows(codings.substr(0, comma));
    codings = comma == std::string_view::npos ? std::string_view() : codings.substr(comma + 1);
    if (!coding.empty() && !ascii::iequals(coding, "chunked")) return true;
  }
  return false;
}

namespace {

Problem coding_refusal(std::string_view codings) {
  return upstream_bad_response_problem("the upstream's response uses the transfer coding \"" + std::string(codings) +
                                       "\", which an HTTP/1.0 client cannot receive");
}

}  // namespace

StreamedFraming streamed_framing(unsigned status, bool head_request, const UpstreamFraming& upstream,
                                 unsigned client_version) {
  StreamedFraming framing;
  if (status == 204 || status / 100 == 1) {
    framing.drop_content_length = true;
    return framing;
  }
  if (head_request || status == 304) return framing;
  const bool http11 = client_version >= 11;
  if (upstream.chunked) {
    if (http11) {
      framing.body = StreamedBody::chunked;
      framing.transfer_encoding = std::string(upstream.transfer_codings);
      return framing;
    }
    if (names_other_codings(upstream.transfer_codings)) {
      framing.refusal = coding_refusal(upstream.transfer_codings);
      return framing;
    }
    framing.body = StreamedBody::until_close;
    framing.close_after = true;
    return framing;
  }
  if (upstream.has_length) {
    framing.body = StreamedBody::length;
    return framing;
  }
  if (!upstream.transfer_codings.empty()) {
    // A coding that is not chunked: the body ends with the close (RFC 9112 §6.3), coded.
    if (!http11) {
      framing.refusal = coding_refusal(upstream.transfer_codings);
      return framing;
    }
    framing.body = StreamedBody::until_close;
    framing.transfer_encoding = std::string(upstream.transfer_codings);
    framing.close_after = true;
    return framing;
  }
  framing.body = StreamedBody::until_close;
  framing.close_after = true;
  return framing;
}

}  // namespace idem::core
