// Stored responses encrypted at rest (store/encrypting_store.hpp) over the real backends: what the
// store physically holds, key rotation, and records that must be treated as corrupt.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "conformance/store_harness.hpp"
#include "crypto/keyring.hpp"
#include "store/sealed_record.hpp"
#include "support/blocking_pg.hpp"

namespace idem::test {
namespace {

using namespace std::chrono_literals;
using core::RecordState;
using store::StoreError;

crypto::AeadKey key_bytes(std::uint8_t seed) {
  crypto::AeadKey key{};
  for (std::size_t i = 0; i < key.size(); ++i) key[i] = static_cast<std::uint8_t>(seed * 17 + i);
  return key;
}

std::shared_ptr<const crypto::Keyring> keyring(std::string current, std::vector<crypto::Keyring::Entry> keys) {
  return std::make_shared<const crypto::Keyring>(std::move(current), std::move(keys));
}

// What must never be readable in the store: every one of these appears in the response below.
const std::vector<std::string> kSecrets = {"4111-1111-1111-1111", "jane.doe@example.com", "tenant-a-secret-header",
                                           "X-Customer-Note", "application/vnd.payment+json"};

core::StoredResponse secret_response() {
  core::StoredResponse response;
  response.status = 201;
  response.headers = {{"Content-Type", "application/vnd.payment+json"}, {"X-Customer-Note", "tenant-a-secret-header"}};
  response.body = "{\"card\":\"4111-1111-1111-1111\",\"email\":\"jane.doe@example.com\",\"bin\":\"" +
                  std::string("\0\xff\x01", 3) + "\"}";
  return response;
}

void expect_no_secret_in(std::string_view bytes, std::string_view what) {
  for (const std::string& secret : kSecrets) {
    EXPECT_EQ(bytes.find(secret), std::string_view::npos) << what << " holds \"" << secret << "\" in clear";
  }
}

template <typename Harness>
class StoreEncryption : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NO_FATAL_FAILURE(harness_.set_up());
    scope_ = fresh_scope("encryption");
  }
  void TearDown() override { harness_.tear_down(); }

  // Claims `key` and completes it with `response` through whatever store() is now.
  void store_response(const std::string& key, const core::StoredResponse& response) {
    const std::string owner = "owner-" + key;
    ASSERT_EQ(harness_.claim(claim_request(key, owner)).error, StoreError::ok);
    ASSERT_EQ(harness_.complete(store::CompleteRequest{.scope = scope_, .key = key, .owner = owner,
                                                       .state = RecordState::completed, .response = response,
                                                       .ttl = 60s}),
              StoreError::ok);
  }
  // A duplicate's claim: the existing record (or the error) as the store under test returns it.
  ClaimOutcome replay(const std::string& key) { return harness_.claim(claim_request(key, "owner-retry")); }
  // What the backend itself returns, bypassing any decorator; the harness is left as it was.
  core::StoredResponse raw_response(const std::string& key, std::shared_ptr<const crypto::Keyring> restore) {
    harness_.encrypt_with(nullptr);
    const ClaimOutcome raw = replay(key);
    harness_.encrypt_with(std::move(restore));
    EXPECT_EQ(raw.error, StoreError::ok);
    EXPECT_FALSE(raw.result.claimed);
    return raw.result.existing.response;
  }

  store::ClaimRequest claim_request(const std::string& key, const std::string& owner) const {
    return store::ClaimRequest{.scope = scope_, .key = key, .fingerprint = "v1:fp", .owner = owner, .ttl = 60s, .lease = 10s,
                               .take_over_lapsed_lease = false};
  }

  Harness harness_;
  std::string scope_;
};

using Backends = ::testing::Types<MemoryHarness, PgHarness>;
class BackendNames {
 public:
  template <typename T>
  static std::string GetName(int) {
    return std::is_same_v<T, MemoryHarness> ? "Memory" : "Postgres";
  }
};
TYPED_TEST_SUITE(StoreEncryption, Backends, BackendNames);

