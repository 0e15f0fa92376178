// idemrelay's config schema: walks the YAML document into a RelayConfig, reporting every problem
// with its position (the shared YamlReader does the typed reads and ${VAR} expansion).
#include "config/relay_config_loader.hpp"

#include <algorithm>
#include <utility>

#include <yaml-cpp/yaml.h>

#include "config/addresses.hpp"
#include "config/admin_section.hpp"
#include "config/client_tls_reader.hpp"
#include "config/config_file.hpp"
#include "config/file_fields.hpp"
#include "config/issue_sink.hpp"
#include "config/postgres_section.hpp"
#include "config/redis_section.hpp"
#include "config/units.hpp"
#include "config/yaml_reader.hpp"
#include "crypto/base64.hpp"

namespace idem::config {
namespace {

using detail::assign;
using detail::Field;
using detail::Fields;
using detail::IssueSink;
using detail::quoted;
using detail::YamlReader;
using Keys = std::vector<std::string_view>;

const Keys kTopLevelKeys = {"postgres", "relay", "retention", "sink", "admin"};
const Keys kPostgresKeys = {"dsn", "connect_timeout", "query_timeout"};
const Keys kRelayKeys = {"batch_size",   "concurrency", "poll_interval",    "notify",        "lease",
                         "max_attempts", "backoff",     "shutdown_timeout", "stats_interval"};
const Keys kBackoffKeys = {"initial", "max"};
const Keys kRetentionKeys = {"max_age", "batch", "interval"};
const Keys kSinkKeys = {"type", "redis_streams", "http", "nats_jetstream"};
const Keys kNatsKeys = {"url", "stream", "subject", "connect_timeout", "publish_timeout", "max_in_flight"};
const Keys kRedisKeys = {"address", "password", "database",     "connect_timeout", "command_timeout",
                         "stream",  "maxlen",   "dedup_window", "dedup_prefix",    "wait"};
const Keys kWaitKeys = {"replicas", "timeout"};
const Keys kHttpKeys = {"url",     "connect_timeout", "timeout", "max_connections", "secret", "secret_file",
                        "secrets", "secret_files",    "tls"};

constexpr std::uint64_t kMaxBatchSize = 10'000;
constexpr std::uint64_t kMaxConcurrency = 64;
constexpr std::uint64_t kMaxAttempts = 1'000;
constexpr std::size_t kMaxSecretFileBytes = 4'096;
constexpr std::string_view kSecretPrefix = "whsec_";
constexpr std::size_t kMinSecretBytes = 16;

std::optional<MessageField> field_named(std::string_view name) {
  if (name == "event_id") return MessageField::event_id;
  if (name == "event_type") return MessageField::event_type;
  if (name == "aggregate_type") return MessageField::aggregate_type;
  if (name == "aggregate_id") return MessageField::aggregate_id;
  return std::nullopt;
}

class RelayConfigReader {
 public:
  explicit RelayConfigReader(YamlReader& yaml) : yaml_(yaml), issues_(yaml.issues()) {}

  RelayConfig read(const YAML::Node& root);

 private:
  void read_postgres(const Field* field, const YAML::Mark& top, PostgresConnectionConfig& postgres);
  void read_relay(const Field& field, RelayLoopConfig& relay);
  void read_retention(const Field& field, RetentionConfig& retention);
  void read_sink(const Field* field, const YAML::Mark& top, SinkConfig& sink);
  void read_redis(const Field* field, const YAML::Mark& parent, RedisSinkConfig& redis);
  void read_http(const Field* field, const YAML::Mark& parent, HttpSinkConfig& http);
  void read_secrets(const Fields& fields, HttpSinkConfig& http);
  void read_nats(const Field* field, const YAML::Mark& parent, NatsSinkConfig& nats);
  std::optional<MessageTemplate> read_template(const Field& field, std::string_view path);
  void check_lease(const RelayConfig& config, const YAML::Mark& at);

