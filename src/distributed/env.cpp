#include "distributed/env.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <stdexcept>

#include "util/error.h"

namespace lol::dist {

namespace {
const char* env_or_null(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}
}  // namespace

int64_t parse_env_int(const std::string& name, const std::string& value, int64_t lo, int64_t hi) {
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || errno != 0 || *end != '\0' || v < lo || v > hi)
    throw InputError("environment variable " + name + " = '" + value + "': expected an integer in [" +
                     std::to_string(lo) + ", " + std::to_string(hi) + "]");
  return v;
}

DistEnv read_dist_env() {
  DistEnv e;
  if (const char* t = env_or_null("LOL_DIST_TIMEOUT"))
    e.timeout = std::chrono::seconds(parse_env_int("LOL_DIST_TIMEOUT", t, 1, 7 * 24 * 3600));
  if (const char* c = env_or_null("LOL_DIST_CHECK_EVERY"))
    e.check_every = parse_env_int("LOL_DIST_CHECK_EVERY", c, 0, INT64_MAX);
  const char* ws = env_or_null("WORLD_SIZE");
  if (!ws) return e;
  e.world_size = int(parse_env_int("WORLD_SIZE", ws, 1, 1 << 20));
  if (e.world_size == 1) return e;
  const char* rank = env_or_null("RANK");
  if (!rank) throw InputError("environment: WORLD_SIZE = " + std::string(ws) + " but RANK is not set (expected 0.." +
                              std::to_string(e.world_size - 1) + "; use `lol launch` or torchrun to set both)");
  e.rank = int(parse_env_int("RANK", rank, 0, e.world_size - 1));
  e.local_rank = e.rank;
  if (const char* lr = env_or_null("LOCAL_RANK")) e.local_rank = int(parse_env_int("LOCAL_RANK", lr, 0, e.world_size - 1));
  e.local_world_size = e.world_size;
  if (const char* lw = env_or_null("LOCAL_WORLD_SIZE"))
    e.local_world_size = int(parse_env_int("LOCAL_WORLD_SIZE", lw, 1, e.world_size));
  const char* addr = env_or_null("MASTER_ADDR");
  if (!addr) throw InputError("environment: WORLD_SIZE = " + std::string(ws) + " but MASTER_ADDR is not set (rank 0's host)");
  e.master_addr = addr;
  const char* port = env_or_null("MASTER_PORT");
  if (!port) throw InputError("environment: WORLD_SIZE = " + std::string(ws) + " but MASTER_PORT is not set (a free TCP port on rank 0's host)");
  e.master_port = int(parse_env_int("MASTER_PORT", port, 1, 65535));
  return e;
}

int free_tcp_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) throw std::runtime_error(std::string("free_tcp_port: socket(): ") + std::strerror(errno));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    const int err = errno;
    ::close(fd);
    throw std::runtime_error(std::string("free_tcp_port: bind(127.0.0.1:0): ") + std::strerror(err));
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

}  // namespace lol::dist
