#include "relay/slow_resolver.hpp"

#include <dlfcn.h>
#include <netdb.h>

#include <condition_variable>
#include <mutex>
#include <string_view>

namespace idem::test::relay::slow_resolver {
namespace {

struct Gate {
  std::mutex mutex;
  std::condition_variable changed;
  bool held = false;
  int entered = 0;
  std::thread::id caller;
};

Gate& gate() {
  static Gate instance;
  return instance;
}

constexpr std::string_view kSlowSuffix = ".slow.test";

bool is_slow(const char* node) {
  if (node == nullptr) return false;
  const std::string_view name(node);
  return name.size() > kSlowSuffix.size() && name.substr(name.size() - kSlowSuffix.size()) == kSlowSuffix;
}

}  // namespace

void hold() {
  const std::lock_guard lock(gate().mutex);
  gate().held = true;
  gate().entered = 0;
}

void release() {
  {
    const std::lock_guard lock(gate().mutex);
    gate().held = false;
  }
  gate().changed.notify_all();
}

bool wait_entered(std::chrono::milliseconds timeout) {
  std::unique_lock lock(gate().mutex);
  return gate().changed.wait_for(lock, timeout, [] { return gate().entered > 0; });
}

std::thread::id caller() {
  const std::lock_guard lock(gate().mutex);
  return gate().caller;
}

}  // namespace idem::test::relay::slow_resolver

extern "C" int getaddrinfo(const char* node, const char* service, const struct addrinfo* hints,
                           struct addrinfo** result) {
  using Real = int (*)(const char*, const char*, const struct addrinfo*, struct addrinfo**);
  static const Real real = reinterpret_cast<Real>(dlsym(RTLD_NEXT, "getaddrinfo"));
  if (!idem::test::relay::slow_resolver::is_slow(node)) return real(node, service, hints, result);
  namespace gate_ns = idem::test::relay::slow_resolver;
  auto& gate = gate_ns::gate();
  {
    std::unique_lock lock(gate.mutex);
    ++gate.entered;
    gate.caller = std::this_thread::get_id();
    gate.changed.notify_all();
    // Bounded: a test that never releases does not hang the binary.
    gate.changed.wait_for(lock, std::chrono::seconds(30), [&gate] { return !gate.held; });
  }
  return real("127.0.0.1", service, hints, result);
}
