#include "http/request_parts.hpp"

#include "core/stored_headers.hpp"

namespace idem::http {

std::string connection_list(const RequestParts& request) {
  std::string joined;
  for (const FieldView& field : request.fields) {
    if (field.id != beast_http::field::connection || field.value.empty()) continue;
    if (!joined.empty()) joined += ", ";
    joined.append(field.value);
  }
  return joined;
}

bool keeps_connection_open(const RequestParts& request) {
  return core::keeps_connection_open(request.version, connection_list(request));
}

}  // namespace idem::http
