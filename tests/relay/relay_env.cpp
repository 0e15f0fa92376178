#include "relay/relay_env.hpp"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <regex>
#include <stdexcept>
#include <utility>

#include "pg/migrate.hpp"
#include "relay/migrations.hpp"
#include "support/config_text.hpp"
#include "support/env.hpp"
#include "support/random_hex.hpp"

namespace idem::test::relay {
std::string idemrelay_binary() {
  if (auto path = env_var("IDEMRELAY_BIN"); path && !path->empty()) return *path;
  return IDEMRELAY_BIN;
}

OutboxSchema::OutboxSchema(const std::string& prefix) : OutboxSchema(prefix, pg_dsn()) {}

OutboxSchema::OutboxSchema(const std::string& prefix, std::string server_dsn) : server_dsn_(std::move(server_dsn)) {
  name_ = prefix + "_" + random_hex(12);
  schema_dsn_ = dsn_with_search_path(server_dsn_, name_);
  BlockingPg(server_dsn_).query("CREATE SCHEMA \"" + name_ + "\"");
  const pg::MigrateResult migrated = pg::migrate(schema_dsn_, idem::relay::relay_migration_set());
  if (!migrated.ok) throw std::runtime_error("relay migrate: " + migrated.error);
}

OutboxSchema::~OutboxSchema() {
  try {
    BlockingPg(server_dsn_).query("DROP SCHEMA \"" + name_ + "\" CASCADE");
  } catch (const std::exception&) {
    // best effort: a leftover schema only costs space
  }
}

std::vector<std::int64_t> OutboxSchema::insert(const std::string& aggregate_type, const std::string& aggregate_id,
                                               int count, const std::string& event_type) {
  BlockingPg client(schema_dsn_);
  const std::vector<PgRow> rows = client.query(
      "INSERT INTO outbox (aggregate_type, aggregate_id, event_type, payload, headers) "
      "SELECT $1, $2, $3, jsonb_build_object('n', g), jsonb_build_object('trace', 't' || g) "
      "FROM generate_series(1, $4::int) AS g ORDER BY g RETURNING id",
      {aggregate_type, aggregate_id, event_type, std::to_string(count)});
  std::vector<std::int64_t> ids;
  for (const PgRow& row : rows) ids.push_back(std::stoll(*row[0]));
  std::sort(ids.begin(), ids.end());
  return ids;
}

std::vector<StreamEntry> read_stream(RedisClient& client, const std::string& key) {
  const redis::RedisReply reply = client.command({"XRANGE", key, "-", "+"});
  std::vector<StreamEntry> entries;
  for (const redis::RedisReply& item : reply.elements) {
    StreamEntry entry;
    entry.id = item.elements.at(0).text;
    const auto& fields = item.elements.at(1).elements;
    for (std::size_t i = 0; i + 1 < fields.size(); i += 2) entry.fields[fields[i].text] = fields[i + 1].text;
    entries.push_back(std::move(entry));
  }
  return entries;
}

StreamAudit audit(const std::vector<StreamEntry>& entries) {
  StreamAudit result;
  std::map<std::string, std::int64_t> last_of_aggregate;
  for (const StreamEntry& entry : entries) {
    const std::int64_t id = entry.event_id();
    ++result.copies[id];
    const std::string aggregate = entry.fields.at("aggregate_type") + "/" + entry.fields.at("aggregate_id");
    auto [it, inserted] = last_of_aggregate.try_emplace(aggregate, id);
    if (!inserted) {
      if (id <= it->second && result.ordered_per_aggregate) {
        result.ordered_per_aggregate = false;
        result.first_disorder = aggregate + ": " + std::to_string(id) + " after " + std::to_string(it->second);
      }
      it->second = std::max(it->second, id);
    }
  }
  return result;
}

std::int64_t stopped_field(const std::string& log, const std::string& field) {
  const std::size_t line = log.rfind("\"event\":\"stopped\"");
  if (line == std::string::npos) return -1;
  const std::regex pattern("\"" + field + "\":(-?[0-9]+)");
  std::smatch match;
  const std::string tail = log.substr(line);
  if (!std::regex_search(tail, match, pattern)) return -1;
  return std::stoll(match[1].str());
}

bool is_stopped(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  const std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
  // The state follows the command name, which is in parentheses and may itself hold any byte.
  const std::size_t close = text.rfind(')');
  return close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'T';
}

std::string render_config(const RelaySettings& s) {
  std::string text = "# rendered by tests/relay/relay_env.cpp\n";
  text +=
      "postgres: { dsn: " + yaml_quoted(s.dsn) + ", connect_timeout: 1s, query_timeout: " + s.query_timeout + " }\n";
  text += "relay:\n";
  text += "  batch_size: " + std::to_string(s.batch_size) + "\n";
  text += "  concurrency: " + std::to_string(s.concurrency) + "\n";
  text += "  poll_interval: " + s.poll_interval + "\n";
  text += "  lease: " + s.lease + "\n";
  text += "  max_attempts: " + std::to_string(s.max_attempts) + "\n";
  text += "  backoff: { initial: " + s.backoff_initial + ", max: " + s.backoff_max + " }\n";
  text += "  shutdown_timeout: 5s\n";
  text += "  stats_interval: 200ms\n";
  text += "retention: { max_age: " + s.retention + ", batch: " + std::to_string(s.retention_batch) +
          ", interval: " + s.retention_interval + " }\n";
  text += "sink:\n";
  if (!s.nats_url.empty()) {
    text += "  type: nats_jetstream\n";
    text += "  nats_jetstream: { url: " + yaml_quoted(s.nats_url) + ", stream: " + yaml_quoted(s.nats_stream) +
            ", subject: " + yaml_quoted(s.stream_prefix + ".{aggregate_type}") +
            ", publish_timeout: " + s.command_timeout + " }\n";
  } else if (s.http) {
    text += "  type: http\n";
    text += "  http: { url: " + yaml_quoted(s.http_url) + ", timeout: " + s.command_timeout +
            ", connect_timeout: 500ms, " +
            (s.http_secrets.empty() ? "secret: " + yaml_quoted(s.http_secret) : s.http_secrets) +
            (s.http_tls.empty() ? std::string() : ", tls: " + s.http_tls) + " }\n";
  } else {
    text += "  type: redis_streams\n";
    text += "  redis_streams:\n";
    text += "    address: 127.0.0.1:" + std::to_string(s.redis_port) + "\n";
    text += "    connect_timeout: 500ms\n";
    text += "    command_timeout: " + s.command_timeout + "\n";
    text += "    stream: " + yaml_quoted(s.stream_prefix + ".{aggregate_type}") + "\n";
    text += "    dedup_prefix: " + yaml_quoted(s.stream_prefix + ":pub:") + "\n";
    text += "    dedup_window: 1h\n";
  }
  if (s.admin_port != 0) {
    text += "admin: { listen: \"127.0.0.1:" + std::to_string(s.admin_port) + "\"";
    if (!s.admin_token.empty()) text += ", token: " + yaml_quoted(s.admin_token);
    text += " }\n";
  }
  return text;
}

RelayRunner::RelayRunner(const std::filesystem::path& dir, const RelaySettings& settings)
    : dir_(dir), config_path_(dir / ("idemrelay-" + random_hex(6) + ".yaml")) {
  write_file(config_path_, render_config(settings));
}

Process RelayRunner::start(const std::string& name, std::vector<std::pair<std::string, std::string>> env) const {
  return Process::start(
      ProcessSpec{idemrelay_binary(), {"--config", config_path_.string()}, std::move(env), dir_, name});
}

RunResult RelayRunner::run(const std::vector<std::string>& args) const {
  std::vector<std::string> all = {"--config", config_path_.string()};
  all.insert(all.end(), args.begin(), args.end());
  return run_to_exit(ProcessSpec{idemrelay_binary(), all, {}, dir_, "idemrelay-command"}, std::chrono::seconds(30));
}

}  // namespace idem::test::relay