  YamlReader& yaml_;
  IssueSink& issues_;
  std::optional<YAML::Mark> lease_mark_;
};

RelayConfig RelayConfigReader::read(const YAML::Node& root) {
  RelayConfig config;
  std::string unused;
  config.sink.redis.stream = *parse_message_template("outbox.{aggregate_type}", unused);
  config.sink.nats.subject = *parse_message_template("outbox.{aggregate_type}", unused);
  const YAML::Mark start = root.IsNull() ? YAML::Mark() : root.Mark();
  const std::optional<Fields> top = yaml_.mapping(root, start, "", kTopLevelKeys);
  if (!top) return config;
  read_postgres(top->find("postgres"), top->mark(), config.postgres);
  if (const Field* field = top->find("relay")) read_relay(*field, config.relay);
  if (const Field* field = top->find("retention")) read_retention(*field, config.retention);
  read_sink(top->find("sink"), top->mark(), config.sink);
  if (const Field* field = top->find("admin")) detail::read_admin(yaml_, *field, config.admin);
  check_lease(config, lease_mark_.value_or(top->mark()));
  return config;
}

void RelayConfigReader::read_postgres(const Field* field, const YAML::Mark& top, PostgresConnectionConfig& postgres) {
  const std::optional<Fields> fields = field ? yaml_.mapping(field->value, field->key.Mark(), "postgres", kPostgresKeys)
                                             : std::optional<Fields>(Fields(top));
  if (!fields) return;
  // A malformed query_timeout is reported; check_lease then uses the default, which is harmless.
  detail::read_postgres_connection(yaml_, *fields, "postgres", postgres);
}

void RelayConfigReader::read_relay(const Field& field, RelayLoopConfig& relay) {
  const std::optional<Fields> fields = yaml_.mapping(field.value, field.key.Mark(), "relay", kRelayKeys);
  if (!fields) return;
  if (const Field* f = fields->find("batch_size")) {
    if (const auto n = yaml_.integer(*f, "relay.batch_size", 1, kMaxBatchSize))
      relay.batch_size = static_cast<std::size_t>(*n);
  }
  if (const Field* f = fields->find("concurrency")) {
    if (const auto n = yaml_.integer(*f, "relay.concurrency", 1, kMaxConcurrency))
      relay.concurrency = static_cast<unsigned>(*n);
  }
  if (const Field* f = fields->find("poll_interval"))
    assign(yaml_.duration(*f, "relay.poll_interval", false), relay.poll_interval);
  if (const Field* f = fields->find("notify")) assign(yaml_.boolean(*f, "relay.notify"), relay.notify);
  if (const Field* f = fields->find("lease")) {
    lease_mark_ = f->value.Mark();
    assign(yaml_.duration(*f, "relay.lease", false), relay.lease);
  }
  if (const Field* f = fields->find("max_attempts")) {
    if (const auto n = yaml_.integer(*f, "relay.max_attempts", 1, kMaxAttempts))
      relay.max_attempts = static_cast<unsigned>(*n);
  }
  if (const Field* f = fields->find("backoff")) {
    if (const auto backoff = yaml_.mapping(f->value, f->key.Mark(), "relay.backoff", kBackoffKeys)) {
      if (const Field* b = backoff->find("initial"))
        assign(yaml_.duration(*b, "relay.backoff.initial", false), relay.backoff_initial);
      if (const Field* b = backoff->find("max")) {
        assign(yaml_.duration(*b, "relay.backoff.max", false), relay.backoff_max);
        if (relay.backoff_max < relay.backoff_initial) {
          issues_.error(b->value.Mark(), "relay.backoff.max (" + detail::format_duration(relay.backoff_max) +
                                             ") must not be below relay.backoff.initial (" +
                                             detail::format_duration(relay.backoff_initial) + ")");
        }
      }
    }
  }
  if (const Field* f = fields->find("shutdown_timeout")) {
    assign(yaml_.duration(*f, "relay.shutdown_timeout", false), relay.shutdown_timeout);
  }
  if (const Field* f = fields->find("stats_interval"))
    assign(yaml_.duration(*f, "relay.stats_interval", false), relay.stats_interval);
}

void RelayConfigReader::read_retention(const Field& field, RetentionConfig& retention) {
  const std::optional<Fields> fields = yaml_.mapping(field.value, field.key.Mark(), "retention", kRetentionKeys);
  if (!fields) return;
  if (const Field* f = fields->find("max_age"))
    assign(yaml_.duration(*f, "retention.max_age", true), retention.max_age);
  if (const Field* f = fields->find("batch")) {
    if (const auto n = yaml_.integer(*f, "retention.batch", 1, 100'000)) retention.batch = static_cast<std::size_t>(*n);
  }
  if (const Field* f = fields->find("interval"))
    assign(yaml_.duration(*f, "retention.interval", false), retention.interval);
}

void RelayConfigReader::read_sink(const Field* field, const YAML::Mark& top, SinkConfig& sink) {
  if (!field) {
    issues_.error(top, "sink is required (sink: { type: redis_streams, redis_streams: {...} } or type: http)");
    return;
  }
  const std::optional<Fields> fields = yaml_.mapping(field->value, field->key.Mark(), "sink", kSinkKeys);
  if (!fields) return;
  const Field* type = fields->find("type");
  if (!type) {
    issues_.error(fields->mark(), "sink.type is required (redis_streams | http | nats_jetstream)");
    return;
  }
  const auto kind = yaml_.one_of<SinkKind>(*type, "sink.type",
                                           {{"redis_streams", SinkKind::redis_streams},
                                            {"http", SinkKind::http},
                                            {"nats_jetstream", SinkKind::nats_jetstream}});
  if (!kind) return;
  sink.kind = *kind;
  switch (*kind) {
    case SinkKind::redis_streams:
      if (const Field* other = fields->find("http")) {
        issues_.warning(other->key.Mark(), "sink.http is ignored: sink.type is redis_streams");
      }
      read_redis(fields->find("redis_streams"), fields->mark(), sink.redis);
      return;
    case SinkKind::http:
      if (const Field* other = fields->find("redis_streams")) {
        issues_.warning(other->key.Mark(), "sink.redis_streams is ignored: sink.type is http");
      }
      read_http(fields->find("http"), fields->mark(), sink.http);
      return;
    case SinkKind::nats_jetstream: read_nats(fields->find("nats_jetstream"), fields->mark(), sink.nats); return;
  }
}

void RelayConfigReader::read_nats(const Field* field, const YAML::Mark& parent, NatsSinkConfig& nats) {
  const std::optional<Fields> fields =
      field ? yaml_.mapping(field->value, field->key.Mark(), "sink.nats_jetstream", kNatsKeys)
            : std::optional<Fields>(Fields(parent));
  if (!fields) return;
  if (const Field* f = fields->find("url")) assign(yaml_.string(*f, "sink.nats_jetstream.url"), nats.url);
  if (auto stream =
          yaml_.required_string(*fields, "stream", "sink.nats_jetstream.stream",
                                "sink.nats_jetstream.stream is required (the JetStream stream to publish to)")) {
    nats.stream = std::move(*stream);
  }
  if (const Field* f = fields->find("subject")) assign(read_template(*f, "sink.nats_jetstream.subject"), nats.subject);
  if (const Field* f = fields->find("connect_timeout"))
    assign(yaml_.duration(*f, "sink.nats_jetstream.connect_timeout", false), nats.connect_timeout);
  if (const Field* f = fields->find("publish_timeout"))
    assign(yaml_.duration(*f, "sink.nats_jetstream.publish_timeout", false), nats.publish_timeout);
  if (const Field* f = fields->find("max_in_flight")) {
    if (const auto n = yaml_.integer(*f, "sink.nats_jetstream.max_in_flight", 1, 4'096))
      nats.max_in_flight = static_cast<std::size_t>(*n);
  }
}

void RelayConfigReader::read_redis(const Field* field, const YAML::Mark& parent, RedisSinkConfig& redis) {
  const std::optional<Fields> fields =
      field ? yaml_.mapping(field->value, field->key.Mark(), "sink.redis_streams", kRedisKeys)
            : std::optional<Fields>(Fields(parent));
  if (!fields) return;
  detail::read_redis_connection(yaml_, *fields, "sink.redis_streams", redis);
  if (const Field* f = fields->find("command_timeout")) {
    assign(yaml_.duration(*f, "sink.redis_streams.command_timeout", false), redis.command_timeout);
  }
  if (const Field* f = fields->find("stream")) assign(read_template(*f, "sink.redis_streams.stream"), redis.stream);
  if (const Field* f = fields->find("maxlen"))
    assign(yaml_.integer(*f, "sink.redis_streams.maxlen", 0, 1'000'000'000'000ULL), redis.maxlen);
  if (const Field* f = fields->find("dedup_window")) {
    const auto window = yaml_.duration(*f, "sink.redis_streams.dedup_window", false);
    if (window && *window < std::chrono::seconds(1)) {
      issues_.error(f->value.Mark(),
                    "sink.redis_streams.dedup_window must be at least 1s (Redis expires keys in seconds)");
    } else {
      assign(window, redis.dedup_window);
    }
  }
  if (const Field* f = fields->find("dedup_prefix")) {
    if (auto prefix = yaml_.string(*f, "sink.redis_streams.dedup_prefix")) {
      if (prefix->empty()) {
        issues_.error(f->value.Mark(),
                      "sink.redis_streams.dedup_prefix must not be empty (markers would collide with other keys)");
      } else {
        redis.dedup_prefix = std::move(*prefix);
      }
    }
  }
  if (const Field* f = fields->find("wait")) {
    if (const auto wait = yaml_.mapping(f->value, f->key.Mark(), "sink.redis_streams.wait", kWaitKeys)) {
      if (const Field* w = wait->find("replicas")) {
        if (const auto n = yaml_.integer(*w, "sink.redis_streams.wait.replicas", 0, 100))
          redis.wait_replicas = static_cast<unsigned>(*n);
      }
      if (const Field* w = wait->find("timeout"))
        assign(yaml_.duration(*w, "sink.redis_streams.wait.timeout", false), redis.wait_timeout);
    }
  }
}

void RelayConfigReader::read_http(const Field* field, const YAML::Mark& parent, HttpSinkConfig& http) {
  const std::optional<Fields> fields = field ? yaml_.mapping(field->value, field->key.Mark(), "sink.http", kHttpKeys)
                                             : std::optional<Fields>(Fields(parent));
  if (!fields) return;
  if (const Field* f = fields->find("url")) {
    if (const auto url = yaml_.string(*f, "sink.http.url")) {
      const std::string_view text(*url);
      const bool https = text.starts_with("https://");
      const std::string_view scheme = https ? "https://" : "http://";
      std::optional<detail::HostPort> address;
      std::string_view target = "/";
      if (text.starts_with(scheme)) {
        const std::string_view rest = text.substr(scheme.size());
        const std::size_t slash = rest.find('/');
        const std::string_view authority = rest.substr(0, slash);
        if (slash != std::string_view::npos) target = rest.substr(slash);
        const bool has_port = authority.starts_with('[') ? authority.find("]:") != std::string_view::npos
                                                         : authority.find(':') != std::string_view::npos;
        if (!authority.empty() && authority.find_first_of("@{}?#") == std::string_view::npos) {
          address = detail::parse_host_port(has_port ? std::string(authority)
                                                     : std::string(authority) + (https ? ":443" : ":80"));
        }
      }
      if (!address) {
        issues_.error(f->value.Mark(), "sink.http.url must be http[s]://host[:port]/path, got " + quoted(text));
      } else {
        std::string error;
        if (auto parsed = parse_message_template(target, error)) {
          http.url = *url;
          http.host = address->host;
          http.port = address->port;
          http.target = std::move(*parsed);
          http.tls.enabled = https;
        } else {
          issues_.error(f->value.Mark(), "bad sink.http.url " + quoted(text) + ": " + error);
        }
      }
    }
  } else {
    issues_.error(fields->mark(), "sink.http.url is required (e.g. url: http://127.0.0.1:8080/events/{event_type})");
  }
  if (const Field* f = fields->find("tls")) {
    detail::read_client_tls(yaml_, *f, "sink.http.tls", http.tls);
    if (!http.tls.enabled) issues_.warning(f->key.Mark(), "sink.http.tls is ignored: sink.http.url is not https://");
  }
  if (const Field* f = fields->find("connect_timeout"))
    assign(yaml_.duration(*f, "sink.http.connect_timeout", false), http.connect_timeout);
  if (const Field* f = fields->find("timeout")) assign(yaml_.duration(*f, "sink.http.timeout", false), http.timeout);
  if (const Field* f = fields->find("max_connections")) {
    if (const auto n = yaml_.integer(*f, "sink.http.max_connections", 1, 1'024))
      http.max_connections = static_cast<std::size_t>(*n);
  }
  read_secrets(*fields, http);
}

// Exactly one of secret, secret_file, secrets, secret_files. The lists hold the secrets of a
// rotation (new first, then old): every delivery is signed with each of them.
void RelayConfigReader::read_secrets(const Fields& fields, HttpSinkConfig& http) {
  const Field* given = nullptr;
  for (const std::string_view key : {"secret", "secret_file", "secrets", "secret_files"}) {
    const Field* field = fields.find(key);
    if (field == nullptr) continue;
    if (given != nullptr) {
      issues_.error(field->key.Mark(), "give one of sink.http.secret, secret_file, secrets, secret_files; not " +
                                           given->name + " and " + field->name);
      return;
    }
    given = field;
  }
  if (given == nullptr) {
    issues_.error(fields.mark(),
                  "sink.http.secret, secret_file, secrets or secret_files is required (webhook-signature needs it)");
    return;
  }
  const bool from_files = given->name == "secret_files" || given->name == "secret_file";
  const bool listed = given->name == "secrets" || given->name == "secret_files";
  std::vector<Field> items;
  if (listed) {
    const auto elements = yaml_.sequence(*given, "sink.http." + given->name);
    if (!elements) return;
    if (elements->empty() || elements->size() > kMaxWebhookSecrets) {
      issues_.error(given->value.Mark(), "sink.http." + given->name + " takes 1 to " +
                                             std::to_string(kMaxWebhookSecrets) + " entries (new first, then old)");
      return;
    }
    for (const YAML::Node& element : *elements) items.push_back(Field{given->name, given->key, element});
  } else {
    items.push_back(*given);
  }
  std::vector<std::string> secrets;
  std::vector<std::string> files;
  for (std::size_t i = 0; i < items.size(); ++i) {
    const Field& item = items[i];
    const std::string path = "sink.http." + given->name + (listed ? "[" + std::to_string(i) + "]" : "");
    std::optional<std::string> value;
    if (from_files) {
      std::optional<detail::SecretFile> file = detail::read_secret_file(yaml_, item, path, kMaxSecretFileBytes);
      if (!file) return;
      files.push_back(file->path);
      value = std::move(file->text);
    } else {
      value = yaml_.string(item, path);
      if (!value) return;
    }
    const std::string_view text(*value);
    const std::optional<std::string> key =
        text.starts_with(kSecretPrefix) ? crypto::base64_decode(text.substr(kSecretPrefix.size())) : std::nullopt;
    if (!key || key->size() < kMinSecretBytes) {  // the rule WebhookSigner::from_secrets applies
      // Never echo the secret itself.
      issues_.error(item.value.Mark(),
                    path + ": the webhook secret must be \"whsec_\" followed by base64 of at least 16 random bytes");
      return;
    }
    secrets.push_back(std::move(*value));
  }
  http.secrets = std::move(secrets);
  http.secret_files = std::move(files);
}

std::optional<MessageTemplate> RelayConfigReader::read_template(const Field& field, std::string_view path) {
  const auto text = yaml_.string(field, path);
  if (!text) return std::nullopt;
  std::string error;
  auto parsed = parse_message_template(*text, error);
  if (!parsed)
    issues_.error(field.value.Mark(), "bad template " + quoted(*text) + " for " + std::string(path) + ": " + error);
  return parsed;
}

void RelayConfigReader::check_lease(const RelayConfig& config, const YAML::Mark& at) {
  // A batch must be published and settled well inside its lease, or another relay may claim the
  // rows while they are still in hand (safe, thanks to the fence and the dedup, but wasteful).
  std::chrono::milliseconds publish = config.sink.http.timeout;
  switch (config.sink.kind) {
    case SinkKind::redis_streams: publish = config.sink.redis.command_timeout; break;
    case SinkKind::http: break;
    case SinkKind::nats_jetstream: publish = config.sink.nats.publish_timeout; break;
  }
  const std::chrono::milliseconds needed = publish + 2 * config.postgres.query_timeout;
  if (config.relay.lease <= needed) {
    issues_.error(at, "relay.lease (" + detail::format_duration(config.relay.lease) +
                          ") must exceed the sink's timeout plus twice postgres.query_timeout (" +
                          detail::format_duration(needed) + ")");
  }
}

}  // namespace

std::optional<MessageTemplate> parse_message_template(std::string_view text, std::string& error) {
  MessageTemplate parsed;
  parsed.text = std::string(text);
  std::string literal;
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '{' && i + 1 < text.size() && text[i + 1] == '{') {
      literal.push_back('{');
      ++i;
    } else if (c == '}' && i + 1 < text.size() && text[i + 1] == '}') {
      literal.push_back('}');
      ++i;
    } else if (c == '{') {
      const std::size_t close = text.find('}', i);
      if (close == std::string_view::npos) {
        error = "unterminated \"{\" (write {{ for a literal brace)";
        return std::nullopt;
      }
      const std::string_view name = text.substr(i + 1, close - i - 1);
      const auto field = field_named(name);
      if (!field) {
        error = "unknown placeholder {" + std::string(name) +
                "} (expected {event_id}, {event_type}, {aggregate_type} or {aggregate_id})";
        return std::nullopt;
      }
      if (!literal.empty()) parsed.pieces.push_back({std::move(literal), std::nullopt});
      literal.clear();
      parsed.pieces.push_back({{}, field});
      i = close;
    } else if (c == '}') {
      error = "unmatched \"}\" (write }} for a literal brace)";
      return std::nullopt;
    } else {
      literal.push_back(c);
    }
  }
  if (!literal.empty()) parsed.pieces.push_back({std::move(literal), std::nullopt});
  if (parsed.pieces.empty()) {
    error = "the template is empty";
    return std::nullopt;
  }
  return parsed;
}

RelayLoadResult load_relay_config_text(std::string_view yaml, std::string_view file_name, const EnvLookup& env) {
  return detail::load_config_text_with<RelayLoadResult>(
      yaml, file_name, env,
      [](const YAML::Node& document, YamlReader& reader) { return RelayConfigReader(reader).read(document); });
}

RelayLoadResult load_relay_config_file(const std::string& path, const EnvLookup& env) {
  return detail::load_config_file_with<RelayLoadResult>(
      path, [&](std::string_view text) { return load_relay_config_text(text, path, env); });
}

}  // namespace idem::config