TYPED_TEST(StoreEncryption, CompletedRecordIsHeldSealedWithItsKeyIdAndClearStatus) {
  const auto ring = keyring("k1", {{"k1", key_bytes(1)}});
  this->harness_.encrypt_with(ring);
  ASSERT_NO_FATAL_FAILURE(this->store_response("a", secret_response()));

  const core::StoredResponse raw = this->raw_response("a", ring);
  EXPECT_EQ(raw.status, 201);
  ASSERT_EQ(raw.headers.size(), 1u);
  EXPECT_EQ(raw.headers[0].first, store::kSealedMarkerName);
  EXPECT_EQ(raw.headers[0].second, "v1;kid=k1");
  EXPECT_EQ(raw.body.size(), store::sealed_body_size(secret_response()));
  expect_no_secret_in(raw.body, "the stored body");

  const ClaimOutcome replayed = this->replay("a");
  ASSERT_EQ(replayed.error, StoreError::ok);
  EXPECT_EQ(replayed.result.existing.state, RecordState::completed);
  EXPECT_EQ(replayed.result.existing.response.status, 201);
  EXPECT_EQ(replayed.result.existing.response.headers, secret_response().headers);
  EXPECT_EQ(replayed.result.existing.response.body, secret_response().body);
}

TYPED_TEST(StoreEncryption, SameResponseTwiceIsSealedDifferently) {
  const auto ring = keyring("k1", {{"k1", key_bytes(1)}});
  this->harness_.encrypt_with(ring);
  ASSERT_NO_FATAL_FAILURE(this->store_response("a", secret_response()));
  ASSERT_NO_FATAL_FAILURE(this->store_response("b", secret_response()));
  const std::string first = this->raw_response("a", ring).body;
  const std::string second = this->raw_response("b", ring).body;
  ASSERT_EQ(first.size(), second.size());
  // Fresh nonce per record: nonces differ, and so does every later byte.
  EXPECT_NE(first.substr(0, crypto::kAeadNonceBytes), second.substr(0, crypto::kAeadNonceBytes));
  EXPECT_NE(first.substr(crypto::kAeadNonceBytes), second.substr(crypto::kAeadNonceBytes));
}

TYPED_TEST(StoreEncryption, RotationKeepsOldRecordsReadableAndSealsNewOnesWithTheNewKey) {
  const auto before = keyring("k1", {{"k1", key_bytes(1)}});
  this->harness_.encrypt_with(before);
  ASSERT_NO_FATAL_FAILURE(this->store_response("old", secret_response()));

  // Restart with k2 current and k1 kept for the records it sealed.
  const auto after = keyring("k2", {{"k1", key_bytes(1)}, {"k2", key_bytes(2)}});
  this->harness_.encrypt_with(after);
  const ClaimOutcome old_replay = this->replay("old");
  ASSERT_EQ(old_replay.error, StoreError::ok);
  EXPECT_EQ(old_replay.result.existing.response.body, secret_response().body);
  EXPECT_EQ(old_replay.result.existing.response.headers, secret_response().headers);

  core::StoredResponse fresh = secret_response();
  fresh.status = 200;
  ASSERT_NO_FATAL_FAILURE(this->store_response("new", fresh));
  EXPECT_EQ(this->raw_response("old", after).headers.at(0).second, "v1;kid=k1");
  EXPECT_EQ(this->raw_response("new", after).headers.at(0).second, "v1;kid=k2");
  const ClaimOutcome new_replay = this->replay("new");
  ASSERT_EQ(new_replay.error, StoreError::ok);
  EXPECT_EQ(new_replay.result.existing.response.status, 200);
  EXPECT_EQ(new_replay.result.existing.response.body, fresh.body);

  // Once k1 is dropped, only what k2 sealed still opens.
  this->harness_.encrypt_with(keyring("k2", {{"k2", key_bytes(2)}}));
  EXPECT_EQ(this->replay("new").error, StoreError::ok);
  EXPECT_EQ(this->replay("old").error, StoreError::corrupt);
}

