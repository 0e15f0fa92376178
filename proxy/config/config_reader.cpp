#include "config/config_reader.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "config/addresses.hpp"
#include "config/admin_section.hpp"
#include "config/client_tls_reader.hpp"
#include "config/encryption_keys.hpp"
#include "config/file_fields.hpp"
#include "config/http_syntax.hpp"
#include "config/key_space_changes.hpp"
#include "config/postgres_section.hpp"
#include "config/redis_section.hpp"
#include "config/units.hpp"
#include "core/key_format.hpp"
#include "core/route_table.hpp"
#include "core/upgrade_decision.hpp"
#include "fingerprint/canonical_json.hpp"

namespace idem::config::detail {
namespace {

using Keys = std::vector<std::string_view>;

const Keys kTopLevelKeys = {"listen",   "tls",       "workers", "drain_timeout", "limits",
                            "upstream", "upstreams", "store",   "reaper",        "replay_cache",
                            "log",      "problems",  "admin",   "defaults",      "routes"};
const Keys kLogKeys = {"level", "access"};
const Keys kProblemsKeys = {"docs_url"};
const Keys kReplayCacheKeys = {"max_bytes"};
const Keys kReaperKeys = {"interval", "batch"};
const Keys kLimitsKeys = {"max_request_body", "max_response_body", "max_header_bytes", "max_request_line",
                          "header_timeout",   "body_timeout",      "idle_timeout",     "write_timeout",
                          "max_waiting",      "max_headers",       "max_connections",  "tunnel_idle_timeout"};
const Keys kListenerTlsKeys = {"cert_file", "key_file", "min_version"};
const Keys kUpstreamKeys = {"url", "connect_timeout", "timeout", "max_connections", "idle_timeout", "tls"};
const Keys kNamedUpstreamKeys = {"name", "url", "connect_timeout", "timeout", "max_connections", "idle_timeout", "tls"};
// Where a route's requests go and what bounds their exchange (core::RouteForwarding).
const Keys kForwardingKeys = {"upstream", "timeout", "stream_idle_timeout", "max_request_body"};
const Keys kStoreKeys = {"postgres", "encryption", "redis"};
const Keys kPostgresKeys = {"dsn",           "pool_size",       "connect_timeout",
                            "query_timeout", "acquire_timeout", "prepared_statements"};
const Keys kRedisCacheKeys = {"address", "password",   "database",       "connect_timeout",
                              "timeout", "key_prefix", "max_value_bytes"};
const Keys kPolicyKeys = {"key_header",
                          "key",
                          "max_key_length",
                          "min_key_length",
                          "key_format",
                          "key_from_json",
                          "key_source",
                          "ttl",
                          "lease",
                          "max_stored_body",
                          "scope",
                          "fingerprint",
                          "release_statuses",
                          "replay_header",
                          "key_expires_header",
                          "store_set_cookie",
                          "unknown_outcome",
                          "store_unavailable",
                          "in_flight",
                          "wait_timeout",
                          "unknown_retention",
                          "upgrades"};
const Keys kMatchKeys = {"method", "path", "host", "case_insensitive", "trailing_slash"};
const Keys kScopeKeys = {"headers", "host"};
const Keys kFingerprintKeys = {"headers", "ignore_json"};

Keys route_keys() {
  Keys keys = {"name", "match"};
  keys.insert(keys.end(), kPolicyKeys.begin(), kPolicyKeys.end());
  keys.insert(keys.end(), kForwardingKeys.begin(), kForwardingKeys.end());
  return keys;
}

// Bounds on inputs: generous for real deployments, tight enough to catch a typo'd extra digit.
constexpr std::uint64_t kMaxWorkers = 1024;
constexpr std::uint64_t kMaxUpstreamConnections = 100'000;
constexpr std::uint64_t kMaxPoolSize = 1'000;
constexpr std::uint64_t kMaxKeyLength = 1'024;
constexpr std::size_t kMaxHeaderBytes = 1024 * 1024;
constexpr std::size_t kMaxRouteNameLength = 64;
constexpr int kMinStatus = 100;
constexpr int kMaxStatus = 599;

// Route names appear in record scopes, logs and metrics labels: keep them plain.
bool is_route_name(std::string_view name) {
  return !name.empty() && name.size() <= kMaxRouteNameLength && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
           c == '.';
  });
}

// What the checks across options need to know about how a policy was read: where the route
// itself set ttl and lease (the place to point at when they conflict), and whether the options
// the checks look at parsed (a failed one keeps its default, and a check on it would mislead).
struct PolicyOrigin {
  std::optional<YAML::Mark> ttl;
  std::optional<YAML::Mark> lease;
  std::optional<YAML::Mark> key_source;     // where the route (or defaults) set key_source
  std::optional<YAML::Mark> key_from_json;  // where the route (or defaults) set key_from_json
  std::optional<YAML::Mark> upgrades;       // where the route (or defaults) set upgrades
  std::optional<YAML::Mark> key_rule;       // where the route (or defaults) last set min_key_length or key_format
  bool timing_valid = true;
  bool scope_valid = true;
};

class ConfigReader {
 public:
  ConfigReader(YamlReader& yaml, const Config* running) : yaml_(yaml), issues_(yaml.issues()), running_(running) {}

  Config read(const YAML::Node& root);

