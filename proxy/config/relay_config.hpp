#pragma once
// idemrelay's configuration as plain structs (the file's shape), loaded from YAML by
// config/relay_config_loader.hpp. See config/idemrelay.example.yaml for every option with its
// default. Read by app/ only: it translates these into the relay modules' options.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/admin_section.hpp"
#include "config/postgres_section.hpp"
#include "config/redis_section.hpp"
#include "relay/message_template.hpp"
#include "tls/tls_options.hpp"

namespace idem::config {

struct RelayLoopConfig {
  std::size_t batch_size = 100;                        // rows per claim
  unsigned concurrency = 2;                            // batches in flight at once (claim/publish/settle)
  std::chrono::milliseconds poll_interval{1'000};      // claim this often when no NOTIFY arrives
  bool notify = true;                                  // LISTEN for the outbox trigger's NOTIFY
  std::chrono::milliseconds lease{30'000};             // a claimed row is reserved this long
  unsigned max_attempts = 10;                          // failed publishes before a row is parked
  std::chrono::milliseconds backoff_initial{1'000};    // delay after a row's first failure
  std::chrono::milliseconds backoff_max{300'000};      // cap of the doubling delay
  std::chrono::milliseconds shutdown_timeout{10'000};  // SIGTERM: time to finish the batches in hand
  std::chrono::milliseconds stats_interval{5'000};     // backlog/lag/parked query for metrics and logs
};

// Published rows older than max_age are deleted, `batch` rows per statement.
struct RetentionConfig {
  std::chrono::milliseconds max_age{7LL * 24 * 3'600'000};  // 0: keep published rows forever
  std::size_t batch = 1'000;
  std::chrono::milliseconds interval{60'000};
};

// A destination name built from a row: literal text and {field} placeholders (one definition, the
// relay's: relay/message_template.hpp).
using relay::MessageField;
using relay::MessageTemplate;
using relay::TemplatePiece;

struct RedisSinkConfig : RedisConnectionConfig {
  std::chrono::milliseconds command_timeout{5'000};
  MessageTemplate stream;                                    // default "outbox.{aggregate_type}"
  std::uint64_t maxlen = 0;                                  // XADD MAXLEN ~ N when not 0
  std::chrono::milliseconds dedup_window{24LL * 3'600'000};  // a re-publish within it adds nothing
  std::string dedup_prefix = "idemrelay:published:";
  unsigned wait_replicas = 0;  // WAIT for this many replicas after each batch
  std::chrono::milliseconds wait_timeout{1'000};
};

inline constexpr std::size_t kMaxWebhookSecrets = 4;

struct HttpSinkConfig {
  std::string url;              // as written
  std::string host;             // from url
  std::uint16_t port = 80;      // from url (443 for https:// without one)
  MessageTemplate target;       // path and query, with placeholders
  tls::UpstreamTlsOptions tls;  // enabled by an https:// url; the rest from sink.http.tls
  std::chrono::milliseconds connect_timeout{2'000};
  std::chrono::milliseconds timeout{10'000};  // request written -> response read
  std::size_t max_connections = 8;            // requests in flight at once
  // Standard Webhooks "whsec_<base64>" secrets, each signing every delivery: one, or during a
  // rotation the new and the old (webhook-signature carries a "v1,..." per secret).
  std::vector<std::string> secrets;
  std::vector<std::string> secret_files;  // where they were read from (secret_file[s]), watched for changes
};

// sink.nats_jetstream: one JetStream publish per row, Nats-Msg-Id = the event id and its fingerprint
// (the stream's duplicate window deduplicates a re-publish; it must cover relay.lease +
// relay.backoff.max, and should cover hours: relay/nats_duplicate_window.hpp).
struct NatsSinkConfig {
  std::string url = "nats://127.0.0.1:4222";
  std::string stream;       // the JetStream stream the subjects belong to
  MessageTemplate subject;  // default "outbox.{aggregate_type}"
  std::chrono::milliseconds connect_timeout{2'000};
  std::chrono::milliseconds publish_timeout{5'000};  // a round of publishes waits this long for acks
  std::size_t max_in_flight = 256;                   // publishes awaiting their ack at once
};

enum class SinkKind { redis_streams, http, nats_jetstream };

struct SinkConfig {
  SinkKind kind = SinkKind::redis_streams;
  RedisSinkConfig redis;
  HttpSinkConfig http;
  NatsSinkConfig nats;
};

struct RelayConfig {
  std::string source_path;
  // Where outbox rows come from. The table is `outbox`, resolved through the DSN's search_path.
  // query_timeout bounds every claim, settle and delete.
  PostgresConnectionConfig postgres{
      .dsn = "", .connect_timeout = std::chrono::seconds(2), .query_timeout = std::chrono::seconds(5)};
  RelayLoopConfig relay;
  RetentionConfig retention;
  SinkConfig sink;
  // Off unless admin.listen is set (probes and /metrics).
  AdminConfig admin{.enabled = false, .host = "127.0.0.1", .port = 9465, .token = ""};
};

}  // namespace idem::config
