// The proxy's listening unix socket: created mode 0666, a stale file replaced, a live listener's
// never taken, removed by close() (a drain) only while the file is still its own.
#include "http/unix_listener.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace idem::http {
namespace {

namespace fs = std::filesystem;

// A fresh directory under /tmp (a socket path must stay under 108 bytes), removed with its files.
class ScratchDir {
 public:
  ScratchDir() {
    char name[] = "/tmp/idem-ul-XXXXXX";
    if (::mkdtemp(name) == nullptr) throw std::system_error(errno, std::generic_category(), "mkdtemp");
    path_ = name;
  }
  ~ScratchDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

bool accepts_connections(const fs::path& path) {
  const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  const bool connected = ::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return connected;
}

TEST(UnixListener, ListensWithMode0666AndCloseRemovesItsFile) {
  const ScratchDir dir;
  const fs::path path = dir.path() / "proxy.sock";
  UnixListener listener(path.string());
  struct stat status {};
  ASSERT_EQ(::stat(path.c_str(), &status), 0);
  EXPECT_TRUE(S_ISSOCK(status.st_mode));
  EXPECT_EQ(status.st_mode & 0777, 0666u);
  EXPECT_TRUE(accepts_connections(path));
  listener.close();
  EXPECT_FALSE(fs::exists(path));
  EXPECT_FALSE(accepts_connections(path)) << "a draining proxy refuses new clients at once";
  listener.close();  // idempotent
}

TEST(UnixListener, AStaleFileIsReplacedALiveListenerIsNot) {
  const ScratchDir dir;
  const fs::path path = dir.path() / "proxy.sock";
  {
    // A socket bound and closed without removing its file: what a killed proxy leaves.
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    ASSERT_EQ(::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address), 0);
    ::close(fd);
  }
  UnixListener first(path.string());
  EXPECT_TRUE(accepts_connections(path));
  try {
    UnixListener second(path.string());
    FAIL() << "a live listener's socket was taken over";
  } catch (const std::system_error& error) {
    EXPECT_EQ(error.code().value(), EADDRINUSE) << error.what();
  }
  EXPECT_TRUE(accepts_connections(path)) << "the live listener keeps its socket";
}

TEST(UnixListener, APathThatIsNotASocketIsRefusedAndCloseLeavesAReplacedFile) {
  const ScratchDir dir;
  const fs::path file = dir.path() / "not-a-socket";
  { std::ofstream(file) << "x"; }
  EXPECT_THROW(UnixListener{file.string()}, std::system_error);
  EXPECT_TRUE(fs::exists(file));

  const fs::path path = dir.path() / "proxy.sock";
  UnixListener listener(path.string());
  fs::remove(path);
  { std::ofstream(path) << "a successor's"; }
  listener.close();
  EXPECT_TRUE(fs::exists(path)) << "close() removes only the file it bound";
}

}  // namespace
}  // namespace idem::http
