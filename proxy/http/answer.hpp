#pragma once
// What a request read whole is answered with: a whole response, or an upstream's response whose
// body went on past what was kept (a guarded route's max_stored_body): its head and the body's
// first bytes, the rest still at the upstream for the client connection to stream
// (http/streamed_forwarding.hpp).
#include <memory>
#include <utility>

#include "http/message.hpp"
#include "http/upstream_connection.hpp"

namespace idem::http {

struct Answer {
  Answer() = default;
  // Most answers are whole: a response converts.
  Answer(Response whole) : response(std::move(whole)) {}  // NOLINT(google-explicit-constructor)
  Answer(Response head, std::unique_ptr<OpenResponse> open) : response(std::move(head)), rest(std::move(open)) {}

  // Whole: ready to write. With `rest`: the head as the upstream sent it (framing fields still in)
  // and the body's first bytes.
  Response response;
  std::unique_ptr<OpenResponse> rest;
};

}  // namespace idem::http
