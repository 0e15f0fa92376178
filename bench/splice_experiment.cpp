// idem-splice-experiment: does splice(2) on plain TCP beat copying through user space, for the
// relay a streaming proxy does? One process, three threads, two loopback TCP connections:
//
//   source thread --conn A--> relay thread --conn B--> sink thread
//
// The source writes BYTES of a fixed pattern into A; the relay moves them from A to B either by
// read(2)/write(2) through a 32 KiB buffer (the proxy's window, README "### Streaming") or by
// splice(2) A -> pipe -> B (32 KiB per call, SPLICE_F_MOVE | SPLICE_F_MORE); the sink reads B and
// counts. What is compared is the relay thread: its CPU time (CLOCK_THREAD_CPUTIME_ID, user +
// system: splice's work is in the kernel) per GiB; beside it the three threads' CPU per GiB (a
// cost splice moves to the sink's side would show there) and the wall-clock throughput of the
// whole chain (which also depends on the source and sink sharing the cores). The sink checks the byte
// count and the pattern of every byte, so neither mode can cheat.
//
// Blocking sockets in both modes: the proxy's non-blocking, epoll-driven loop adds the same
// wake-ups to either, so the difference between the two modes is what this measures.
//
// Usage: idem-splice-experiment [--bytes N] [--runs R] [--window W]
//   prints one JSON object per run and mode (copy and splice alternate), then a summary line each.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

constexpr std::size_t kPatternPeriod = 251;  // byte i is i % 251, as the streaming tests' pattern

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "idem-splice-experiment: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

double cpu_seconds(clockid_t clock) {
  timespec now{};
  clock_gettime(clock, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) / 1e9;
}

// A connected pair of loopback TCP sockets: {client end, server end}.
std::pair<int, int> tcp_pair() {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) die("socket");
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (bind(listener, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) die("bind");
  if (listen(listener, 1) != 0) die("listen");
  socklen_t length = sizeof address;
  if (getsockname(listener, reinterpret_cast<sockaddr*>(&address), &length) != 0) die("getsockname");
  const int client = socket(AF_INET, SOCK_STREAM, 0);
  if (client < 0) die("socket");
  if (connect(client, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0) die("connect");
  const int server = accept(listener, nullptr, nullptr);
  if (server < 0) die("accept");
  close(listener);
  const int one = 1;
  setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  setsockopt(server, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return {client, server};
}

void write_all(int fd, const char* data, std::size_t size) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) die("write");
    data += n;
    size -= static_cast<std::size_t>(n);
  }
}

void source(int fd, std::uint64_t bytes) {
  constexpr std::size_t kWrite = 256 * 1024;
  // A period-aligned slice: every write starts at offset 0 of the pattern.
  const std::size_t slice = kWrite - kWrite % kPatternPeriod;
  std::vector<char> pattern(slice);
  for (std::size_t i = 0; i < slice; ++i) pattern[i] = static_cast<char>(i % kPatternPeriod);
  for (std::uint64_t sent = 0; sent < bytes;) {
    const std::size_t take = static_cast<std::size_t>(std::min<std::uint64_t>(slice, bytes - sent));
    write_all(fd, pattern.data(), take);
    sent += take;
  }
  shutdown(fd, SHUT_WR);
}

struct SinkResult {
  std::uint64_t bytes = 0;
  bool pattern_ok = true;
};

void sink(int fd, SinkResult& result) {
  constexpr std::size_t kRead = 256 * 1024;
  std::vector<char> buffer(kRead);
  // The pattern from any phase: bytes [offset % 251, + n) of this are what offset.. must hold.
  std::vector<char> expected(kRead + kPatternPeriod);
  for (std::size_t i = 0; i < expected.size(); ++i) expected[i] = static_cast<char>(i % kPatternPeriod);
  std::uint64_t offset = 0;
  for (;;) {
    const ssize_t n = read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) die("sink read");
    if (n == 0) break;
    if (std::memcmp(buffer.data(), expected.data() + offset % kPatternPeriod, static_cast<std::size_t>(n)) != 0) {
      result.pattern_ok = false;
    }
    offset += static_cast<std::uint64_t>(n);
  }
  result.bytes = offset;
}

// read/write through one user-space window.
void relay_copy(int from, int to, std::size_t window) {
  std::vector<char> buffer(window);
  for (;;) {
    const ssize_t n = read(from, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) die("relay read");
    if (n == 0) break;
    write_all(to, buffer.data(), static_cast<std::size_t>(n));
  }
  shutdown(to, SHUT_WR);
}

