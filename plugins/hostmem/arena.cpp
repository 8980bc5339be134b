#include "arena.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <iterator>
#include <stdexcept>
#include <system_error>

namespace accelkit::hostmem {
namespace {

constexpr std::size_t kAlign = 64;

std::size_t round_up(std::size_t n, std::size_t to) { return (n + to - 1) / to * to; }

}  // namespace

Arena::Arena(std::size_t capacity, bool checking) : checking_(checking) {
  const std::size_t page = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  capacity_ = round_up(capacity < page ? page : capacity, page);
  void* p = ::mmap(nullptr, capacity_, checking_ ? PROT_NONE : PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw std::system_error(errno, std::generic_category(), "hostmem: reserving the arena");
  base_ = static_cast<char*>(p);
  free_[0] = capacity_;
}

Arena::~Arena() { ::munmap(base_, capacity_); }

void* Arena::allocate(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  const std::size_t size = round_up(bytes, kAlign);
  std::lock_guard<std::mutex> lock(mu_);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const std::size_t offset = it->first, left = it->second - size;
    free_.erase(it);
    if (left > 0) free_[offset + size] = left;
    used_[offset] = size;
    used_bytes_ += size;
    return base_ + offset;
  }
  return nullptr;
}

void Arena::deallocate(void* ptr) {
  if (!contains(ptr)) throw std::invalid_argument("hostmem: freeing a pointer outside the arena");
  const std::size_t offset = static_cast<std::size_t>(static_cast<char*>(ptr) - base_);
  std::lock_guard<std::mutex> lock(mu_);
  auto it = used_.find(offset);
  if (it == used_.end()) throw std::invalid_argument("hostmem: freeing a pointer the arena did not hand out");
  std::size_t start = offset, size = it->second;
  used_.erase(it);
  used_bytes_ -= size;
  // Coalesce with the free neighbours.
  auto next = free_.lower_bound(start);
  if (next != free_.end() && next->first == start + size) {
    size += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == start) {
      start = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  free_[start] = size;
}

bool Arena::contains(const void* p) const noexcept {
  const char* c = static_cast<const char*>(p);
  return c >= base_ && c < base_ + capacity_;
}

std::size_t Arena::used() const {
  std::lock_guard<std::mutex> lock(mu_);
  return used_bytes_;
}

void Arena::open_access() {
  if (!checking_) return;
  std::lock_guard<std::mutex> lock(access_mu_);
  if (open_++ == 0 && ::mprotect(base_, capacity_, PROT_READ | PROT_WRITE) != 0)
    throw std::system_error(errno, std::generic_category(), "hostmem: opening the arena");
}

void Arena::close_access() {
  if (!checking_) return;
  std::lock_guard<std::mutex> lock(access_mu_);
  if (--open_ == 0) (void)::mprotect(base_, capacity_, PROT_NONE);
}

Arena::Access::Access(Arena& arena) : arena_(arena) { arena_.open_access(); }
Arena::Access::~Access() { arena_.close_access(); }

}  // namespace accelkit::hostmem
