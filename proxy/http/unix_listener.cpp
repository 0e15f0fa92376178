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

// A socket file nobody accepts on (its process was killed: connect is refused) is replaced; a live
// one (connect succeeds, or its backlog is full) is not taken, nor one we may not probe.
void remove_stale(const std::string& path, const sockaddr_un& address) {
  struct stat status {};
  if (::lstat(path.c_str(), &status) != 0) return;
  if (!S_ISSOCK(status.st_mode)) {
    errno = EEXIST;
    fail(path, "the path exists and is not a socket");
  }
  // Non-blocking: a live listener with a full backlog answers EAGAIN instead of holding us.
  const int probe = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (probe < 0) fail(path, "socket");
  const bool connected = ::connect(probe, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0;
  const int error = errno;
  ::close(probe);
  if (connected || error == EAGAIN || error == EINPROGRESS) {
    errno = EADDRINUSE;
    fail(path, "another process listens on it");
  }
  if (error != ECONNREFUSED) {
    errno = error;
    fail(path, "cannot tell whether the socket file there is stale");
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
  if (::chmod(path_.c_str(), 0666) != 0) {
    const int error = errno;
    ::close(fd_);
    ::unlink(path_.c_str());
    errno = error;
    fail(path_, "chmod");
  }
  struct stat bound {};
  if (::stat(path_.c_str(), &bound) == 0) {
    device_ = bound.st_dev;
    inode_ = bound.st_ino;
  }
  if (::listen(fd_, SOMAXCONN) != 0) {
    const int error = errno;
    ::close(fd_);
    ::unlink(path_.c_str());
    errno = error;
    fail(path_, "listen");
  }
}

UnixListener::~UnixListener() { close(); }

void UnixListener::close() {
  if (fd_ < 0) return;
  ::close(fd_);
  fd_ = -1;
  struct stat current {};
  if (::stat(path_.c_str(), &current) == 0 && current.st_dev == device_ && current.st_ino == inode_)
    ::unlink(path_.c_str());
}

}  // namespace idem::http