 private:
  void read_listen(const Field& field, ListenConfig& listen);
  void read_limits(const Field& field, LimitsConfig& limits);
  void read_reaper(const Field& field, ReaperConfig& reaper);
  void read_replay_cache(const Field& field, ReplayCacheConfig& cache);
  void read_log(const Field& field, LogConfig& log);
  void read_problems(const Field& field, ProblemsConfig& problems);
  void read_listener_tls(const Field& field, ListenerTlsConfig& tls);
  // `upstream:` (the only one) or one element of `upstreams:` (path "upstreams[i]").
  void read_upstream(const Fields& fields, std::string_view path, UpstreamConfig& upstream);
  void read_upstreams(const Field* single, const Field* list, const YAML::Mark& top_level, Config& config);
  void read_forwarding(const Fields& fields, std::string_view path, const Config& config,
                       core::RouteForwarding& forwarding);
  void read_redis_cache(const Field& field, RedisCacheConfig& redis);
  void read_store(const Field* field, const YAML::Mark& top_level, StoreConfig& store);
  void read_policy(const Fields& fields, std::string_view path, core::RoutePolicy& policy, PolicyOrigin& origin);
  std::optional<std::vector<std::string>> read_header_names(const Field& field, std::string_view path);
  std::optional<std::vector<std::string>> read_replay_headers(const Field& field, std::string_view path);
  std::optional<std::vector<std::string>> read_json_pointers(const Field& field, std::string_view path);
  std::optional<std::vector<int>> read_statuses(const Field& field, std::string_view path);
  std::optional<std::vector<std::string>> read_upgrades(const Field& field, std::string_view path);
  std::optional<std::vector<std::string>> read_token_list(const Field& field, std::string_view path,
                                                          std::string_view noun, std::string_view expected,
                                                          const std::function<std::string(std::string_view)>& refusal);
  void read_routes(const Field& field, const core::RoutePolicy& defaults, const PolicyOrigin& defaults_origin,
                   Config& config);
  void read_match(const Field& field, std::string_view path, const core::RoutePolicy& policy, core::RouteMatch& match);
  // A timeout the timing model counts: a malformed one leaves the model's rules unchecked
  // (its own error is reported) rather than checked against a default.
  void read_exchange_timeout(const Field& field, std::string_view path, std::chrono::milliseconds& target) {
    const auto timeout = yaml_.duration(field, path, false);
    exchange_timeouts_valid_ = exchange_timeouts_valid_ && timeout.has_value();
    assign(timeout, target);
  }
  // Warns at each route whose stored keys the change from `before` (the running or --against
  // configuration) makes unreachable (key_space_changes.hpp).
  void check_key_spaces(const std::vector<core::Route>& before, const std::vector<core::Route>& after,
                        const Field* routes_field, const YAML::Mark& top_level);
  // Defaults drain_timeout from the timing model, or warns when the file's is shorter.
  void check_drain_timeout(Config& config);
  void check_route(const core::Route& route, std::string_view path, const YAML::Mark& route_mark,
                   const PolicyOrigin& origin, const Config& config);

  YamlReader& yaml_;
  IssueSink& issues_;
  bool exchange_timeouts_valid_ = true;      // every timeout of the timing model parsed
  std::optional<YAML::Mark> drain_timeout_;  // where the file sets drain_timeout
  const Config* running_ = nullptr;          // on reload: the configuration in force
  std::vector<YAML::Mark> route_marks_;      // where each route of config.routes starts
};

Config ConfigReader::read(const YAML::Node& root) {
  Config config;
  // An empty document has no position of its own: report its problems at 1:1.
  const YAML::Mark start = root.IsNull() ? YAML::Mark() : root.Mark();
  const std::optional<Fields> top = yaml_.mapping(root, start, "", kTopLevelKeys);
  if (!top) return config;

  if (const Field* field = top->find("listen")) read_listen(*field, config.listen);
  if (const Field* field = top->find("tls")) read_listener_tls(*field, config.tls);
  if (const Field* field = top->find("workers")) {
    if (auto workers = yaml_.integer(*field, "workers", 0, kMaxWorkers))
      config.workers = static_cast<unsigned>(*workers);
  }
  if (const Field* field = top->find("drain_timeout")) {
    const auto drain = yaml_.duration(*field, "drain_timeout", true);
    if (drain) drain_timeout_ = field->value.Mark();
    assign(drain, config.drain_timeout);
  }
  if (const Field* field = top->find("limits")) read_limits(*field, config.limits);
  if (const Field* field = top->find("reaper")) read_reaper(*field, config.reaper);
  if (const Field* field = top->find("replay_cache")) read_replay_cache(*field, config.replay_cache);
  if (const Field* field = top->find("log")) read_log(*field, config.log);
  if (const Field* field = top->find("problems")) read_problems(*field, config.problems);
  if (const Field* field = top->find("admin")) read_admin(yaml_, *field, config.admin);
  read_upstreams(top->find("upstream"), top->find("upstreams"), top->mark(), config);
  read_store(top->find("store"), top->mark(), config.store);

  core::RoutePolicy defaults;
  PolicyOrigin defaults_origin;
  if (const Field* field = top->find("defaults")) {
    if (auto fields = yaml_.mapping(field->value, field->key.Mark(), "defaults", kPolicyKeys)) {
      read_policy(*fields, "defaults", defaults, defaults_origin);
    }
  }
  if (const Field* field = top->find("routes")) read_routes(*field, defaults, defaults_origin, config);
  check_drain_timeout(config);
  if (running_ != nullptr) check_key_spaces(running_->routes, config.routes, top->find("routes"), top->mark());
  return config;
}

void ConfigReader::check_key_spaces(const std::vector<core::Route>& before, const std::vector<core::Route>& after,
                                    const Field* routes_field, const YAML::Mark& top_level) {
  for (const KeySpaceChange& change : key_space_changes(before, after)) {
    const YAML::Mark mark = change.after_index && *change.after_index < route_marks_.size()
                                ? route_marks_[*change.after_index]
                                : (routes_field != nullptr ? routes_field->key.Mark() : top_level);
    issues_.warning(mark, "route " + quoted(change.route) + " " + change.change +
                              ": keys stored before are not found any more, so retries that straddle the change "
                              "execute again");
  }
}

void ConfigReader::check_drain_timeout(Config& config) {
  if (!exchange_timeouts_valid_) return;
  // The longest exchange of any route or upstream: a shutdown waits for the slowest.
  const core::ExchangeBudget budget = longest_exchange_of(config);
  if (!drain_timeout_) {
    config.drain_timeout = core::default_drain_timeout(budget);
  } else if (config.drain_timeout < budget.total) {
    issues_.warning(*drain_timeout_,
                    "drain_timeout (" + format_duration(config.drain_timeout) +
                        ") is shorter than the longest exchange (" + describe_budget(budget, false) +
                        "): a shutdown can cut requests in progress and the writes that store their responses");
  }
}

void ConfigReader::read_listen(const Field& field, ListenConfig& listen) {
  std::vector<YAML::Node> elements;
  // TCP only when a host:port is given: `listen: unix:/path` alone listens on nothing else.
  listen.tcp = false;
  if (field.value.IsSequence()) {
    for (const YAML::Node& element : field.value) elements.push_back(element);
    if (elements.empty()) issues_.error(field.value.Mark(), "listen is an empty list");
  } else {
    elements.push_back(field.value);
  }
  bool tcp_given = false;
  for (const YAML::Node& element : elements) {
    const std::optional<std::string> text = yaml_.string(element, field.key.Mark(), "listen");
    if (!text) continue;
    if (text->starts_with("unix:")) {
      const UpstreamUrl socket = parse_upstream_url(*text);  // the same unix:/path syntax
      if (socket.problem != UrlProblem::none) {
        issues_.error(element.Mark(), "bad listen address " + quoted(*text) +
                                          " (expected unix: and an absolute path of at most 107 bytes)");
      } else if (!listen.unix_socket.empty()) {
        issues_.error(element.Mark(), "listen names more than one unix socket");
      } else {
        listen.unix_socket = socket.socket_path;
      }
      continue;
    }
    const std::optional<HostPort> address = parse_host_port(*text);
    if (!address) {
      issues_.error(element.Mark(), "bad listen address " + quoted(*text) +
                                        " (expected host:port, e.g. 127.0.0.1:8080 or \"[::1]:8080\", or unix:/path)");
    } else if (tcp_given) {
      issues_.error(element.Mark(),
                    "listen names more than one host:port (the proxy listens on one, and the kernel "
                    "spreads its connections across workers)");
    } else {
      tcp_given = true;
      listen.tcp = true;
      listen.host = address->host;
      listen.port = address->port;
    }
  }
}

