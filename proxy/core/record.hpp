#pragma once
// What the store holds for one (scope, key).
#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace idem::core {

enum class RecordState {
  in_flight,  // claimed; an execution is (or was) under way; lease_remaining says for how long
  completed,  // response stored; replayable until it expires
  too_large,  // executed with `status`, but the body exceeded max_stored_body: never replayed, never re-run
  unknown,    // the request reached the upstream, no answer came back: terminal until released
};
std::string_view record_state_name(RecordState state);

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct StoredResponse {
  int status = 0;
  HeaderList headers;  // already filtered for storage (see stored_headers.hpp)
  std::string body;
};

struct Record {
  std::string fingerprint;
  RecordState state = RecordState::in_flight;
  StoredResponse response;  // status set for completed and too_large; headers/body for completed only
  // Time left on the in-flight lease as measured by the store's clock (<= 0: lapsed).
  std::chrono::milliseconds lease_remaining{0};
  // Time left until the record expires, by the store's clock (bounds how long a copy may be cached).
  std::chrono::milliseconds expires_in{0};
};

// An in-flight record whose lease lapsed (<= 0 left) has an unknown outcome: its proxy died or
// lost track of it before settling it. Readers show it as `unknown`; what a route then does with
// it (lock: 502, retry: a claim takes it over) is decide()'s.
bool lease_lapsed(RecordState state, std::chrono::milliseconds lease_remaining);
RecordState observed_state(RecordState state, std::chrono::milliseconds lease_remaining);

}  // namespace idem::core
