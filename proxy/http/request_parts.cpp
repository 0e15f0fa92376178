#include "http/request_parts.hpp"

#include "core/stored_headers.hpp"

namespace idem::http {

bool keeps_connection_open(const RequestParts& request) {
  return core::keeps_connection_open(request.version, wire::connection_list(request.fields));
}

}  // namespace idem::http