void ConfigReader::read_limits(const Field& field, LimitsConfig& limits) {
  const std::optional<Fields> fields = yaml_.mapping(field.value, field.key.Mark(), "limits", kLimitsKeys);
  if (!fields) return;
  if (const Field* f = fields->find("max_request_body"))
    assign(yaml_.byte_size(*f, "limits.max_request_body"), limits.max_request_body);
  if (const Field* f = fields->find("max_response_body")) {
    // Accepted so an older file still loads: no answer is held whole past its route's
    // max_stored_body any more (README "Streaming and upgrades").
    issues_.warning(f->key.Mark(),
                    "limits.max_response_body is no longer used: an answer past its route's max_stored_body, "
                    "and every answer no idempotency rule applies to, is streamed to its client; remove it");
  }
  if (const Field* f = fields->find("max_header_bytes")) {
    assign(yaml_.byte_size(*f, "limits.max_header_bytes", kMaxHeaderBytes), limits.max_header_bytes);
  }
  if (const Field* f = fields->find("max_request_line")) {
    assign(yaml_.byte_size(*f, "limits.max_request_line", kMaxHeaderBytes), limits.max_request_line);
  }
  if (const Field* f = fields->find("header_timeout"))
    assign(yaml_.duration(*f, "limits.header_timeout", false), limits.header_timeout);
  if (const Field* f = fields->find("body_timeout"))
    assign(yaml_.duration(*f, "limits.body_timeout", false), limits.body_timeout);
  if (const Field* f = fields->find("idle_timeout"))
    assign(yaml_.duration(*f, "limits.idle_timeout", false), limits.idle_timeout);
  if (const Field* f = fields->find("write_timeout"))
    assign(yaml_.duration(*f, "limits.write_timeout", false), limits.write_timeout);
  if (const Field* f = fields->find("tunnel_idle_timeout"))
    assign(yaml_.duration(*f, "limits.tunnel_idle_timeout", false), limits.tunnel_idle_timeout);
  if (const Field* f = fields->find("max_waiting")) {
    if (const auto n = yaml_.integer(*f, "limits.max_waiting", 0, 1'000'000))
      limits.max_waiting = static_cast<std::size_t>(*n);
  }
  if (const Field* f = fields->find("max_headers")) {
    if (const auto n = yaml_.integer(*f, "limits.max_headers", 1, 10'000))
      limits.max_headers = static_cast<std::size_t>(*n);
  }
  if (const Field* f = fields->find("max_connections")) {
    if (const auto n = yaml_.integer(*f, "limits.max_connections", 1, 1'000'000)) {
      limits.max_connections = static_cast<std::size_t>(*n);
    }
  }
}

void ConfigReader::read_reaper(const Field& field, ReaperConfig& reaper) {
  const std::optional<Fields> fields = yaml_.mapping(field.value, field.key.Mark(), "reaper", kReaperKeys);
  if (!fields) return;
  if (const Field* f = fields->find("interval")) assign(yaml_.duration(*f, "reaper.interval", true), reaper.interval);
  if (const Field* f = fields->find("batch")) {
    if (const auto n = yaml_.integer(*f, "reaper.batch", 1, 100'000)) reaper.batch = static_cast<std::size_t>(*n);
  }
}

void ConfigReader::read_replay_cache(const Field& field, ReplayCacheConfig& cache) {
  const std::optional<Fields> fields = yaml_.mapping(field.value, field.key.Mark(), "replay_cache", kReplayCacheKeys);
  if (!fields) return;
  if (const Field* f = fields->find("max_bytes")) {
    if (f->value.IsScalar() && f->value.Scalar() == "0") {
      cache.max_bytes = 0;
    } else {
      assign(yaml_.byte_size(*f, "replay_cache.max_bytes"), cache.max_bytes);
    }
  }
}

void ConfigReader::read_log(const Field& field, LogConfig& log) {
  const std::optional<Fields> fields = yaml_.mapping(field.value, field.key.Mark(), "log", kLogKeys);
  if (!fields) return;
  if (const Field* f = fields->find("level")) {
    assign(yaml_.one_of<LogLevel>(*f, "log.level",
                                  {{"debug", LogLevel::debug},
                                   {"info", LogLevel::info},
                                   {"warn", LogLevel::warn},
                                   {"error", LogLevel::error}}),
           log.level);
  }
  if (const Field* f = fields->find("access")) assign(yaml_.boolean(*f, "log.access"), log.access);
}

void ConfigReader::read_problems(const Field& field, ProblemsConfig& problems) {
  const std::optional<Fields> fields = yaml_.mapping(field.value, field.key.Mark(), "problems", kProblemsKeys);
  if (!fields) return;
  if (const Field* f = fields->find("docs_url")) {
    std::optional<std::string> url = yaml_.string(*f, "problems.docs_url");
    if (!url) return;
    if (const std::string why = docs_url_error(*url); !why.empty()) {
      issues_.error(f->value.Mark(), "bad problems.docs_url " + quoted(*url) + ": " + why);
      return;
    }
    problems.docs_url = std::move(*url);
  }
}

void ConfigReader::read_upstreams(const Field* single, const Field* list, const YAML::Mark& top_level, Config& config) {
  if (single != nullptr && list != nullptr) {
    issues_.error(list->key.Mark(),
                  "upstream and upstreams are both set: declare the one upstream with upstream:, "
                  "or every upstream (the first is the default) under upstreams:");
    return;
  }
  if (single != nullptr) {
    if (const auto fields = yaml_.mapping(single->value, single->key.Mark(), "upstream", kUpstreamKeys))
      read_upstream(*fields, "upstream", config.upstreams.front());
    return;
  }
  if (list == nullptr) return;
  const std::optional<std::vector<YAML::Node>> elements = yaml_.sequence(*list, "upstreams");
  if (!elements) return;
  if (elements->empty()) {
    issues_.error(list->value.Mark(),
                  "upstreams is empty (declare at least one, e.g. - { name: api, url: "
                  "http://127.0.0.1:3000 })");
    return;
  }
  config.upstreams.clear();
  std::map<std::string, int, std::less<>> first_line_of_name;
  for (std::size_t index = 0; index < elements->size(); ++index) {
    const YAML::Node& element = (*elements)[index];
    const std::string path = "upstreams[" + std::to_string(index) + "]";
    const std::optional<Fields> fields = yaml_.mapping(element, element.Mark(), path, kNamedUpstreamKeys);
    if (!fields) continue;
    UpstreamConfig upstream;
    upstream.name.clear();
    if (std::optional<std::string> name =
            yaml_.required_string(*fields, "name", join_path(path, "name"), path + " has no name (e.g. name: api)")) {
      const Field* f = fields->find("name");
      if (!is_route_name(*name)) {
        issues_.error(f->value.Mark(), "bad upstream name " + quoted(*name) + " (expected up to " +
                                           std::to_string(kMaxRouteNameLength) + " letters, digits, '.', '_' or '-')");
      } else if (const auto first = first_line_of_name.find(*name); first != first_line_of_name.end()) {
        issues_.error(f->value.Mark(), "duplicate upstream name " + quoted(*name) + " (first used at line " +
                                           std::to_string(first->second) + ")");
      } else {
        first_line_of_name.emplace(*name, f->value.Mark().line + 1);
        upstream.name = std::move(*name);
      }
    }
    if (!fields->find("url"))
      issues_.error(fields->mark(), path + ".url is required (e.g. url: http://127.0.0.1:3000)");
    read_upstream(*fields, upstream.name.empty() ? path : "upstreams." + upstream.name, upstream);
    config.upstreams.push_back(std::move(upstream));
  }
  if (config.upstreams.empty()) {
    issues_.error(top_level, "upstreams declares no valid upstream");
    config.upstreams.emplace_back();
  }
}

void ConfigReader::read_upstream(const Fields& fields, std::string_view path, UpstreamConfig& upstream) {
  const auto at = [&](std::string_view key) { return join_path(path, key); };
  if (const Field* f = fields.find("url")) {
    if (const std::optional<std::string> url = yaml_.string(*f, at("url"))) {
      const UpstreamUrl parsed = parse_upstream_url(*url);
      switch (parsed.problem) {
        case UrlProblem::none:
          upstream.url = *url;
          upstream.host = parsed.address.host;
          upstream.port = parsed.address.port;
          upstream.socket_path = parsed.socket_path;
          upstream.tls.enabled = parsed.https;
          break;
        case UrlProblem::malformed:
          issues_.error(f->value.Mark(),
                        at("url") + " must be http://host[:port], https://host[:port] or unix:/path/to.sock, got " +
                            quoted(*url));
          break;
      }
    }
  }
  if (const Field* f = fields.find("connect_timeout"))
    read_exchange_timeout(*f, at("connect_timeout"), upstream.connect_timeout);
  if (const Field* f = fields.find("timeout")) read_exchange_timeout(*f, at("timeout"), upstream.timeout);
  if (const Field* f = fields.find("max_connections")) {
    if (auto count = yaml_.integer(*f, at("max_connections"), 1, kMaxUpstreamConnections))
      upstream.max_connections = *count;
  }
  if (const Field* f = fields.find("idle_timeout"))
    assign(yaml_.duration(*f, at("idle_timeout"), false), upstream.idle_timeout);
  if (const Field* f = fields.find("tls")) {
    read_client_tls(yaml_, *f, at("tls"), upstream.tls);
    if (!upstream.tls.enabled)
      issues_.warning(f->key.Mark(), at("tls") + " is ignored: " + at("url") + " is not https://");
  }
}

void ConfigReader::read_forwarding(const Fields& fields, std::string_view path, const Config& config,
                                   core::RouteForwarding& forwarding) {
  const auto at = [&](std::string_view key) { return join_path(path, key); };
  if (const Field* f = fields.find("upstream")) {
    if (std::optional<std::string> name = yaml_.string(*f, at("upstream"))) {
      // On a reload the upstreams keep running as they are: a route names one of those.
      const std::vector<UpstreamConfig>& upstreams = running_ != nullptr ? running_->upstreams : config.upstreams;
      const auto found = std::find_if(upstreams.begin(), upstreams.end(),
                                      [&](const UpstreamConfig& upstream) { return upstream.name == *name; });
      if (found == upstreams.end()) {
        std::string known;
        for (const UpstreamConfig& upstream : upstreams) known += (known.empty() ? "" : ", ") + upstream.name;
        issues_.error(f->value.Mark(), at("upstream") + " names no upstream: " + quoted(*name) + " (" +
                                           (running_ != nullptr ? "running: " : "declared: ") + known + ")");
      } else {
        forwarding.upstream = std::move(*name);
        forwarding.upstream_index = static_cast<std::size_t>(found - upstreams.begin());
      }
    }
  }
  if (const Field* f = fields.find("timeout")) {
    std::chrono::milliseconds timeout{0};
    read_exchange_timeout(*f, at("timeout"), timeout);
    if (timeout.count() > 0) forwarding.timeout = timeout;
  }
  if (const Field* f = fields.find("stream_idle_timeout")) {
    if (const auto idle = yaml_.duration(*f, at("stream_idle_timeout"), false)) forwarding.stream_idle_timeout = *idle;
  }
  if (const Field* f = fields.find("max_request_body")) {
    if (const auto limit = yaml_.byte_size(*f, at("max_request_body"))) forwarding.max_request_body = *limit;
  }
}

void ConfigReader::read_listener_tls(const Field& field, ListenerTlsConfig& tls) {
  const std::optional<Fields> fields = yaml_.mapping(field.value, field.key.Mark(), "tls", kListenerTlsKeys);
  if (!fields) return;
  const Field* cert = fields->find("cert_file");
  const Field* key = fields->find("key_file");
  if (!cert || !key) {
    issues_.error(fields->mark(), "tls needs both cert_file and key_file");
    return;
  }
  assign(readable_file(yaml_, *cert, "tls.cert_file"), tls.cert_file);
  assign(readable_file(yaml_, *key, "tls.key_file"), tls.key_file);
  if (const Field* f = fields->find("min_version")) {
    assign(yaml_.one_of<TlsVersion>(*f, "tls.min_version", {{"1.2", TlsVersion::v1_2}, {"1.3", TlsVersion::v1_3}}),
           tls.min_version);
  }
}

void ConfigReader::read_redis_cache(const Field& field, RedisCacheConfig& redis) {
  const std::optional<Fields> fields = yaml_.mapping(field.value, field.key.Mark(), "store.redis", kRedisCacheKeys);
  if (!fields) return;
  // The cache is off without an address: a section that forgets it is a mistake, not a way to turn it off.
  if (!fields->find("address"))
    issues_.error(fields->mark(), "store.redis.address is required (e.g. address: 127.0.0.1:6379)");
  read_redis_connection(yaml_, *fields, "store.redis", redis);
  if (const Field* f = fields->find("timeout")) assign(yaml_.duration(*f, "store.redis.timeout", false), redis.timeout);
  if (const Field* f = fields->find("key_prefix")) assign(yaml_.string(*f, "store.redis.key_prefix"), redis.key_prefix);
  if (const Field* f = fields->find("max_value_bytes"))
    assign(yaml_.byte_size(*f, "store.redis.max_value_bytes"), redis.max_value_bytes);
}

void ConfigReader::read_store(const Field* field, const YAML::Mark& top_level, StoreConfig& store) {
  const std::optional<Fields> store_fields = field ? yaml_.mapping(field->value, field->key.Mark(), "store", kStoreKeys)
                                                   : std::optional<Fields>(Fields(top_level));
  if (!store_fields) return;
  if (const Field* f = store_fields->find("encryption")) read_encryption(*f, yaml_, store.encryption);
  if (const Field* f = store_fields->find("redis")) read_redis_cache(*f, store.redis);
  const Field* postgres_field = store_fields->find("postgres");
  const std::optional<Fields> fields =
      postgres_field ? yaml_.mapping(postgres_field->value, postgres_field->key.Mark(), "store.postgres", kPostgresKeys)
                     : std::optional<Fields>(Fields(store_fields->mark()));
  if (!fields) return;

  PostgresConfig& postgres = store.postgres;
  // query_timeout is one of the timing model's timeouts (see read_exchange_timeout).
  const bool query_timeout_valid = read_postgres_connection(yaml_, *fields, "store.postgres", postgres);
  exchange_timeouts_valid_ = exchange_timeouts_valid_ && query_timeout_valid;
  if (const Field* f = fields->find("pool_size")) {
    if (auto size = yaml_.integer(*f, "store.postgres.pool_size", 1, kMaxPoolSize)) postgres.pool_size = *size;
  }
  if (const Field* f = fields->find("acquire_timeout"))
    read_exchange_timeout(*f, "store.postgres.acquire_timeout", postgres.acquire_timeout);
  if (const Field* f = fields->find("prepared_statements")) {
    assign(yaml_.boolean(*f, "store.postgres.prepared_statements"), postgres.prepared_statements);
  }
}

void ConfigReader::read_policy(const Fields& fields, std::string_view path, core::RoutePolicy& policy,
                               PolicyOrigin& origin) {
  const auto at = [&](std::string_view key) { return join_path(path, key); };

  if (const Field* f = fields.find("key_header")) {
    if (std::optional<std::string> name = yaml_.string(*f, at("key_header"))) {
      if (is_http_token(*name)) {
        policy.key_header = std::move(*name);
      } else {
        issues_.error(f->value.Mark(), "bad header name " + quoted(*name) + " for " + at("key_header") +
                                           " (expected an RFC 9110 token)");
      }
    }
  }
  if (const Field* f = fields.find("key")) {
    assign(yaml_.one_of<core::KeyRequirement>(*f, at("key"),
                                              {{"required", core::KeyRequirement::required},
                                               {"optional", core::KeyRequirement::optional},
                                               {"off", core::KeyRequirement::off}}),
           policy.key);
  }
  if (const Field* f = fields.find("max_key_length")) {
    if (auto length = yaml_.integer(*f, at("max_key_length"), 1, kMaxKeyLength)) policy.max_key_length = *length;
  }
  if (const Field* f = fields.find("key_from_json")) {
    if (std::optional<std::string> pointer = yaml_.string(*f, at("key_from_json"))) {
      if (pointer->empty()) {
        issues_.error(f->value.Mark(), "JSON pointer \"\" for " + at("key_from_json") +
                                           " addresses the whole body, which is never a string key (e.g. /id)");
      } else if (const std::string why = fingerprint::json_pointer_error(*pointer); !why.empty()) {
        issues_.error(f->value.Mark(),
                      "bad JSON pointer " + quoted(*pointer) + " for " + at("key_from_json") + ": " + why);
      } else {
        policy.key_from_json = std::move(*pointer);
        // Naming where the key is in the body means reading it there when no key header is sent,
        // unless this same mapping says otherwise.
        if (!fields.find("key_source")) policy.key_source = core::KeySource::header_then_json;
      }
    }
    origin.key_from_json = f->value.Mark();
  }
  if (const Field* f = fields.find("key_source")) {
    assign(yaml_.one_of<core::KeySource>(*f, at("key_source"),
                                         {{"header", core::KeySource::header},
                                          {"header_then_json", core::KeySource::header_then_json},
                                          {"json", core::KeySource::json}}),
           policy.key_source);
    origin.key_source = f->value.Mark();
  }
  if (const Field* f = fields.find("ttl")) {
    const auto ttl = yaml_.duration(*f, at("ttl"), false);
    origin.ttl = f->value.Mark();
    origin.timing_valid = origin.timing_valid && ttl.has_value();
    assign(ttl, policy.ttl);
  }
  if (const Field* f = fields.find("lease")) {
    const auto lease = yaml_.duration(*f, at("lease"), false);
    origin.lease = f->value.Mark();
    origin.timing_valid = origin.timing_valid && lease.has_value();
    assign(lease, policy.lease);
  }
  if (const Field* f = fields.find("max_stored_body"))
    assign(yaml_.byte_size(*f, at("max_stored_body")), policy.max_stored_body);
  if (const Field* f = fields.find("scope")) {
    if (auto scope = yaml_.mapping(f->value, f->key.Mark(), at("scope"), kScopeKeys)) {
      if (const Field* headers = scope->find("headers")) {
        auto names = read_header_names(*headers, at("scope.headers"));
        origin.scope_valid = origin.scope_valid && names.has_value();
        assign(std::move(names), policy.scope_headers);
      }
      if (const Field* host = scope->find("host")) assign(yaml_.boolean(*host, at("scope.host")), policy.scope_host);
    } else {
      origin.scope_valid = false;
    }
  }
  if (const Field* f = fields.find("fingerprint")) {
    if (auto fingerprint = yaml_.mapping(f->value, f->key.Mark(), at("fingerprint"), kFingerprintKeys)) {
      if (const Field* headers = fingerprint->find("headers")) {
        assign(read_header_names(*headers, at("fingerprint.headers")), policy.fingerprint_headers);
      }
      if (const Field* pointers = fingerprint->find("ignore_json")) {
        assign(read_json_pointers(*pointers, at("fingerprint.ignore_json")), policy.ignore_json);
      }
    }
  }
  if (const Field* f = fields.find("release_statuses"))
    assign(read_statuses(*f, at("release_statuses")), policy.release_statuses);
  if (const Field* f = fields.find("replay_header"))
    assign(read_replay_headers(*f, at("replay_header")), policy.replay_headers);
  if (const Field* f = fields.find("key_expires_header"))
    assign(yaml_.boolean(*f, at("key_expires_header")), policy.key_expires_header);
  if (const Field* f = fields.find("store_set_cookie"))
    assign(yaml_.boolean(*f, at("store_set_cookie")), policy.store_set_cookie);
  if (const Field* f = fields.find("unknown_outcome")) {
    assign(
        yaml_.one_of<core::UnknownOutcome>(
            *f, at("unknown_outcome"), {{"lock", core::UnknownOutcome::lock}, {"retry", core::UnknownOutcome::retry}}),
        policy.unknown_outcome);
  }
  if (const Field* f = fields.find("store_unavailable")) {
    assign(yaml_.one_of<core::StoreUnavailable>(*f, at("store_unavailable"),
                                                {{"fail_closed", core::StoreUnavailable::fail_closed},
                                                 {"fail_open", core::StoreUnavailable::fail_open}}),
           policy.store_unavailable);
  }
  if (const Field* f = fields.find("in_flight")) {
    assign(yaml_.one_of<core::InFlightPolicy>(
               *f, at("in_flight"), {{"reject", core::InFlightPolicy::reject}, {"wait", core::InFlightPolicy::wait}}),
           policy.in_flight);
  }
  if (const Field* f = fields.find("wait_timeout"))
    assign(yaml_.duration(*f, at("wait_timeout"), false), policy.wait_timeout);
  if (const Field* f = fields.find("unknown_retention")) {
    assign(yaml_.duration(*f, at("unknown_retention"), true), policy.unknown_retention);
  }
  if (const Field* f = fields.find("upgrades")) {
    assign(read_upgrades(*f, at("upgrades")), policy.upgrades);
    origin.upgrades = f->value.Mark();
  }
  // Stricter acceptance of the same keys: not a key-space change (key_space_changes.hpp).
  if (const Field* f = fields.find("min_key_length")) {
    if (auto length = yaml_.integer(*f, at("min_key_length"), 1, kMaxKeyLength)) policy.min_key_length = *length;
    origin.key_rule = f->value.Mark();
  }
  if (const Field* f = fields.find("key_format")) {
    if (std::optional<std::string> text = yaml_.string(*f, at("key_format"))) {
      std::variant<core::KeyFormat, std::string> format = core::parse_key_format(*text);
      if (auto* parsed = std::get_if<core::KeyFormat>(&format)) {
        policy.key_format = std::move(*parsed);
      } else {
        issues_.error(f->value.Mark(),
                      "bad " + at("key_format") + " " + quoted(*text) + ": " + std::get<std::string>(format));
      }
    }
    origin.key_rule = f->value.Mark();
  }
}

// A list of distinct RFC 9110 tokens, compared case-insensitively: `noun` names one in errors
// ("header", "protocol"), `expected` says what a valid one looks like, and `refusal(name)` says why
// an otherwise valid one is refused (empty: it is not).
std::optional<std::vector<std::string>> ConfigReader::read_token_list(
    const Field& field, std::string_view path, std::string_view noun, std::string_view expected,
    const std::function<std::string(std::string_view)>& refusal) {
  const std::optional<std::vector<YAML::Node>> elements = yaml_.sequence(field, path);
  if (!elements) return std::nullopt;
  std::vector<std::string> names;
  bool valid = true;
  for (const YAML::Node& element : *elements) {
    std::optional<std::string> name = yaml_.string(element, field.key.Mark(), path);
    if (!name) {
      valid = false;
    } else if (!is_http_token(*name)) {
      issues_.error(element.Mark(), "bad " + std::string(noun) + " name " + quoted(*name) + " in " + std::string(path) +
                                        " (" + std::string(expected) + ")");
      valid = false;
    } else if (std::string why = refusal ? refusal(*name) : std::string(); !why.empty()) {
      issues_.error(element.Mark(), why);
      valid = false;
    } else if (std::any_of(names.begin(), names.end(), [&](const std::string& seen) { return iequals(seen, *name); })) {
      // Names are case-insensitive: "Authorization" and "authorization" are one header.
      issues_.error(element.Mark(),
                    "duplicate " + std::string(noun) + " " + quoted(*name) + " in " + std::string(path));
      valid = false;
    } else {
      names.push_back(std::move(*name));
    }
  }
  if (!valid) return std::nullopt;
  return names;
}

// Protocol names a request may switch to (Upgrade), e.g. [websocket]; never h2c.
std::optional<std::vector<std::string>> ConfigReader::read_upgrades(const Field& field, std::string_view path) {
  return read_token_list(field, path, "protocol", "expected a name such as websocket", [&](std::string_view name) {
    if (!iequals(name, core::kNeverUpgraded)) return std::string();
    return "h2c in " + std::string(path) +
           " is never forwarded: the proxy speaks HTTP/1.1 to its upstream, and strips an h2c offer so the client goes "
           "on in HTTP/1.1";
  });
}

std::optional<std::vector<std::string>> ConfigReader::read_header_names(const Field& field, std::string_view path) {
  return read_token_list(field, path, "header", "expected an RFC 9110 token", {});
}

// One header name, or a list of them (every one is set on replays).
std::optional<std::vector<std::string>> ConfigReader::read_replay_headers(const Field& field, std::string_view path) {
  if (!field.value.IsSequence()) {
    std::optional<std::string> name = yaml_.string(field, path);
    if (!name) return std::nullopt;
    if (!is_http_token(*name)) {
      issues_.error(field.value.Mark(),
                    "bad header name " + quoted(*name) + " for " + std::string(path) + " (expected an RFC 9110 token)");
      return std::nullopt;
    }
    return std::vector<std::string>{std::move(*name)};
  }
  std::optional<std::vector<std::string>> names = read_header_names(field, path);
  if (names && names->empty()) {
    issues_.error(field.value.Mark(),
                  std::string(path) + " is an empty list: a client could not tell a replay from a first execution");
    return std::nullopt;
  }
  return names;
}

std::optional<std::vector<std::string>> ConfigReader::read_json_pointers(const Field& field, std::string_view path) {
  const std::optional<std::vector<YAML::Node>> elements = yaml_.sequence(field, path);
  if (!elements) return std::nullopt;
  std::vector<std::string> pointers;
  bool valid = true;
  for (const YAML::Node& element : *elements) {
    std::optional<std::string> pointer = yaml_.string(element, field.key.Mark(), path);
    if (!pointer) {
      valid = false;
      continue;
    }
    if (pointer->empty()) {
      // "" is a valid pointer, to the whole document: the fingerprint would ignore every body.
      issues_.error(element.Mark(), "JSON pointer \"\" in " + std::string(path) +
                                        " addresses the whole body, which would leave it out of the fingerprint");
      valid = false;
      continue;
    }
    if (const std::string why = fingerprint::json_pointer_error(*pointer); !why.empty()) {
      issues_.error(element.Mark(), "bad JSON pointer " + quoted(*pointer) + " in " + std::string(path) + ": " + why);
      valid = false;
      continue;
    }
    pointers.push_back(std::move(*pointer));
  }
  if (!valid) return std::nullopt;
  return pointers;
}

std::optional<std::vector<int>> ConfigReader::read_statuses(const Field& field, std::string_view path) {
  const std::optional<std::vector<YAML::Node>> elements = yaml_.sequence(field, path);
  if (!elements) return std::nullopt;
  std::vector<int> statuses;
  bool valid = true;
  for (const YAML::Node& element : *elements) {
    const std::optional<std::string> text = yaml_.string(element, field.key.Mark(), path);
    if (!text) {
      valid = false;
      continue;
    }
    const bool numeric = !text->empty() && text->size() <= 9 &&
                         std::all_of(text->begin(), text->end(), [](char c) { return c >= '0' && c <= '9'; });
    const int status = numeric ? std::stoi(*text) : 0;
    if (!numeric || status < kMinStatus || status > kMaxStatus) {
      issues_.error(element.Mark(), "bad status " + (numeric ? *text : quoted(*text)) + " in " + std::string(path) +
                                        " (expected " + std::to_string(kMinStatus) + "-" + std::to_string(kMaxStatus) +
                                        ")");
      valid = false;
      continue;
    }
    if (std::find(statuses.begin(), statuses.end(), status) == statuses.end()) statuses.push_back(status);
  }
  if (!valid) return std::nullopt;
  return statuses;
}

void ConfigReader::read_routes(const Field& field, const core::RoutePolicy& defaults,
                               const PolicyOrigin& defaults_origin, Config& config) {
  const std::optional<std::vector<YAML::Node>> elements = yaml_.sequence(field, "routes");
  if (!elements) return;
  const Keys keys = route_keys();
  std::map<std::string, int, std::less<>> first_line_of_name;

  for (std::size_t index = 0; index < elements->size(); ++index) {
    const YAML::Node& element = (*elements)[index];
    const std::string path = "routes[" + std::to_string(index) + "]";
    const std::optional<Fields> fields = yaml_.mapping(element, element.Mark(), path, keys);
    if (!fields) continue;
    // Route-level problems are reported where the route's mapping starts (its first key).
    const YAML::Mark route_mark = fields->mark();

    core::Route route;
    route.policy = defaults;
    route.policy.name.clear();
    PolicyOrigin origin{.ttl = std::nullopt,
                        .lease = std::nullopt,
                        .key_source = defaults_origin.key_source,
                        .key_from_json = defaults_origin.key_from_json,
                        .upgrades = defaults_origin.upgrades,
                        .key_rule = defaults_origin.key_rule,
                        .timing_valid = defaults_origin.timing_valid,
                        .scope_valid = defaults_origin.scope_valid};

    if (const Field* f = fields->find("name")) {
      if (std::optional<std::string> name = yaml_.string(*f, join_path(path, "name"))) {
        if (name->empty()) {
          issues_.error(f->value.Mark(), "route without a name");
        } else if (!is_route_name(*name)) {
          issues_.error(f->value.Mark(), "bad route name " + quoted(*name) + " (expected up to " +
                                             std::to_string(kMaxRouteNameLength) +
                                             " letters, digits, '.', '_' or '-')");
        } else if (const auto first = first_line_of_name.find(*name); first != first_line_of_name.end()) {
          issues_.error(f->value.Mark(), "duplicate route name " + quoted(*name) + " (first used at line " +
                                             std::to_string(first->second) + ")");
        } else {
          first_line_of_name.emplace(*name, f->value.Mark().line + 1);
          route.policy.name = std::move(*name);
        }
      }
    } else {
      issues_.error(route_mark, "route without a name");
    }

    read_policy(*fields, path, route.policy, origin);
    read_forwarding(*fields, path, config, route.forwarding);

    if (const Field* f = fields->find("match")) {
      read_match(*f, join_path(path, "match"), route.policy, route.match);
    } else {
      issues_.error(route_mark, path + " has no match (e.g. match: { method: POST, path: /orders })");
    }

    check_route(route, path, route_mark, origin, config);
    // A guarded route upgrades nothing (core/upgrade_decision.hpp refuses its upgrades).
    if (route.policy.key == core::KeyRequirement::required) route.policy.upgrades.clear();
    config.routes.push_back(std::move(route));
    route_marks_.push_back(route_mark);
  }
}

void ConfigReader::read_match(const Field& field, std::string_view path, const core::RoutePolicy& policy,
                              core::RouteMatch& match) {
  const std::optional<Fields> fields = yaml_.mapping(field.value, field.key.Mark(), path, kMatchKeys);
  if (!fields) return;

  if (const Field* f = fields->find("method")) {
    const std::string method_path = join_path(path, "method");
    std::vector<YAML::Node> elements;
    if (f->value.IsSequence()) {
      for (const YAML::Node& element : f->value) elements.push_back(element);
      if (elements.empty())
        issues_.error(f->value.Mark(), method_path + " is an empty list (leave method out to match every method)");
    } else {
      elements.push_back(f->value);
    }
    for (const YAML::Node& element : elements) {
      const std::optional<std::string> method = yaml_.string(element, f->key.Mark(), method_path);
      if (!method) continue;
      if (!is_http_token(*method)) {
        issues_.error(element.Mark(), "bad method " + quoted(*method) + " in " + method_path +
                                          " (expected an HTTP method such as POST)");
      } else if (has_lower_case_letter(*method)) {
        issues_.error(element.Mark(), "method " + quoted(*method) + " in " + method_path +
                                          " must be upper case (HTTP methods are case-sensitive)");
      } else if (std::find(match.methods.begin(), match.methods.end(), *method) == match.methods.end()) {
        if (core::is_safe_method(*method) && policy.key != core::KeyRequirement::off && !policy.name.empty()) {
          issues_.warning(element.Mark(),
                          "route " + quoted(policy.name) + " matches " + *method +
                              ", which is never subject to idempotency keys (GET, HEAD and OPTIONS pass through)");
        }
        match.methods.push_back(*method);
      }
    }
  }

  if (const Field* f = fields->find("path")) {
    const std::string pattern_path = join_path(path, "path");
    if (std::optional<std::string> pattern = yaml_.string(*f, pattern_path)) {
      if (const std::string why = core::path_pattern_error(*pattern); !why.empty()) {
        issues_.error(f->value.Mark(), "bad path pattern " + quoted(*pattern) + " in " + pattern_path + ": " + why);
      } else {
        match.path = std::move(*pattern);
      }
    }
  } else {
    issues_.error(fields->mark(), join_path(path, "path") + " is required (e.g. path: /orders)");
  }
  if (const Field* f = fields->find("host")) {
    const std::string host_path = join_path(path, "host");
    if (std::optional<std::string> host = yaml_.string(*f, host_path)) {
      if (const std::string why = core::host_pattern_error(*host); !why.empty()) {
        issues_.error(f->value.Mark(), "bad host " + quoted(*host) + " in " + host_path + ": " + why);
      } else {
        // "api.example.com." is the same name, fully qualified (requests' are compared without it).
        if (host->size() > 1 && host->back() == '.') host->pop_back();
        match.host = core::lower_ascii(*host);
      }
    }
  }
  if (const Field* f = fields->find("case_insensitive")) {
    assign(yaml_.boolean(*f, join_path(path, "case_insensitive")), match.case_insensitive);
  }
  if (const Field* f = fields->find("trailing_slash")) {
    assign(yaml_.boolean(*f, join_path(path, "trailing_slash")), match.trailing_slash);
  }
}

void ConfigReader::check_route(const core::Route& route, std::string_view path, const YAML::Mark& route_mark,
                               const PolicyOrigin& origin, const Config& config) {
  const core::RoutePolicy& policy = route.policy;
  const std::string label = policy.name.empty() ? std::string(path) : "route " + quoted(policy.name);

  // A route with `key: off` claims nothing: no lease to fit its exchange (a slow passthrough route
  // needs no invented lease).
  const bool claims = policy.key != core::KeyRequirement::off;
  if (claims && origin.timing_valid && policy.ttl <= policy.lease) {
    // The record must outlive its lease, or a claim could expire while it is still in flight.
    issues_.error(origin.ttl.value_or(origin.lease.value_or(route_mark)),
                  label + ": ttl (" + format_duration(policy.ttl) + ") must exceed lease (" +
                      format_duration(policy.lease) + ")");
  }
  // On a reload the upstream and store sections keep running as they are (they need a restart):
  // a route's lease is checked against those, not against what the file says.
  const Config& in_force = running_ != nullptr ? *running_ : config;
  const bool timeouts_known = running_ != nullptr || exchange_timeouts_valid_;
  if (claims && origin.timing_valid && timeouts_known) {
    // The route's own budget: its upstream's timeouts, or its own `timeout` (README "Timing").
    const core::ExchangeBudget budget =
        core::longest_exchange(exchange_timeouts(route, in_force.upstreams, in_force.store.postgres));
    if (policy.lease < core::minimum_lease(budget)) {
      issues_.error(origin.lease.value_or(route_mark),
                    label + ": lease (" + format_duration(policy.lease) + ") must be at least the longest exchange" +
                        (running_ != nullptr ? " of the running upstream and store" : "") + " plus a " +
                        format_duration(core::kLeaseMargin) + " margin (" + describe_budget(budget, true) +
                        "): a lease that lapses while the first request may still run lets a retry execute it again");
    }
  }
  if (policy.key_source != core::KeySource::header && policy.key_from_json.empty() && origin.key_source) {
    issues_.error(*origin.key_source,
                  label + ": key_source " + std::string(core::key_source_name(policy.key_source)) +
                      " reads the key from the body and needs key_from_json (e.g. key_from_json: /id)");
  }
  // A rule no key can satisfy would refuse every request of the route with 400.
  if (policy.min_key_length > policy.max_key_length) {
    issues_.error(origin.key_rule.value_or(route_mark),
                  label + ": min_key_length (" + std::to_string(policy.min_key_length) + ") exceeds max_key_length (" +
                      std::to_string(policy.max_key_length) + "): no key could be accepted");
  } else if (const auto length = core::key_format_length(policy.key_format);
             length && (*length < policy.min_key_length || *length > policy.max_key_length)) {
    issues_.error(origin.key_rule.value_or(route_mark),
                  label + ": key_format " + (policy.key_format.kind == core::KeyFormatKind::uuid ? "uuid" : "ulid") +
                      " keys are " + std::to_string(*length) + " characters long, outside min_key_length " +
                      std::to_string(policy.min_key_length) + " to max_key_length " +
                      std::to_string(policy.max_key_length) + ": no key could be accepted");
  }
  if (policy.key == core::KeyRequirement::required && !policy.upgrades.empty() && origin.upgrades) {
    issues_.error(*origin.upgrades, label +
                                        ": key: required refuses every upgrade (a tunnel cannot be fingerprinted, "
                                        "stored or replayed); give the upgrades a route with key: off or optional");
  }
  if (policy.key != core::KeyRequirement::off && origin.scope_valid && policy.scope_headers.empty() &&
      !policy.name.empty()) {
    issues_.warning(route_mark, "route " + quoted(policy.name) +
                                    " declares no scope headers: every caller of this route shares one key space");
  }
  // An earlier route with the same pattern, a superset of the methods and every host this one
  // takes always wins the match.
  if (route.match.path.empty()) return;
  for (const core::Route& earlier : config.routes) {
    if (earlier.match.path != route.match.path || earlier.policy.name.empty() || policy.name.empty()) continue;
    if (!earlier.match.host.empty() && earlier.match.host != route.match.host) continue;
    const bool covers =
        earlier.match.methods.empty() ||
        (!route.match.methods.empty() &&
         std::all_of(route.match.methods.begin(), route.match.methods.end(), [&](const std::string& method) {
           return std::find(earlier.match.methods.begin(), earlier.match.methods.end(), method) !=
                  earlier.match.methods.end();
         }));
    if (covers) {
      issues_.warning(route_mark, "route " + quoted(policy.name) + " is never used: route " +
                                      quoted(earlier.policy.name) + " before it matches the same requests");
      return;
    }
  }
}

}  // namespace

Config read_config(const YAML::Node& root, YamlReader& reader, const Config* running) {
  return ConfigReader(reader, running).read(root);
}

}  // namespace idem::config::detail
