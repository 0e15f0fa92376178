#include "app/config_watcher.hpp"

#include <utility>

namespace idem::app {

ConfigWatcher::ConfigWatcher(std::string config_path, std::optional<FileVersion> config_version,
                             const config::ListenerTlsConfig& listener)
    : config_path_(std::move(config_path)),
      config_seen_(config_version),
      tls_files_seen_(tls_file_versions(listener)) {}

ConfigWatcher::TlsFileVersions ConfigWatcher::tls_file_versions(const config::ListenerTlsConfig& listener) {
  if (!listener.enabled()) return {};
  return {file_version(listener.cert_file), file_version(listener.key_file)};
}

std::optional<std::string_view> ConfigWatcher::poll(bool hangup, const config::ListenerTlsConfig& listener) {
  const auto config_now = file_version(config_path_);
  const TlsFileVersions tls_now = tls_file_versions(listener);
  const bool file_changed = config_now && config_now != config_seen_;
  const bool tls_files_changed = tls_now != tls_files_seen_;
  if (!hangup && !file_changed && !tls_files_changed) return std::nullopt;
  config_seen_ = config_now;
  tls_files_seen_ = tls_now;
  return hangup ? "signal" : file_changed ? "file_changed" : "tls_files_changed";
}

void ConfigWatcher::note_tls_files(const config::ListenerTlsConfig& listener) {
  tls_files_seen_ = tls_file_versions(listener);
}

}  // namespace idem::app