// socket -> pipe -> socket, the bytes never in user space.
void relay_splice(int from, int to, std::size_t window) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) die("pipe2");
  for (;;) {
    const ssize_t in = splice(from, nullptr, pipe_fds[1], nullptr, window, SPLICE_F_MOVE | SPLICE_F_MORE);
    if (in < 0 && errno == EINTR) continue;
    if (in < 0) die("splice in");
    if (in == 0) break;
    for (ssize_t left = in; left > 0;) {
      const ssize_t out =
          splice(pipe_fds[0], nullptr, to, nullptr, static_cast<std::size_t>(left), SPLICE_F_MOVE | SPLICE_F_MORE);
      if (out < 0 && errno == EINTR) continue;
      if (out <= 0) die("splice out");
      left -= out;
    }
  }
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  shutdown(to, SHUT_WR);
}

struct RunResult {
  double seconds = 0, relay_cpu_seconds = 0, all_cpu_seconds = 0;
  SinkResult sink;
};

RunResult run(std::string_view mode, std::uint64_t bytes, std::size_t window) {
  auto [a_client, a_server] = tcp_pair();
  auto [b_client, b_server] = tcp_pair();
  RunResult result;
  const auto started = std::chrono::steady_clock::now();
  const double all_before = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
  std::thread source_thread(source, a_client, bytes);
  std::thread sink_thread(sink, b_server, std::ref(result.sink));
  const double cpu_before = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
  if (mode == "splice") {
    relay_splice(a_server, b_client, window);
  } else {
    relay_copy(a_server, b_client, window);
  }
  result.relay_cpu_seconds = cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - cpu_before;
  source_thread.join();
  sink_thread.join();
  result.all_cpu_seconds = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - all_before;
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  for (int fd : {a_client, a_server, b_client, b_server}) close(fd);
  return result;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::uint64_t bytes = 1ULL << 30;
  int runs = 3;
  std::size_t window = 32 * 1024;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string_view name = argv[i];
    if (name == "--bytes") {
      bytes = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (name == "--runs") {
      runs = std::max(1, std::atoi(argv[i + 1]));
    } else if (name == "--window") {
      window = std::strtoull(argv[i + 1], nullptr, 10);
    } else {
      std::fprintf(stderr, "usage: idem-splice-experiment [--bytes N] [--runs R] [--window W]\n");
      return 2;
    }
  }
  const double gib = static_cast<double>(bytes) / static_cast<double>(1ULL << 30);
  bool ok = true;
  std::vector<double> throughput[2], cpu[2], all_cpu[2];
  const char* modes[2] = {"copy", "splice"};
  for (int round = 0; round < runs; ++round) {
    for (int m = 0; m < 2; ++m) {
      const RunResult result = run(modes[m], bytes, window);
      const bool verified = result.sink.bytes == bytes && result.sink.pattern_ok;
      ok = ok && verified;
      throughput[m].push_back(gib / result.seconds);
      cpu[m].push_back(result.relay_cpu_seconds / gib);
      all_cpu[m].push_back(result.all_cpu_seconds / gib);
      std::printf(
          "{\"mode\":\"%s\",\"run\":%d,\"bytes\":%llu,\"window\":%zu,\"seconds\":%.3f,\"gib_per_s\":%.3f,"
          "\"relay_cpu_s_per_gib\":%.3f,\"all_threads_cpu_s_per_gib\":%.3f,\"verified\":%s}\n",
          modes[m], round + 1, static_cast<unsigned long long>(result.sink.bytes), window, result.seconds,
          gib / result.seconds, result.relay_cpu_seconds / gib, result.all_cpu_seconds / gib,
          verified ? "true" : "false");
      std::fflush(stdout);
    }
  }
  for (int m = 0; m < 2; ++m) {
    const auto [tmin, tmax] = std::minmax_element(throughput[m].begin(), throughput[m].end());
    const auto [cmin, cmax] = std::minmax_element(cpu[m].begin(), cpu[m].end());
    const auto [amin, amax] = std::minmax_element(all_cpu[m].begin(), all_cpu[m].end());
    std::printf(
        "{\"summary\":\"%s\",\"runs\":%d,\"gib_per_s\":{\"min\":%.3f,\"median\":%.3f,\"max\":%.3f},"
        "\"relay_cpu_s_per_gib\":{\"min\":%.3f,\"median\":%.3f,\"max\":%.3f},"
        "\"all_threads_cpu_s_per_gib\":{\"min\":%.3f,\"median\":%.3f,\"max\":%.3f}}\n",
        modes[m], runs, *tmin, median(throughput[m]), *tmax, *cmin, median(cpu[m]), *cmax, *amin, median(all_cpu[m]),
        *amax);
  }
  return ok ? 0 : 1;
}
