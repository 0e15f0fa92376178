// Webhook secret rotation without a flag day: the relay signs with every listed secret
// (webhook-signature "v1,<new> v1,<old>"), and takes new secrets on SIGHUP, on a change of its
// config file, and on a change of a secret file. The consumer here verifies each delivery itself,
// per the Standard Webhooks specification, with OpenSSL (not the relay's signer).
#include <gtest/gtest.h>

#include <fcntl.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/stat.h>

#include <array>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "relay/relay_env.hpp"
#include "relay/relay_fixture.hpp"
#include "support/config_text.hpp"
#include "support/eventually.hpp"
#include "support/raw_upstream.hpp"

namespace idem::test::relay {
namespace {

using namespace std::chrono_literals;

// Three test secrets (23-24 bytes each; the relay wants at least 16).
const std::string kOld = "whsec_b2xkLXNlY3JldC1mb3ItdGVzdHMtMDE=";
const std::string kNew = "whsec_bmV3LXNlY3JldC1mb3ItdGVzdHMtMDI=";
const std::string kNewer = "whsec_bmV3ZXItc2VjcmV0LWZvci10ZXN0cy0z";

struct Delivery {
  std::string target;
  std::string id;
  std::string timestamp;
  std::string signature;
  std::string body;
};

std::string header_value(const std::string& head, const std::string& name) {
  std::size_t at = 0;
  while ((at = head.find("\r\n", at)) != std::string::npos) {
    at += 2;
    const std::size_t colon = head.find(':', at);
    const std::size_t end = head.find("\r\n", at);
    if (colon == std::string::npos || colon > end) continue;
    std::string field = head.substr(at, colon - at);
    for (char& c : field) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (field != name) continue;
    std::size_t value = colon + 1;
    while (value < end && head[value] == ' ') ++value;
    return head.substr(value, end - value);
  }
  return "";
}

// Every request the consumer received, in order (Content-Length framed, as the relay sends them).
std::vector<Delivery> deliveries(const std::string& received) {
  std::vector<Delivery> out;
  std::size_t at = 0;
  while (at < received.size()) {
    const std::size_t head_end = received.find("\r\n\r\n", at);
    if (head_end == std::string::npos) break;
    const std::string head = received.substr(at, head_end + 2 - at);
    const std::size_t length = std::stoul(header_value(head, "content-length"));
    const std::size_t space = head.find(' ');
    Delivery delivery{.target = head.substr(space + 1, head.find(' ', space + 1) - space - 1),
                      .id = header_value(head, "webhook-id"),
                      .timestamp = header_value(head, "webhook-timestamp"),
                      .signature = header_value(head, "webhook-signature"),
                      .body = received.substr(head_end + 4, length)};
    out.push_back(std::move(delivery));
    at = head_end + 4 + length;
  }
  return out;
}

std::vector<Delivery> deliveries_to(const RawUpstream& consumer, const std::string& target) {
  std::vector<Delivery> out;
  for (Delivery& delivery : deliveries(consumer.received())) {
    if (delivery.target == target) out.push_back(std::move(delivery));
  }
  return out;
}

std::string base64(const unsigned char* data, std::size_t size) {
  std::string out(4 * ((size + 2) / 3) + 1, '\0');
  const int written = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()), data, static_cast<int>(size));
  out.resize(static_cast<std::size_t>(written));
  return out;
}

std::string unbase64(const std::string& text) {
  std::string out(3 * text.size() / 4 + 1, '\0');
  const int written =
      EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()), reinterpret_cast<const unsigned char*>(text.data()),
                      static_cast<int>(text.size()));
  std::size_t padding = 0;  // EVP_DecodeBlock counts each '=' as a zero byte
  for (auto it = text.rbegin(); it != text.rend() && *it == '='; ++it) ++padding;
  out.resize(static_cast<std::size_t>(written) - padding);
  return out;
}

