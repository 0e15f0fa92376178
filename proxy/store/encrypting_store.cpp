#include "store/encrypting_store.hpp"

#include <stdexcept>
#include <string>
#include <utility>

#include "crypto/sha256.hpp"
#include "log/log.hpp"
#include "store/sealed_record.hpp"

namespace idem::store {
namespace {

// Keys are client input and may be secrets of sorts: logs carry a short hash (as the http layer's).
std::string key_hash(std::string_view key) { return crypto::to_hex(crypto::sha256(key)).substr(0, 16); }

}  // namespace

EncryptingStore::EncryptingStore(Store& inner, std::shared_ptr<const crypto::Keyring> keyring)
    : inner_(inner), keyring_(std::move(keyring)) {
  if (!keyring_) throw std::invalid_argument("EncryptingStore needs a keyring");
}

void EncryptingStore::claim(const ClaimRequest& request, ClaimHandler handler) {
  inner_.claim(request, [keyring = keyring_, scope = request.scope, legacy_scope = request.legacy_scope,
                         key = request.key, handler = std::move(handler)](StoreError error, core::ClaimResult result) {
    if (error != StoreError::ok || result.claimed) return handler(error, std::move(result));
    // A response is sealed under the scope of its record (authenticated data).
    const std::string& sealed_under = result.existing_under_legacy_scope ? legacy_scope : scope;
    const Unsealed unsealed = unseal_response(*keyring, sealed_under, key, result.existing.response);
    switch (unsealed.outcome) {
      case UnsealOutcome::plaintext:
      case UnsealOutcome::opened: return handler(StoreError::ok, std::move(result));
      case UnsealOutcome::unknown_key:
      case UnsealOutcome::malformed:
      case UnsealOutcome::not_authentic:
        log::error("record_corrupt", {{"scope", sealed_under},
                                      {"key_sha256", key_hash(key)},
                                      {"key_id", unsealed.key_id},
                                      {"reason", unseal_outcome_name(unsealed.outcome)}});
        return handler(StoreError::corrupt, std::move(result));
    }
    return handler(StoreError::internal, core::ClaimResult{});
  });
}

void EncryptingStore::complete(const CompleteRequest& request, DoneHandler handler) {
  if (request.state != core::RecordState::completed) return inner_.complete(request, std::move(handler));
  std::optional<core::StoredResponse> sealed = seal_response(*keyring_, request.scope, request.key, request.response);
  if (!sealed) {
    log::error("record_seal_failed", {{"scope", request.scope}, {"key_sha256", key_hash(request.key)}});
    return handler(StoreError::internal);
  }
  CompleteRequest sealed_request{.scope = request.scope,
                                 .key = request.key,
                                 .owner = request.owner,
                                 .state = request.state,
                                 .response = std::move(*sealed),
                                 .ttl = request.ttl};
  inner_.complete(sealed_request, std::move(handler));
}

void EncryptingStore::release(const ReleaseRequest& request, DoneHandler handler) {
  inner_.release(request, std::move(handler));
}

void EncryptingStore::mark_unknown(const ReleaseRequest& request, DoneHandler handler) {
  inner_.mark_unknown(request, std::move(handler));
}

void EncryptingStore::force_release(const RecordKey& key, ForceReleaseHandler handler) {
  inner_.force_release(key, std::move(handler));
}

void EncryptingStore::sweep_expired(std::size_t batch, SweepHandler handler) {
  inner_.sweep_expired(batch, std::move(handler));
}

void EncryptingStore::inspect(const RecordKey& key, InspectHandler handler) { inner_.inspect(key, std::move(handler)); }

std::unique_ptr<Store> make_encrypting_store(Store& inner, std::shared_ptr<const crypto::Keyring> keyring) {
  return std::make_unique<EncryptingStore>(inner, std::move(keyring));
}

}  // namespace idem::store