TYPED_TEST(StoreEncryption, UnknownKeyIdIsCorruptAndNothingOfTheRecordIsHandedOn) {
  this->harness_.encrypt_with(keyring("k1", {{"k1", key_bytes(1)}}));
  ASSERT_NO_FATAL_FAILURE(this->store_response("a", secret_response()));
  this->harness_.encrypt_with(keyring("k9", {{"k9", key_bytes(9)}}));

  ::testing::internal::CaptureStderr();
  const ClaimOutcome replayed = this->replay("a");
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(replayed.error, StoreError::corrupt);
  EXPECT_FALSE(replayed.result.claimed);
  EXPECT_EQ(replayed.result.existing.state, RecordState::completed);
  EXPECT_EQ(replayed.result.existing.fingerprint, "v1:fp");
  EXPECT_EQ(replayed.result.existing.response.status, 201);
  EXPECT_TRUE(replayed.result.existing.response.headers.empty());
  EXPECT_TRUE(replayed.result.existing.response.body.empty());
  // One line naming the problem and the key id; no content, no key.
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
  EXPECT_NE(log.find("\"record_corrupt\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"reason\":\"unknown_key\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"key_id\":\"k1\""), std::string::npos) << log;
  expect_no_secret_in(log, "the log line");
  EXPECT_EQ(log.find("\"a\""), std::string::npos) << "the idempotency key itself is logged: " << log;
}

TYPED_TEST(StoreEncryption, SameKeyIdWithOtherKeyMaterialIsCorrupt) {
  this->harness_.encrypt_with(keyring("k1", {{"k1", key_bytes(1)}}));
  ASSERT_NO_FATAL_FAILURE(this->store_response("a", secret_response()));
  this->harness_.encrypt_with(keyring("k1", {{"k1", key_bytes(7)}}));
  ::testing::internal::CaptureStderr();
  const ClaimOutcome replayed = this->replay("a");
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(replayed.error, StoreError::corrupt);
  EXPECT_TRUE(replayed.result.existing.response.body.empty());
  EXPECT_NE(log.find("\"reason\":\"not_authentic\""), std::string::npos) << log;
}

TYPED_TEST(StoreEncryption, RecordStoredBeforeEncryptionWasSwitchedOnStillReplays) {
  ASSERT_NO_FATAL_FAILURE(this->store_response("plain", secret_response()));  // no decorator yet
  this->harness_.encrypt_with(keyring("k1", {{"k1", key_bytes(1)}}));
  const ClaimOutcome replayed = this->replay("plain");
  ASSERT_EQ(replayed.error, StoreError::ok);
  EXPECT_EQ(replayed.result.existing.response.headers, secret_response().headers);
  EXPECT_EQ(replayed.result.existing.response.body, secret_response().body);
}

TYPED_TEST(StoreEncryption, StatusOnlyRecordsAreNotSealed) {
  const auto ring = keyring("k1", {{"k1", key_bytes(1)}});
  this->harness_.encrypt_with(ring);
  ASSERT_EQ(this->harness_.claim(this->claim_request("big", "owner-big")).error, StoreError::ok);
  core::StoredResponse status_only;
  status_only.status = 200;
  ASSERT_EQ(this->harness_.complete(store::CompleteRequest{.scope = this->scope_, .key = "big", .owner = "owner-big",
                                                           .state = RecordState::too_large, .response = status_only,
                                                           .ttl = 60s}),
            StoreError::ok);
  const core::StoredResponse raw = this->raw_response("big", ring);
  EXPECT_EQ(raw.status, 200);
  EXPECT_TRUE(raw.headers.empty());
  EXPECT_TRUE(raw.body.empty());
  const ClaimOutcome replayed = this->replay("big");
  ASSERT_EQ(replayed.error, StoreError::ok);
  EXPECT_EQ(replayed.result.existing.state, RecordState::too_large);
}

// --- Postgres: the bytes on disk, and records altered in the database ---------------------------

