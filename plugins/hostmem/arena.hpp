// The hostmem device's memory: one reserved range of the address space, separate from the
// CPU allocator, carved first-fit with coalescing frees. In checking mode the range is
// inaccessible (PROT_NONE) except while an Arena::Access is open - the plugin opens one only
// inside its own copy and kernel calls - so any other code that reads device memory directly
// faults instead of passing by accident.
//
// Thread-safety: every member may be called from any thread; Access nests and may be open on
// several threads at once (the range is accessible while any is open).
#pragma once

#include <cstddef>
#include <map>
#include <mutex>

namespace accelkit::hostmem {

class Arena {
 public:
  // Reserves `capacity` bytes (rounded up to pages; no memory is committed until written).
  // Throws std::system_error when the range cannot be reserved.
  Arena(std::size_t capacity, bool checking);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;

  // `bytes` (> 0), 64-byte aligned; nullptr when the arena has no free block that large.
  void* allocate(std::size_t bytes);
  // Frees what allocate returned; throws std::invalid_argument for anything else.
  void deallocate(void* ptr);

  bool contains(const void* p) const noexcept;
  bool checking() const noexcept { return checking_; }
  std::size_t capacity() const noexcept { return capacity_; }
  std::size_t used() const;

  class Access {
   public:
    explicit Access(Arena& arena);
    ~Access();
    Access(const Access&) = delete;
    Access& operator=(const Access&) = delete;

   private:
    Arena& arena_;
  };

 private:
  void open_access();
  void close_access();

  char* base_ = nullptr;
  std::size_t capacity_ = 0;
  bool checking_ = false;
  mutable std::mutex mu_;
  std::map<std::size_t, std::size_t> free_;  // offset -> size
  std::map<std::size_t, std::size_t> used_;  // offset -> size
  std::size_t used_bytes_ = 0;
  std::mutex access_mu_;
  int open_ = 0;
};

}  // namespace accelkit::hostmem
