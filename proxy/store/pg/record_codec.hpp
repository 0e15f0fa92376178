#pragma once
// Records to and from the columns of idempotency_records, as the statements in sql.hpp use them.
#include <libpq-fe.h>

#include <cstddef>
#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "core/decision.hpp"
#include "core/record.hpp"
#include "pg/statement.hpp"
#include "store/store.hpp"

namespace idem::store::pg {

// The values of the `state` column (its CHECK constraint lists the same four).
std::string_view state_column_value(core::RecordState state);
std::optional<core::RecordState> parse_state_column(std::string_view value);

idem::pg::Statement claim_statement(const ClaimRequest& request);
idem::pg::Statement complete_statement(const CompleteRequest& request);  // request.state must not be in_flight
idem::pg::Statement release_statement(const ReleaseRequest& request);
idem::pg::Statement mark_unknown_statement(const ReleaseRequest& request);
idem::pg::Statement force_release_statement(const RecordKey& key);
idem::pg::Statement sweep_expired_statement(std::size_t batch);
idem::pg::Statement inspect_statement(const RecordKey& key);

struct DecodedClaim {
  std::optional<core::ClaimResult> claim;  // set on success
  std::string error;                       // otherwise: what did not decode
};
// Decodes one row of sql::kClaim's result (binary format). expires_in is filled for a claimed
// record too (it is then the claim's ttl).
DecodedClaim decode_claim_row(const PGresult* result, int row);

struct DecodedInspect {
  std::optional<RecordInfo> info;  // set on success
  std::string error;               // otherwise: what did not decode
};
// Decodes one row of sql::kInspect's result (binary format).
DecodedInspect decode_inspect_row(const PGresult* result, int row);

struct ForceReleaseOutcome {
  bool released = false;
  std::chrono::milliseconds lease_remaining{0};  // when not released: the in-flight lease left
};
struct DecodedForceRelease {
  std::optional<ForceReleaseOutcome> outcome;  // set on success
  std::string error;                           // otherwise: what did not decode
};
// Decodes one row of sql::kForceRelease's result (binary format).
DecodedForceRelease decode_force_release_row(const PGresult* result, int row);
// A release row's `released` column; nullopt when the row is not one.
std::optional<bool> decode_release_row(const PGresult* result, int row);

}  // namespace idem::store::pg
