#pragma once
// How a store operation ended, as the decisions in core read it. The Store interface
// (store/store.hpp) reports these; core decides what each means for the request and the record.
#include <string_view>

namespace idem::core {

enum class StoreError {
  ok,
  unavailable,    // the operation certainly did not take effect: no connection to the store could be
                  // made (server down or unreachable, every connection lost)
  busy,           // the operation certainly did not take effect, but the store is up and would not run
                  // it: every connection stayed busy past acquire_timeout, the server cancelled the
                  // statement (statement_timeout), or refused it as read-only (25006: a primary being
                  // demoted). A store reached but not usable now, not an absent one: never fail_open.
  reply_lost,     // the statement was sent and its answer never came (connection lost, deadline
                  // passed): it may or may not have taken effect. Every owner operation is safe to
                  // repeat with the same request, which is how callers settle it.
  not_owner,      // complete/release/mark_unknown: the record is no longer ours (lease taken over, released, expired)
  not_found,      // force_release/inspect: no live record for (scope, key), or not in a releasable state
  lease_running,  // force_release: the record is in flight and its lease still runs, so its request
                  // may be executing right now; releasing it would let a retry run it a second time
  internal,       // anything else (bad data, unexpected SQLSTATE): logged by the store
  corrupt,        // claim: the existing record's sealed response does not open (see encrypting_store.hpp);
                  // logged by the store; the record must never be replayed
};
std::string_view store_error_name(StoreError error);

}  // namespace idem::core
