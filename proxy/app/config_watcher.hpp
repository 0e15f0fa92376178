#pragma once
// When idemproxy reads its configuration again: on SIGHUP, when the config file's content changed,
// or when the listener's certificate or key file changed (cert-manager and Kubernetes Secret
// volumes rewrite them without touching the config file). Polled by the main thread only.
#include <sys/types.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "app/file_version.hpp"
#include "config/config.hpp"

namespace idem::app {

class ConfigWatcher {
 public:
  // `config_version`: the file's identity noted before it was first read, so a change made while
  // the proxy starts still triggers a reload. `listener`: the TLS section the files were read with.
  ConfigWatcher(std::string config_path, std::optional<FileVersion> config_version,
                const config::ListenerTlsConfig& listener);

  // The reason to reload now ("signal", "file_changed", "tls_files_changed"), or nothing. What it
  // returns is taken as seen: a rejected reload is not retried until the next change.
  // `listener`: the TLS section in force.
  std::optional<std::string_view> poll(bool hangup, const config::ListenerTlsConfig& listener);
  // Notes the TLS files just before a reload reads them: a change after this triggers another.
  void note_tls_files(const config::ListenerTlsConfig& listener);

  const std::string& config_path() const { return config_path_; }

 private:
  using TlsFileVersions = std::array<std::optional<FileVersion>, 2>;  // certificate, key
  static TlsFileVersions tls_file_versions(const config::ListenerTlsConfig& listener);

  std::string config_path_;
  std::optional<FileVersion> config_seen_;
  TlsFileVersions tls_files_seen_;
};

}  // namespace idem::app
