#include "core/store_error.hpp"

namespace idem::core {

std::string_view store_error_name(StoreError error) {
  switch (error) {
    case StoreError::ok: return "ok";
    case StoreError::unavailable: return "unavailable";
    case StoreError::busy: return "busy";
    case StoreError::reply_lost: return "reply_lost";
    case StoreError::not_owner: return "not_owner";
    case StoreError::not_found: return "not_found";
    case StoreError::lease_running: return "lease_running";
    case StoreError::internal: return "internal";
    case StoreError::corrupt: return "corrupt";
  }
  return "invalid";
}

}  // namespace idem::core
