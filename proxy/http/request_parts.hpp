#pragma once
// A request as views of its parts: what the proxy reads to route, guard and fingerprint a request,
// and what it rewrites into the upstream's request. A client's request is parsed straight into
// this form (client_request.hpp): a Beast message's field tree cost more to build than the rest
// of a proxied request.
#include <string>
#include <string_view>
#include <vector>

#include "http/message.hpp"
#include "wire/http_head.hpp"

namespace idem::http {

using wire::FieldView;

struct RequestParts {
  beast_http::verb method = beast_http::verb::unknown;
  std::string_view method_string;
  std::string_view target;
  unsigned version = 11;
  std::vector<FieldView> fields;  // in arrival order
  std::string_view body;
};

// Whether the client leaves its connection open after this request.
bool keeps_connection_open(const RequestParts& request);

}  // namespace idem::http