struct RawRow {
  int status = 0;
  std::string headers;
  std::string body;
};

class PgEncryption : public StoreEncryption<PgHarness> {
 protected:
  // Runs `sql` with text parameters on a connection of its own; binary results (bytea as is).
  // nullopt (and a test failure) when it fails.
  std::optional<std::vector<PgRow>> run(const std::string& sql, const std::vector<std::string>& params) {
    try {
      return BlockingPg(harness_.dsn()).query(sql, params, PgFormat::binary);
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
      return std::nullopt;
    }
  }

  std::optional<RawRow> raw_row(const std::string& key) {
    const std::optional<std::vector<PgRow>> rows =
        run("SELECT response_status, response_headers, response_body FROM idempotency_records WHERE scope = $1 AND key = $2",
            {scope_, key});
    if (!rows || rows->size() != 1) {
      ADD_FAILURE() << "no row for " << key;
      return std::nullopt;
    }
    const PgRow& found = rows->front();
    RawRow row;
    const std::string status = found[0].value_or("");  // int4, network order
    for (std::size_t i = 0; i < 4 && i < status.size(); ++i) {
      row.status = (row.status << 8) | static_cast<unsigned char>(status[i]);
    }
    row.headers = found[1].value_or("");
    row.body = found[2].value_or("");
    return row;
  }

  // Flips the low bit of byte `index` of the stored body, as a bad disk or a meddler would.
  void flip_body_byte(const std::string& key, std::size_t index) {
    ASSERT_TRUE(run("UPDATE idempotency_records SET response_body = set_byte(response_body, $3::int, "
                    "get_byte(response_body, $3::int) # 1) WHERE scope = $1 AND key = $2",
                    {scope_, key, std::to_string(index)}));
  }
};

TEST_F(PgEncryption, RawRowHoldsNoPlaintextAndNamesItsKey) {
  harness_.encrypt_with(keyring("k1", {{"k1", key_bytes(1)}}));
  ASSERT_NO_FATAL_FAILURE(store_response("a", secret_response()));
  const std::optional<RawRow> row = raw_row("a");
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->status, 201);
  EXPECT_EQ(row->headers, "@idemproxy-sealed: v1;kid=k1\r\n");
  EXPECT_EQ(row->body.size(), store::sealed_body_size(secret_response()));
  EXPECT_NE(row->body, secret_response().body);
  expect_no_secret_in(row->headers, "response_headers");
  expect_no_secret_in(row->body, "response_body");
}

TEST_F(PgEncryption, RotationIsVisibleInTheRawRows) {
  harness_.encrypt_with(keyring("k1", {{"k1", key_bytes(1)}}));
  ASSERT_NO_FATAL_FAILURE(store_response("old", secret_response()));
  harness_.encrypt_with(keyring("k2", {{"k1", key_bytes(1)}, {"k2", key_bytes(2)}}));
  ASSERT_NO_FATAL_FAILURE(store_response("new", secret_response()));
  EXPECT_EQ(raw_row("old").value_or(RawRow{}).headers, "@idemproxy-sealed: v1;kid=k1\r\n");
  EXPECT_EQ(raw_row("new").value_or(RawRow{}).headers, "@idemproxy-sealed: v1;kid=k2\r\n");
  EXPECT_EQ(replay("old").result.existing.response.body, secret_response().body);
  EXPECT_EQ(replay("new").result.existing.response.body, secret_response().body);
}

