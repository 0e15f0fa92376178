#pragma once
// A Store decorator that keeps completed responses encrypted at rest (AES-256-GCM, layout in
// sealed_record.hpp). Wraps any Store; every other primitive passes through unchanged.
//
// - complete() with state `completed`: the headers and body are sealed with the keyring's current
//   key before they reach the inner store (the status stays in clear). If sealing fails (OpenSSL
//   failure) nothing is written and the handler gets `internal`.
// - claim() returning an existing record: a sealed response is opened with the key its record
//   names, so records sealed with an older key still replay after a rotation. A record that does
//   not open (unknown key id, any altered byte, a malformed seal) is CORRUPT: one error line is
//   logged (scope, key hash, key id, reason; never key material or content) and the handler gets
//   StoreError::corrupt, with the record's fingerprint, state and status but no headers or body.
//   Such a record must never be replayed (the http layer answers 500 record-corrupt).
// - A completed record without a seal (written before encryption was enabled) is returned as it
//   is: switching encryption on does not invalidate live records; they expire with their TTL.
// - inspect() reports body_bytes as stored, i.e. sealed_body_size() for sealed records.
//
// Threading and lifetime as for Store: one io thread. Handlers capture what they need by value,
// so one still runs correctly if the decorator is destroyed first; the inner store must outlive
// every operation started through it, as usual.
#include <memory>

#include "crypto/keyring.hpp"
#include "store/store.hpp"

namespace idem::store {

class EncryptingStore final : public Store {
 public:
  // `keyring` must not be null. `inner` must outlive this decorator.
  EncryptingStore(Store& inner, std::shared_ptr<const crypto::Keyring> keyring);

  void claim(const ClaimRequest& request, ClaimHandler handler) override;
  void complete(const CompleteRequest& request, DoneHandler handler) override;
  void release(const ReleaseRequest& request, DoneHandler handler) override;
  void mark_unknown(const ReleaseRequest& request, DoneHandler handler) override;
  void force_release(const RecordKey& key, ForceReleaseHandler handler) override;
  void sweep_expired(std::size_t batch, SweepHandler handler) override;
  void inspect(const RecordKey& key, InspectHandler handler) override;

 private:
  Store& inner_;
  std::shared_ptr<const crypto::Keyring> keyring_;
};

// The decorator as a plain Store (what app/ wires between a worker and its PgStore).
// Throws std::invalid_argument when `keyring` is null (start-up only).
std::unique_ptr<Store> make_encrypting_store(Store& inner, std::shared_ptr<const crypto::Keyring> keyring);

}  // namespace idem::store
