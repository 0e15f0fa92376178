#include "relay/event_fingerprint.hpp"

#include <string_view>

#include "crypto/sha256.hpp"

namespace idem::relay {

std::string event_fingerprint(const OutboxRow& row) {
  crypto::Sha256 hash;
  const auto field = [&hash](std::string_view value) {
    hash.update(std::to_string(value.size()));
    hash.update(":");
    hash.update(value);
  };
  field(std::to_string(row.created_at_micros));
  field(row.aggregate_type);
  field(row.aggregate_id);
  field(row.event_type);
  field(row.payload);
  field(row.headers);
  return crypto::to_hex(hash.finish());
}

}  // namespace idem::relay
