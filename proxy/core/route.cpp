#include "core/route.hpp"

#include <string_view>

namespace idem::core {

bool is_safe_method(std::string_view method) {
  // Method names are case-sensitive (RFC 9110 §9.1): "get" is not GET.
  return method == "GET" || method == "HEAD" || method == "OPTIONS";
}

}  // namespace idem::core
