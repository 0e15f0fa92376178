#include "app/webhook_secret_reloader.hpp"

#include <utility>

#include "config/relay_config_loader.hpp"
#include "log/log.hpp"

namespace idem::app {
WebhookSecretReloader::WebhookSecretReloader(std::string config_path, std::optional<FileVersion> config_version,
                                             const std::vector<std::string>& secret_files, Apply apply)
    : config_path_(std::move(config_path)), config_seen_(config_version), apply_(std::move(apply)) {
  for (const std::string& path : secret_files) secret_files_.push_back({path, file_version(path)});
  thread_ = std::thread([this] { run(); });
}

WebhookSecretReloader::~WebhookSecretReloader() {
  stop();
  if (thread_.joinable()) thread_.join();
}

void WebhookSecretReloader::hangup() {
  {
    const std::lock_guard lock(mutex_);
    hangup_ = true;
  }
  wake_.notify_one();
}

void WebhookSecretReloader::stop() {
  {
    const std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
}

void WebhookSecretReloader::run() {
  while (true) {
    bool hangup = false;
    {
      std::unique_lock lock(mutex_);
      wake_.wait_for(lock, kPollInterval, [this] { return hangup_ || stopping_; });
      if (stopping_) return;
      hangup = std::exchange(hangup_, false);
    }
    if (const std::optional<std::string> reason = changed(hangup)) reload(*reason);
  }
}

std::optional<std::string> WebhookSecretReloader::changed(bool hangup) {
  const std::optional<FileVersion> config_now = file_version(config_path_);
  const bool config_changed = config_now && config_now != config_seen_;
  bool secret_changed = false;
  for (Watched& file : secret_files_) {
    const std::optional<FileVersion> now = file_version(file.path);
    // A file being replaced may be missing for a moment: wait for it to come back.
    if (now && now != file.version) {
      secret_changed = true;
      file.version = now;
    }
  }
  if (config_now) config_seen_ = config_now;
  if (hangup) return "signal";
  if (config_changed) return "file_changed";
  if (secret_changed) return "secret_files_changed";
  return std::nullopt;
}

void WebhookSecretReloader::reload(const std::string& reason) {
  const config::RelayLoadResult loaded = config::load_relay_config_file(config_path_);
  if (!loaded.config) {
    std::string problems;
    for (const config::ConfigIssue& issue : loaded.issues) {
      problems += problems.empty() ? "" : "; ";
      problems += issue.to_string();
    }
    log::error("reload_failed", {{"reason", reason}, {"issues", problems}});
    return;
  }
  const config::HttpSinkConfig& http = loaded.config->sink.http;
  if (loaded.config->sink.kind != config::SinkKind::http) {
    log::warn("reload_ignored", {{"reason", reason}, {"why", "sink.type is no longer http: restart to change sinks"}});
    return;
  }
  // Watch the files the new secrets come from (a rotation may name new ones).
  std::vector<Watched> files;
  for (const std::string& path : http.secret_files) files.push_back({path, file_version(path)});
  secret_files_ = std::move(files);
  log::info("webhook_secrets_reloaded",
            {{"reason", reason}, {"secrets", static_cast<std::int64_t>(http.secrets.size())}});
  apply_(http.secrets);
}

}  // namespace idem::app