// A consumer that knows `secret` only: Standard Webhooks verification (any "v1," signature in the
// space-separated list equal to base64 HMAC-SHA256(key, "id.timestamp.body"), timestamp within 5 min).
bool consumer_accepts(const std::string& secret, const Delivery& delivery) {
  const std::string key = unbase64(secret.substr(std::string("whsec_").size()));
  const std::string content = delivery.id + "." + delivery.timestamp + "." + delivery.body;
  std::array<unsigned char, EVP_MAX_MD_SIZE> mac{};
  unsigned int mac_length = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()), reinterpret_cast<const unsigned char*>(content.data()),
       content.size(), mac.data(), &mac_length);
  const std::string expected = base64(mac.data(), mac_length);
  if (std::llabs(std::stoll(delivery.timestamp) - static_cast<long long>(std::time(nullptr))) > 300) return false;
  std::size_t at = 0;
  while (at <= delivery.signature.size()) {
    const std::size_t end = std::min(delivery.signature.find(' ', at), delivery.signature.size());
    const std::string entry = delivery.signature.substr(at, end - at);
    if (entry.starts_with("v1,") && entry.substr(3) == expected) return true;
    at = end + 1;
  }
  return false;
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t count = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++count;
  return count;
}

// Replaces `path` in one rename: the relay never reads a half-written file.
void replace_file(const std::filesystem::path& path, const std::string& text) {
  const std::filesystem::path next = path.string() + ".next";
  write_file(next, text);
  std::filesystem::rename(next, path);
}

class RelaySecretRotation : public RelayFixture {};

