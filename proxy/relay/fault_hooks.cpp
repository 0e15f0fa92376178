#include "relay/fault_hooks.hpp"

#include <cstdlib>
#include <string_view>

namespace idem::relay {
namespace {

bool flag(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && std::string_view(value) == "1";
}

}  // namespace

FaultHooks FaultHooks::from_environment() {
  return FaultHooks{.crash_after_publish = flag("IDEMRELAY_TEST_CRASH_AFTER_PUBLISH"),
                    .stop_after_claim = flag("IDEMRELAY_TEST_STOP_AFTER_CLAIM"),
                    .stop_after_publish = flag("IDEMRELAY_TEST_STOP_AFTER_PUBLISH")};
}

}  // namespace idem::relay
