#pragma once
// A resolver that answers slowly, on demand: this test binary defines getaddrinfo itself (an
// executable's definition comes first for every library, hiredis included), so a lookup of a name
// ending in ".slow.test" waits until the test releases it, then resolves to 127.0.0.1; every other
// name goes to the real getaddrinfo (libc's, or a sanitizer's interceptor) unchanged.
#include <chrono>
#include <thread>

namespace idem::test::relay::slow_resolver {

// From now on, lookups of "*.slow.test" wait for release().
void hold();
void release();
// A lookup of "*.slow.test" has started (and waits, while held). False after `timeout`.
bool wait_entered(std::chrono::milliseconds timeout);
// The thread that made the last such lookup.
std::thread::id caller();

}  // namespace idem::test::relay::slow_resolver
