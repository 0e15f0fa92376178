#pragma once
// Waiting in a test for something another process or thread brings about, without a fixed sleep.
#include <chrono>
#include <functional>

namespace idem::test {

// Polls `condition` every `step` until it holds or `timeout` passes: true as soon as it holds,
// false when it still did not at a check made after the deadline. Checks at least once.
bool eventually(const std::function<bool()>& condition, std::chrono::milliseconds timeout,
                std::chrono::milliseconds step = std::chrono::milliseconds(20));

}  // namespace idem::test
