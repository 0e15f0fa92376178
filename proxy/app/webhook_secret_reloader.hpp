#pragma once
// Rotating idemrelay's webhook secrets without a restart: on SIGHUP, when the config file changes,
// or when a sink.http.secret_file[s] file changes (Kubernetes Secret volumes rewrite them in
// place), the config file is read again and its webhook secrets handed to `apply`. Only the
// secrets are taken from the new file; any other change waits for a restart. A file that does not
// load is logged (`reload_failed`, every problem as file:line:col) and the secrets in force stay.
//
// Its own thread: reading the files never blocks the relay's io thread. It polls the files' identity
// (app/file_version.hpp) every kPollInterval; `apply` runs on that thread and must hand the
// secrets over to the io thread itself (post).
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "app/file_version.hpp"

namespace idem::app {

class WebhookSecretReloader {
 public:
  using Apply = std::function<void(std::vector<std::string> secrets)>;
  static constexpr std::chrono::milliseconds kPollInterval{500};

  // `config_version`: the config file's identity noted before it was first read (a change made
  // while the relay started still reloads). `secret_files`: those the secrets in force came from.
  WebhookSecretReloader(std::string config_path, std::optional<FileVersion> config_version,
                        const std::vector<std::string>& secret_files, Apply apply);
  ~WebhookSecretReloader();  // stops and joins
  WebhookSecretReloader(const WebhookSecretReloader&) = delete;
  WebhookSecretReloader& operator=(const WebhookSecretReloader&) = delete;

  void hangup();  // any thread: reload now (SIGHUP)
  void stop();    // any thread; idempotent

 private:
  struct Watched {
    std::string path;
    std::optional<FileVersion> version;
  };
  void run();
  // The reason to reload now, or nothing; notes what it saw.
  std::optional<std::string> changed(bool hangup);
  void reload(const std::string& reason);

  std::string config_path_;
  std::optional<FileVersion> config_seen_;
  std::vector<Watched> secret_files_;
  Apply apply_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool hangup_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace idem::app
