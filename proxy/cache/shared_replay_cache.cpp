#include "cache/shared_replay_cache.hpp"

namespace idem::cache {

std::string_view shared_fallback_reason_name(SharedFallbackReason reason) {
  switch (reason) {
    case SharedFallbackReason::timeout: return "timeout";
    case SharedFallbackReason::disconnected: return "disconnected";
    case SharedFallbackReason::error: return "error";
    case SharedFallbackReason::corrupt: return "corrupt";
  }
  return "error";
}

}  // namespace idem::cache
