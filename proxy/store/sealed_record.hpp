#pragma once
// How a completed response is kept encrypted at rest (the layout EncryptingStore writes and reads).
//
// A sealed response keeps its status in clear (the decision layer and operators need it) and
// replaces its headers and body:
//   headers: exactly one field, `@idemproxy-sealed: v1;kid=<key id>`
//   body:    nonce (12 bytes) || AES-256-GCM ciphertext || tag (16 bytes)
// The plaintext is u32be(length of the header block) || header block || body, where the header
// block is core::encode_header_block(headers). The associated data binds the ciphertext to its
// place and its clear fields: "idemproxy-record-v1" followed by scope, key, key id (each as
// u32be(length) || bytes) and u32be(status); a sealed body copied to another record, or a status
// edited in the database, no longer authenticates.
//
// The marker's name starts with '@', which no HTTP field name can hold (RFC 9110 §5.1: a token),
// so a response stored in plaintext can never be mistaken for a sealed one, and both layouts go
// through every store unchanged (the Postgres store keeps the header block and body as bytea).
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "core/record.hpp"
#include "crypto/keyring.hpp"

namespace idem::store {

inline constexpr std::string_view kSealedMarkerName = "@idemproxy-sealed";

// True when `response` carries the seal marker (whether or not the rest is intact).
bool is_sealed(const core::StoredResponse& response);

// `response` (status, headers, body) sealed with the keyring's current key; nullopt only when
// OpenSSL fails (no random nonce, cipher error).
std::optional<core::StoredResponse> seal_response(const crypto::Keyring& keyring, std::string_view scope,
                                                  std::string_view key, const core::StoredResponse& response);

enum class UnsealOutcome {
  plaintext,      // no marker: stored before encryption was enabled; left as it is
  opened,         // authenticated and decrypted: the response holds the original headers and body
  unknown_key,    // the marker names a key id the keyring does not hold
  malformed,      // a marker with other fields next to it, a bad marker value, or a body too short
  not_authentic,  // the tag does not verify: altered bytes, other key material, or moved records
};
std::string_view unseal_outcome_name(UnsealOutcome outcome);

struct Unsealed {
  UnsealOutcome outcome = UnsealOutcome::plaintext;
  std::string key_id;  // the key id the marker names (when it names one), for logs
};

// Opens `response` in place when it is sealed. On any outcome other than plaintext and opened,
// its headers and body are cleared (nothing of a corrupt record is handed on).
Unsealed unseal_response(const crypto::Keyring& keyring, std::string_view scope, std::string_view key,
                         core::StoredResponse& response);

// Bytes a sealed copy of `response` takes in the body column (what Store::inspect reports as
// body_bytes for a sealed record): nonce + tag + 4 + header block + body.
std::size_t sealed_body_size(const core::StoredResponse& response);

}  // namespace idem::store
