#pragma once
// What the relay tests share: a schema of its own holding a migrated outbox (the legacy writer is
// played with support/blocking_pg's client), stream reading over the support Redis client for
// playing the consumer, and a runner for real idemrelay processes with a rendered config.
// Blocking I/O: test threads only.
#include <sys/types.h>

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "support/blocking_pg.hpp"
#include "support/process.hpp"
#include "support/redis_client.hpp"

namespace idem::test::relay {

std::string idemrelay_binary();  // $IDEMRELAY_BIN, else the build's target

// A schema of its own with the relay's migrations applied; dropped on destruction.
class OutboxSchema {
 public:
  // On the suite's Postgres (IDEMPROXY_TEST_PG_DSN).
  explicit OutboxSchema(const std::string& prefix);
  // On the server at `server_dsn` (a private cluster a test stops and restarts).
  OutboxSchema(const std::string& prefix, std::string server_dsn);
  ~OutboxSchema();
  OutboxSchema(const OutboxSchema&) = delete;
  OutboxSchema& operator=(const OutboxSchema&) = delete;

  const std::string& name() const { return name_; }
  const std::string& dsn() const { return schema_dsn_; }  // search_path = this schema
  BlockingPg client() const { return BlockingPg(schema_dsn_); }
  // INSERTs `count` rows for one aggregate in one transaction; returns their ids in order.
  std::vector<std::int64_t> insert(const std::string& aggregate_type, const std::string& aggregate_id, int count,
                                   const std::string& event_type = "happened");

 private:
  std::string server_dsn_;
  std::string name_;
  std::string schema_dsn_;
};

struct StreamEntry {
  std::string id;
  std::map<std::string, std::string> fields;
  std::int64_t event_id() const { return std::stoll(fields.at("event_id")); }
};

// The whole stream at `key` (XRANGE - +), oldest first; empty when there is no such key.
std::vector<StreamEntry> read_stream(RedisClient& client, const std::string& key);

// Checks on what reached a stream: each event exactly once, per-aggregate id order.
struct StreamAudit {
  std::map<std::int64_t, int> copies;  // event_id -> entries
  bool ordered_per_aggregate = true;
  std::string first_disorder;  // description of the first out-of-order pair
};
StreamAudit audit(const std::vector<StreamEntry>& entries);

// A field of the JSON "stopped" line idemrelay logs on exit (its counters); -1 when absent.
std::int64_t stopped_field(const std::string& log, const std::string& field);

// True while `pid` is stopped by a signal (state T in /proc/PID/stat): a SIGSTOP took hold.
bool is_stopped(pid_t pid);

struct RelaySettings {
  std::string dsn;
  std::uint16_t redis_port = 0;
  std::string stream_prefix;  // streams are "<prefix>.{aggregate_type}", markers "<prefix>:pub:"
  int batch_size = 50;
  int concurrency = 2;
  std::string lease = "3s";
  std::string poll_interval = "100ms";
  int max_attempts = 5;
  std::string backoff_initial = "50ms";
  std::string backoff_max = "200ms";
  std::string retention = "0";  // max_age; "0" disables
  int retention_batch = 100;
  std::string retention_interval = "200ms";
  std::string command_timeout = "500ms";
  std::string query_timeout = "1s";  // postgres.query_timeout (statement_timeout: 90% of it)
  bool http = false;                 // HTTP sink instead of Redis
  std::string nats_url;              // NATS JetStream sink instead of Redis when set
  std::string nats_stream;           // its stream; subjects "<stream_prefix>.{aggregate_type}"
  std::string http_url;
  std::string http_tls;  // YAML for sink.http.tls (a flow mapping); empty: none
  std::string http_secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
  std::string http_secrets;      // in place of http_secret when set: "secret_files: [a, b]", "secrets: [...]"
  std::uint16_t admin_port = 0;  // 0: no admin listener
  std::string admin_token;       // empty: none
};
std::string render_config(const RelaySettings& settings);

// One idemrelay config file and the processes started from it.
class RelayRunner {
 public:
  RelayRunner(const std::filesystem::path& dir, const RelaySettings& settings);
  const std::filesystem::path& config_path() const { return config_path_; }
  // Starts `idemrelay --config F` with `env` added to the environment.
  Process start(const std::string& name, std::vector<std::pair<std::string, std::string>> env = {}) const;
  // Runs idemrelay --config F <args> to completion.
  RunResult run(const std::vector<std::string>& args) const;

 private:
  std::filesystem::path dir_;
  std::filesystem::path config_path_;
};

}  // namespace idem::test::relay
