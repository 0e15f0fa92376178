#pragma once
// A private directory under $TMPDIR for one test's files (configs, process logs), removed when the
// owner goes away unless IDEMPROXY_TEST_KEEP_TMP=1 asks to keep it for a post-mortem.
#include <filesystem>
#include <string_view>

namespace idem::test {

class TempDir {
 public:
  // Creates "<tmp>/<prefix>-XXXXXX". Throws std::runtime_error when it cannot.
  explicit TempDir(std::string_view prefix = "idem-test");
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  TempDir(TempDir&& other) noexcept;
  TempDir& operator=(TempDir&& other) noexcept;

  const std::filesystem::path& path() const { return path_; }
  // Leave the directory on disk when this object is destroyed.
  void keep() { keep_ = true; }

 private:
  void remove() noexcept;

  std::filesystem::path path_;
  bool keep_ = false;
};

}  // namespace idem::test