TEST_F(PgEncryption, AnyTamperedBodyByteMakesTheRecordCorrupt) {
  harness_.encrypt_with(keyring("k1", {{"k1", key_bytes(1)}}));
  const std::size_t size = store::sealed_body_size(secret_response());
  // In the nonce, the framed header block, the body part of the ciphertext, and the tag.
  for (const std::size_t index : {std::size_t{0}, std::size_t{11}, std::size_t{14}, size - 20, size - 1}) {
    const std::string key = "tampered-" + std::to_string(index);
    ASSERT_NO_FATAL_FAILURE(store_response(key, secret_response()));
    ASSERT_EQ(replay(key).error, StoreError::ok);  // intact before
    ASSERT_NO_FATAL_FAILURE(flip_body_byte(key, index));
    ::testing::internal::CaptureStderr();
    const ClaimOutcome replayed = replay(key);
    const std::string log = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(replayed.error, StoreError::corrupt) << "byte " << index;
    EXPECT_TRUE(replayed.result.existing.response.body.empty()) << "byte " << index;
    EXPECT_TRUE(replayed.result.existing.response.headers.empty()) << "byte " << index;
    EXPECT_NE(log.find("\"reason\":\"not_authentic\""), std::string::npos) << log;
  }
}

TEST_F(PgEncryption, EditedStatusMakesTheRecordCorrupt) {
  harness_.encrypt_with(keyring("k1", {{"k1", key_bytes(1)}}));
  ASSERT_NO_FATAL_FAILURE(store_response("a", secret_response()));
  ASSERT_TRUE(run("UPDATE idempotency_records SET response_status = 200 WHERE scope = $1 AND key = $2", {scope_, "a"}));
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(replay("a").error, StoreError::corrupt);
  ::testing::internal::GetCapturedStderr();
}

TEST_F(PgEncryption, SealedResponseCopiedToAnotherKeyIsCorrupt) {
  harness_.encrypt_with(keyring("k1", {{"k1", key_bytes(1)}}));
  ASSERT_NO_FATAL_FAILURE(store_response("victim", secret_response()));
  core::StoredResponse other = secret_response();
  other.body = "attacker's own response";
  ASSERT_NO_FATAL_FAILURE(store_response("attacker", other));
  ASSERT_TRUE(run("UPDATE idempotency_records AS target SET response_headers = source.response_headers, "
                  "response_body = source.response_body FROM idempotency_records AS source "
                  "WHERE target.scope = $1 AND target.key = 'attacker' AND source.scope = $1 AND source.key = 'victim'",
                  {scope_}));
  ::testing::internal::CaptureStderr();
  const ClaimOutcome replayed = replay("attacker");
  ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(replayed.error, StoreError::corrupt);
  EXPECT_TRUE(replayed.result.existing.response.body.empty());
}

TEST_F(PgEncryption, EditedKeyIdIsCorrupt) {
  harness_.encrypt_with(keyring("k2", {{"k1", key_bytes(1)}, {"k2", key_bytes(2)}}));
  ASSERT_NO_FATAL_FAILURE(store_response("a", secret_response()));
  ASSERT_TRUE(run("UPDATE idempotency_records SET response_headers = convert_to($3, 'UTF8') WHERE scope = $1 AND key = $2",
                  {scope_, "a", "@idemproxy-sealed: v1;kid=k1\r\n"}));
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(replay("a").error, StoreError::corrupt);
  ::testing::internal::GetCapturedStderr();
}

TEST_F(PgEncryption, TruncatedOrEmptiedBodyIsCorrupt) {
  harness_.encrypt_with(keyring("k1", {{"k1", key_bytes(1)}}));
  ASSERT_NO_FATAL_FAILURE(store_response("short", secret_response()));
  ASSERT_NO_FATAL_FAILURE(store_response("empty", secret_response()));
  ASSERT_TRUE(run("UPDATE idempotency_records SET response_body = substring(response_body from 1 for 40) "
                  "WHERE scope = $1 AND key = 'short'",
                  {scope_}));
  ASSERT_TRUE(run("UPDATE idempotency_records SET response_body = ''::bytea WHERE scope = $1 AND key = 'empty'", {scope_}));
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(replay("short").error, StoreError::corrupt);
  EXPECT_EQ(replay("empty").error, StoreError::corrupt);
  const std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("\"reason\":\"not_authentic\""), std::string::npos) << log;
  EXPECT_NE(log.find("\"reason\":\"malformed\""), std::string::npos) << log;
}

}  // namespace
}  // namespace idem::test
