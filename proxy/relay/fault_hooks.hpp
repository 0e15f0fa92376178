#pragma once
// Test-only fault injection, honoured only when its environment variable is set to "1" (read once
// at start-up by idemrelay's main; nothing else sets them). They exist so that tests can put the
// relay at the exact moments that matter for at-least-once delivery:
//   IDEMRELAY_TEST_CRASH_AFTER_PUBLISH  _exit(137) right after the first batch the sink acknowledged,
//                                       before its rows are marked published (a kill -9 there)
//   IDEMRELAY_TEST_STOP_AFTER_CLAIM     raise(SIGSTOP) once, right after the first non-empty claim
//   IDEMRELAY_TEST_STOP_AFTER_PUBLISH   raise(SIGSTOP) once, after the first acknowledged batch
//                                       and before its settle (a paused relay holding a batch)
namespace idem::relay {

struct FaultHooks {
  bool crash_after_publish = false;
  bool stop_after_claim = false;
  bool stop_after_publish = false;

  static FaultHooks from_environment();
  bool any() const { return crash_after_publish || stop_after_claim || stop_after_publish; }
};

}  // namespace idem::relay
