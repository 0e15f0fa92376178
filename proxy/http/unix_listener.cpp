#include "http/unix_listener.hpp"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <system_error>

namespace idem::http {
namespace {

[[noreturn]] void fail(const std::string& path, const char* what) {
  throw std::system_error(errno, std::generic_category(), "listen unix:" + path + ": " + what);
}

sockaddr_un address_of(const std::string& path) {
  sockaddr_un address{};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path)) {
    errno = ENAMETOOLONG;
    fail(path, "path too long");
  }
  std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
  return address;
}

// A socket file nobody accepts on (its process was killed) is replaced; a live one is not taken.
void remove_stale(const std::string& path, const sockaddr_un& address) {
  struct stat status {};
  if (::lstat(path.c_str(), &status) != 0) return;
  if (!S_ISSOCK(status.st_mode)) {
    errno = EEXIST;
    fail(path, "the path exists and is not a socket");
  }
  const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0) fail(path, "socket");
  const bool live = ::connect(probe, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  ::close(probe);
  if (live) {
    errno = EADDRINUSE;
    fail(path, "another process listens on it");
  }
  ::unlink(path.c_str());
}

}  // namespace

UnixListener::UnixListener(std::string path) : path_(std::move(path)) {
  const sockaddr_un address = address_of(path_);
  remove_stale(path_, address);
  fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) fail(path_, "socket");
  if (::bind(fd_, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0) {
    const int error = errno;
    ::close(fd_);
    errno = error;
    fail(path_, "bind");
  }
  // Anyone who can reach the directory may connect: the directory is the access control.
  ::chmod(path_.c_str(), 0666);
  if (::listen(fd_, SOMAXCONN) != 0) {
    const int error = errno;
    ::close(fd_);
    ::unlink(path_.c_str());
    errno = error;
    fail(path_, "listen");
  }
}

UnixListener::~UnixListener() {
  ::close(fd_);
  ::unlink(path_.c_str());
}

}  // namespace idem::http
