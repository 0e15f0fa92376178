#include "app/proxy_admin.hpp"

#include "app/record_view.hpp"

#include <algorithm>
#include <boost/beast/core/string.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/percent_decoding.hpp"
#include "core/problem.hpp"
#include "crypto/sha256.hpp"
#include "fingerprint/fingerprint.hpp"
#include "log/log.hpp"
#include "metrics/registry.hpp"
#include "store/pg/pg_store.hpp"

namespace idem::app {
namespace http = boost::beast::http;
using idem::http::RuntimeConfig;

namespace {

using core::percent_decode;

// `docs_url`: problems.docs_url, as on the proxy's own answers (core/problem.hpp).
admin::Response problem(const core::Problem& p, std::string_view docs_url) {
  admin::Response response = admin::text_response(static_cast<unsigned>(p.status), core::problem_json(p, docs_url),
                                                  "application/problem+json");
  if (p.retry_after) response.set(http::field::retry_after, std::to_string(p.retry_after->count()));
  if (std::optional<std::string> link = core::problem_link(p, docs_url)) response.set(http::field::link, *link);
  return response;
}

admin::Response not_found(std::string_view what, std::string_view docs_url) {
  core::Problem p = core::bad_request_problem(what);
  p.status = 404;
  p.slug = "not-found";
  p.title = "Not found";
  return problem(p, docs_url);
}

struct KeyTarget {
  std::string route;
  std::string key;
  std::string scope;
  bool release = false;
};

// /admin/keys/{route}/{key}[/release][?scope=...|?host=...]
std::optional<KeyTarget> parse_key_target(const admin::Request& request, const RuntimeConfig& runtime,
                                          std::string& error) {
  std::string_view target = request.target();
  std::string_view query;
  if (const auto q = target.find('?'); q != std::string_view::npos) {
    query = target.substr(q + 1);
    target = target.substr(0, q);
  }
  constexpr std::string_view prefix = "/admin/keys/";
  if (!target.starts_with(prefix)) return std::nullopt;
  target.remove_prefix(prefix.size());
  KeyTarget out;
  if (target.ends_with("/release")) {
    out.release = true;
    target.remove_suffix(std::string_view("/release").size());
  }
  const auto slash = target.find('/');
  if (slash == std::string_view::npos) {
    error = "expected /admin/keys/{route}/{key}";
    return std::nullopt;
  }
  const auto route = percent_decode(target.substr(0, slash));
  const auto key = percent_decode(target.substr(slash + 1));
  if (!route || !key || key->empty()) {
    error = "bad percent-encoding in the route or key";
    return std::nullopt;
  }
  out.route = *route;
  out.key = *key;
  const core::Route* found = nullptr;
  for (const core::Route& r : runtime.routes.routes()) {
    if (r.policy.name == out.route) found = &r;
  }
  if (found == nullptr) {
    error = "no route named \"" + out.route + "\"";
    return std::nullopt;
  }
  if (query.starts_with("scope=")) {
    const auto scope = percent_decode(query.substr(6));
    if (!scope) {
      error = "bad percent-encoding in scope";
      return std::nullopt;
    }
    out.scope = *scope;
    return out;
  }
  // The scope exactly as the proxy computes it, from the scope headers sent to this endpoint and
  // the original request's host in ?host= (this request's own Host names the admin listener).
  std::optional<std::string> host;
  if (query.starts_with("host=")) {
    host = percent_decode(query.substr(5));
    if (!host) {
      error = "bad percent-encoding in host";
      return std::nullopt;
    }
  }
  HeaderPairs headers;
  for (const auto& field : request) headers.emplace_back(std::string(field.name_string()), std::string(field.value()));
  std::optional<std::string> scope = scope_for(found->policy, headers, host);
  if (!scope) {
    error = "route \"" + out.route + "\" scopes keys by host: name the original request's host with ?host=";
    return std::nullopt;
  }
  out.scope = std::move(*scope);
  return out;
}

void handle_key(ProxyAdminContext& context, const admin::Request& request, const admin::Respond& respond) {
  std::string error;
  const auto runtime = context.config();
  std::string docs_url = runtime->problem_docs_url();
  const std::optional<KeyTarget> target = parse_key_target(request, *runtime, error);
  if (!target) return respond(not_found(error.empty() ? "no such admin endpoint" : error, docs_url));
  const bool post = request.method() == http::verb::post;
  if (target->release != post) {
    admin::Response wrong = admin::text_response(405, "use GET for a record and POST for .../release\n");
    wrong.set(http::field::allow, target->release ? "POST" : "GET");
    return respond(std::move(wrong));
  }
  // Logs never carry the raw key.
  const std::string key_hash = crypto::to_hex(crypto::sha256(target->key)).substr(0, 16);
  const store::RecordKey key{target->scope, target->key};
  if (!target->release) {
    log::info("admin_inspect", {{"route", target->route}, {"scope", target->scope}, {"key_hash", key_hash}});
    context.store.inspect(
        key, [target = *target, respond, docs_url](store::StoreError e, const store::RecordInfo& info) {
          if (e == store::StoreError::ok) {
            return respond(admin::text_response(200, record_json(target.route, target.scope, target.key, info) + "\n",
                                                "application/json"));
          }
          if (e == store::StoreError::not_found) {
            return respond(not_found("no live record for this route, scope and key", docs_url));
          }
          respond(problem(core::store_unavailable_problem(std::chrono::seconds(1)), docs_url));
        });
    return;
  }
  context.store.force_release(key, [target = *target, respond, key_hash, docs_url = std::move(docs_url)](
                                       store::StoreError e, std::chrono::milliseconds lease_left) {
    log::info("admin_release", {{"route", target.route},
                                {"scope", target.scope},
                                {"key_hash", key_hash},
                                {"result", store::store_error_name(e)}});
    if (e == store::StoreError::ok)
      return respond(admin::text_response(200, "{\"released\":true}\n", "application/json"));
    if (e == store::StoreError::lease_running) {
      const auto left = std::max(std::chrono::ceil<std::chrono::seconds>(lease_left), std::chrono::seconds(1));
      return respond(problem(core::release_refused_in_flight_problem(left), docs_url));
    }
    if (e == store::StoreError::not_found) {
      return respond(not_found(
          "no unknown or in-flight record for this route, scope and key (completed records are never released)",
          docs_url));
    }
    respond(problem(core::store_unavailable_problem(std::chrono::seconds(1)), docs_url));
  });
}

}  // namespace

admin::Handler make_proxy_admin_handler(ProxyAdminContext context) {
  return [context](const admin::Request& request, const admin::Respond& respond) mutable {
    const std::string_view target = request.target();
    const std::string_view path = target.substr(0, target.find('?'));
    if (path == "/healthz") return respond(admin::text_response(200, "ok\n"));
    if (path == "/readyz") {
      if (context.draining.load()) return respond(admin::text_response(503, "draining\n"));
      if (!context.store.connected()) return respond(admin::text_response(503, "store unreachable\n"));
      return respond(admin::text_response(200, "ready\n"));
    }
    if (path == "/metrics") {
      return respond(admin::text_response(200, context.metrics.render(), "text/plain; version=0.0.4; charset=utf-8"));
    }
    if (target.starts_with("/admin/keys/")) return handle_key(context, request, respond);
    respond(not_found("no such admin endpoint", context.config()->problem_docs_url()));
  };
}

}  // namespace idem::app