TEST_F(RelaySecretRotation, ConsumersKnowingOnlyTheOldOrOnlyTheNewSecretBothVerifyDuringTheOverlap) {
  RawUpstream consumer;
  const std::filesystem::path old_file = dir_->path() / "old.secret";
  const std::filesystem::path new_file = dir_->path() / "new.secret";
  write_file(old_file, kOld + "\n");
  write_file(new_file, kNew + "\n");
  settings_.http = true;
  settings_.http_url = "http://127.0.0.1:" + std::to_string(consumer.port()) + "/hooks/{event_type}";
  settings_.http_secrets = "secret_files: [" + old_file.string() + "]";
  const RelayRunner runner(dir_->path(), settings_);
  Process relay = runner.start("relay");
  const std::string reloaded = "\"event\":\"webhook_secrets_reloaded\"";

  // Before the rotation: the old secret only.
  schema_->insert("order", "r1", 3, "before");
  ASSERT_TRUE(drained(10s)) << relay.describe();
  const auto before = deliveries_to(consumer, "/hooks/before");
  ASSERT_EQ(before.size(), 3u) << consumer.received();
  for (const Delivery& delivery : before) {
    EXPECT_TRUE(consumer_accepts(kOld, delivery)) << delivery.signature;
    EXPECT_FALSE(consumer_accepts(kNew, delivery)) << delivery.signature;
  }

  // The overlap, by editing the config file (no signal): new first, then old. Both consumers accept.
  settings_.http_secrets = "secret_files: [" + new_file.string() + ", " + old_file.string() + "]";
  replace_file(runner.config_path(), render_config(settings_));
  ASSERT_TRUE(eventually([&] { return count_of(relay.stderr_text(), reloaded) == 1; }, 5s)) << relay.describe();
  EXPECT_NE(relay.stderr_text().find("\"reason\":\"file_changed\",\"secrets\":2"), std::string::npos)
      << relay.stderr_text();
  schema_->insert("order", "r2", 3, "overlap");
  ASSERT_TRUE(drained(10s)) << relay.describe();
  const auto overlap = deliveries_to(consumer, "/hooks/overlap");
  ASSERT_EQ(overlap.size(), 3u);
  for (const Delivery& delivery : overlap) {
    EXPECT_EQ(count_of(delivery.signature, "v1,"), 2u) << delivery.signature;
    EXPECT_TRUE(consumer_accepts(kOld, delivery)) << "a consumer still on the old secret: " << delivery.signature;
    EXPECT_TRUE(consumer_accepts(kNew, delivery)) << "a consumer already on the new secret: " << delivery.signature;
  }

  // The old secret retired, taken on SIGHUP: the config is rewritten in place with its size and
  // mtime kept, so the file watch cannot see it and only the signal can.
  settings_.http_secrets = "secret_files: [" + new_file.string() + "]";
  std::string retired = render_config(settings_);
  const std::string overlapping = render_config([&] {
    RelaySettings copy = settings_;
    copy.http_secrets = "secret_files: [" + new_file.string() + ", " + old_file.string() + "]";
    return copy;
  }());
  ASSERT_LT(retired.size(), overlapping.size());
  retired.append(overlapping.size() - retired.size() - 1, ' ').push_back('\n');  // YAML ignores trailing spaces
  struct stat seen {};
  ASSERT_EQ(::stat(runner.config_path().c_str(), &seen), 0);
  {
    std::FILE* file = std::fopen(runner.config_path().c_str(), "r+");
    ASSERT_NE(file, nullptr);
    std::fwrite(retired.data(), 1, retired.size(), file);
    std::fclose(file);
  }
  const std::array<timespec, 2> times{seen.st_atim, seen.st_mtim};
  ASSERT_EQ(::utimensat(AT_FDCWD, runner.config_path().c_str(), times.data(), 0), 0);
  std::this_thread::sleep_for(1500ms);
  ASSERT_EQ(count_of(relay.stderr_text(), reloaded), 1u) << "the watch must not have seen the in-place edit";
  ASSERT_TRUE(relay.signal(SIGHUP));
  ASSERT_TRUE(eventually([&] { return count_of(relay.stderr_text(), reloaded) == 2; }, 5s)) << relay.describe();
  EXPECT_NE(relay.stderr_text().find("\"reason\":\"signal\",\"secrets\":1"), std::string::npos) << relay.stderr_text();
  schema_->insert("order", "r3", 3, "after");
  ASSERT_TRUE(drained(10s)) << relay.describe();
  const auto after = deliveries_to(consumer, "/hooks/after");
  ASSERT_EQ(after.size(), 3u);
  for (const Delivery& delivery : after) {
    EXPECT_TRUE(consumer_accepts(kNew, delivery)) << delivery.signature;
    EXPECT_FALSE(consumer_accepts(kOld, delivery)) << "the old secret is retired: " << delivery.signature;
  }

  // A secret file rewritten (as a Kubernetes Secret volume does): taken without a signal.
  replace_file(new_file, kNewer + "\n");
  ASSERT_TRUE(eventually([&] { return count_of(relay.stderr_text(), reloaded) == 3; }, 5s)) << relay.describe();
  EXPECT_NE(relay.stderr_text().find("\"reason\":\"secret_files_changed\",\"secrets\":1"), std::string::npos);
  schema_->insert("order", "r4", 2, "rewritten");
  ASSERT_TRUE(drained(10s)) << relay.describe();
  const auto rewritten = deliveries_to(consumer, "/hooks/rewritten");
  ASSERT_EQ(rewritten.size(), 2u);
  for (const Delivery& delivery : rewritten) {
    EXPECT_TRUE(consumer_accepts(kNewer, delivery)) << delivery.signature;
    EXPECT_FALSE(consumer_accepts(kNew, delivery)) << delivery.signature;
  }

  // A broken edit is refused with its position; the secrets in force stay.
  replace_file(runner.config_path(), "sink: [\n");
  ASSERT_TRUE(
      eventually([&] { return relay.stderr_text().find("\"event\":\"reload_failed\"") != std::string::npos; }, 5s))
      << relay.describe();
  schema_->insert("order", "r5", 1, "kept");
  ASSERT_TRUE(drained(10s)) << relay.describe();
  const auto kept = deliveries_to(consumer, "/hooks/kept");
  ASSERT_EQ(kept.size(), 1u);
  EXPECT_TRUE(consumer_accepts(kNewer, kept[0])) << kept[0].signature;
  EXPECT_EQ(relay.terminate(10s), 0) << relay.describe();
}

}  // namespace
}  // namespace idem::test::relay
