#pragma once
// Identity of a file's current content, for the watchers that reload on change (idemproxy's
// config_watcher, idemrelay's webhook secrets).
#include <sys/types.h>

#include <cstdint>
#include <optional>
#include <string>

namespace idem::app {

// Following symlinks (ConfigMap volumes swap a symlink to a new file): inode, size and mtime,
// since file timestamps are coarse and two quick writes can share one mtime.
struct FileVersion {
  dev_t device = 0;
  ino_t inode = 0;
  off_t size = 0;
  std::int64_t mtime_ns = 0;
  bool operator==(const FileVersion&) const = default;
};
std::optional<FileVersion> file_version(const std::string& path);

}  // namespace idem::app
