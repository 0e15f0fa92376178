#pragma once
// The proxy's listening unix socket (`listen: unix:/path`), for a service that reaches its sidecar
// that way. Bound once per process; each worker accepts on a duplicate of it. The socket file is
// created mode 0666 (the directory's permissions say who may connect, as with a shared volume in
// a pod) and removed when the listener goes; a stale file left by a killed process is replaced,
// one that a live process still listens on is not.
#include <string>

namespace idem::http {

class UnixListener {
 public:
  // Throws std::system_error saying what failed (the path in use, a directory that is missing).
  explicit UnixListener(std::string path);
  ~UnixListener();
  UnixListener(const UnixListener&) = delete;
  UnixListener& operator=(const UnixListener&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // Stops listening (a draining process: new connections are refused at once, as on TCP once every
  // acceptor closed) and removes the file if it is still this socket's. Idempotent.
  void close();

 private:
  std::string path_;
  int fd_ = -1;
  // The file bound: removed only while it is still this one (a successor may have replaced it).
  unsigned long long device_ = 0;
  unsigned long long inode_ = 0;
};

}  // namespace idem::http
