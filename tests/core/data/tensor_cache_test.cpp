// The tensor cache (accelkit/tensor_cache.hpp): round trips of every dtype and layout of strides,
// corrupt, truncated and crafted entries, the LRU budget, writers killed mid-write and two
// writers of one key (forked processes), threads sharing a cache, unusable directories and a
// write that fails part way.
//
// Forked children run only the cache's write path on tensors made before the fork (no LibTorch
// operator that could start or wait for a thread pool), then leave with _exit.
#include "torch_doctest.hpp"

#include <fcntl.h>
#include <lz4frame.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <torch/torch.h>

#include "accelkit/tensor_cache.hpp"
#include "test_support.hpp"

namespace tensor_cache_suite {

using accelkit::TensorCache;
using accelkit::TensorCacheOptions;
using accelkit::test::contains;
using accelkit::test::TempDir;
namespace fs = std::filesystem;

// The warnings a cache reports, one line each.
struct Warnings {
  std::mutex m;
  std::vector<std::string> lines;
  std::size_t size() {
    std::lock_guard<std::mutex> lock(m);
    return lines.size();
  }
  std::string text() {
    std::lock_guard<std::mutex> lock(m);
    return accelkit::test::join(lines);
  }
};

TensorCacheOptions options(const std::string& dir, Warnings* w, std::uint64_t budget = 1ull << 30,
                           const std::string& version = "1") {
  TensorCacheOptions o;
  o.dir = dir;
  o.version = version;
  o.budget_bytes = budget;
  o.warn = [w](const std::string& line) {
    if (!w) return;
    std::lock_guard<std::mutex> lock(w->m);
    w->lines.push_back(line);
  };
  return o;
}

// The directory's entry files (<hex>.tc) or temporary files (.<hex>.tc.tmp-...), sorted.
std::vector<std::string> files_in(const fs::path& dir, bool temporary) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    const bool is_temp = contains(n, ".tmp-");
    const bool is_entry = !is_temp && n.size() > 3 && n.compare(n.size() - 3, 3, ".tc") == 0 && n[0] != '.';
    if (temporary ? is_temp : is_entry) out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void write_bytes(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  REQUIRE(out.good());
}

const std::vector<c10::ScalarType> kAllTypes = {
    c10::ScalarType::Float, c10::ScalarType::Double, c10::ScalarType::Half,         c10::ScalarType::BFloat16,
    c10::ScalarType::Char,  c10::ScalarType::Byte,   c10::ScalarType::Short,        c10::ScalarType::Int,
    c10::ScalarType::Long,  c10::ScalarType::Bool,   c10::ScalarType::ComplexFloat, c10::ScalarType::ComplexDouble};

at::Tensor random_of(c10::ScalarType type, std::vector<std::int64_t> sizes) {
  const at::IntArrayRef s(sizes);
  switch (type) {
    case c10::ScalarType::Bool:
      return at::randint(0, 2, s, at::TensorOptions().dtype(at::kLong)).to(type);
    case c10::ScalarType::Byte:
      return at::randint(0, 256, s, at::TensorOptions().dtype(at::kLong)).to(type);
    case c10::ScalarType::Char:
    case c10::ScalarType::Short:
    case c10::ScalarType::Int:
    case c10::ScalarType::Long:
      return at::randint(-100, 100, s, at::TensorOptions().dtype(at::kLong)).to(type);
    case c10::ScalarType::ComplexFloat:
    case c10::ScalarType::ComplexDouble:
      return at::complex(at::randn(s, at::TensorOptions().dtype(at::kDouble)),
                         at::randn(s, at::TensorOptions().dtype(at::kDouble)))
          .to(type);
    default:
      return at::randn(s).to(type);
  }
}

// Same dtype, sizes and values (torch::equal), and the same bytes as `want` made contiguous.
bool same(const at::Tensor& got, const at::Tensor& want_view) {
  const at::Tensor want = want_view.resolve_conj().resolve_neg().contiguous();
  if (!got.defined() || got.scalar_type() != want.scalar_type() || got.sizes().vec() != want.sizes().vec())
    return false;
  if (!got.is_contiguous() || got.device().type() != c10::DeviceType::CPU) return false;
  if (!torch::equal(got, want)) return false;
  return want.numel() == 0 || std::memcmp(got.data_ptr(), want.data_ptr(), want.nbytes()) == 0;
}

bool same_sample(const std::vector<at::Tensor>& got, const std::vector<at::Tensor>& want) {
  if (got.size() != want.size()) return false;
  for (std::size_t i = 0; i < got.size(); ++i)
    if (!same(got[i], want[i])) return false;
  return true;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return status;
}

TEST_CASE("tensor cache: every dtype round trips, with non-contiguous, 0-dim and empty tensors") {
  const std::uint64_t seed = accelkit::test::test_seed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  TempDir tmp("accelkit-tensor-cache");
  Warnings w;
  TensorCache c(options(tmp.str(), &w));
  REQUIRE(c.enabled());
  CHECK(c.disabled_reason().empty());

  std::vector<std::pair<std::string, at::Tensor>> cases;
  for (const c10::ScalarType type : kAllTypes) {
    const std::string n = c10::toString(type);
    const at::Tensor base = random_of(type, {6, 10});
    cases.emplace_back(n + " contiguous", base);
    cases.emplace_back(n + " transposed", base.t());
    cases.emplace_back(n + " sliced with steps", base.slice(0, 1, 6, 2).slice(1, 2, 9, 3));
    cases.emplace_back(n + " expanded", random_of(type, {4, 1}).expand({4, 5}));
    cases.emplace_back(n + " 0-dim", random_of(type, {}));
    cases.emplace_back(n + " empty", random_of(type, {0}));
    cases.emplace_back(n + " empty 2x0x3", random_of(type, {2, 0, 3}));
  }
  cases.emplace_back("complex conjugate view", random_of(c10::ScalarType::ComplexFloat, {3, 4}).conj());
  cases.emplace_back("channels last", at::randn({2, 3, 4, 5}).contiguous(at::MemoryFormat::ChannelsLast));
  cases.emplace_back("requires grad", at::randn({3, 3}).set_requires_grad(true));
  cases.emplace_back("3 MiB of floats (many LZ4 blocks)", at::randn({768, 1024}));
  cases.emplace_back("4 MiB of zeros", at::zeros({1 << 20}));

  std::vector<at::Tensor> all;
  for (const auto& [name, t] : cases) {
    INFO(name);
    all.push_back(t);
    const std::string key = "single/" + name;
    CHECK_FALSE(c.get_tensor(key).has_value());
    c.put(key, t);
    const std::optional<at::Tensor> got = c.get_tensor(key);
    REQUIRE(got.has_value());
    CHECK(same(*got, t));
    CHECK_FALSE(got->requires_grad());
  }
  CHECK_FALSE(cases[1].second.is_contiguous());  // the views really are views
  CHECK(cases[3].second.stride(1) == 0);
  CHECK(cases.back().second.numel() == (1 << 20));

  // One sample of all of them, read back by another cache on the same directory.
  c.put("sample", all);
  TensorCache other(options(tmp.str(), &w));
  const auto got = other.get("sample");
  REQUIRE(got.has_value());
  REQUIRE(got->size() == all.size());
  for (std::size_t i = 0; i < all.size(); ++i) {
    INFO(cases[i].first);
    CHECK(same((*got)[i], all[i]));
  }
  CHECK_FALSE(c.get_tensor("sample").has_value());  // not a single-tensor entry
  // A bool tensor holding bytes other than 0 and 1 (uninitialised memory, say) is stored as
  // LibTorch reads it.
  const at::Tensor odd_bools =
      at::tensor(std::vector<std::int64_t>{0, 2, 1, 255}).to(at::kByte).view(c10::ScalarType::Bool);
  c.put("odd bools", odd_bools);
  const auto bools = c.get_tensor("odd bools");
  REQUIRE(bools.has_value());
  CHECK(same(*bools, torch::tensor({false, true, true, true})));
  // An empty sample is a sample too.
  c.put("nothing", std::vector<at::Tensor>{});
  const auto nothing = c.get("nothing");
  REQUIRE(nothing.has_value());
  CHECK(nothing->empty());

  CHECK(c.stats().corrupt == 0);
  CHECK(w.size() == 0);
  INFO(w.text());
}

TEST_CASE("tensor cache: keys and versions name entries; a hash collision is a miss") {
  TempDir tmp("accelkit-tensor-cache");
  Warnings w;
  TensorCache c(options(tmp.str(), &w));
  const at::Tensor a = at::arange(10, at::TensorOptions().dtype(at::kFloat));
  c.put("a", a);
  CHECK_FALSE(c.get("b").has_value());
  INFO(w.text());
  REQUIRE(c.get_tensor("a").has_value());

  // The file name: FNV-1a 64 of the version's length (8 bytes, little-endian), the version
  // and the key, in hex: the same in every build.
  auto fnv = [](const std::string& version, const std::string& key) {
    std::string input(8, '\0');
    for (int i = 0; i < 8; ++i) input[i] = static_cast<char>((version.size() >> (8 * i)) & 0xff);
    input += version + key;
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (unsigned char ch : input) h = (h ^ ch) * 0x100000001b3ull;
    char buf[20];
    std::snprintf(buf, sizeof buf, "%016llx.tc", static_cast<unsigned long long>(h));
    return std::string(buf);
  };
  CHECK(c.entry_path("a") == tmp.str() + "/" + fnv("1", "a"));
  CHECK(files_in(tmp.path(), false) == std::vector<std::string>{fnv("1", "a")});

  // Another version: other entries; the first version's are still there.
  TensorCache v2(options(tmp.str(), &w, 1ull << 30, "2"));
  CHECK(v2.entry_path("a") != c.entry_path("a"));
  CHECK_FALSE(v2.get("a").has_value());
  v2.put("a", a * 2);
  REQUIRE(v2.get_tensor("a").has_value());
  CHECK(same(*v2.get_tensor("a"), a * 2));
  CHECK(same(*c.get_tensor("a"), a));

  // Key "a"'s file under key "b"'s name (what a hash collision would look like): a miss, and
  // the file is left alone (it is a valid entry, of another key).
  fs::copy_file(c.entry_path("a"), c.entry_path("b"));
  CHECK_FALSE(c.get("b").has_value());
  CHECK(fs::exists(c.entry_path("b")));
  CHECK(c.stats().corrupt == 0);
  CHECK(w.size() == 0);
  // A put of "b" replaces it.
  c.put("b", a + 1);
  REQUIRE(c.get_tensor("b").has_value());
  CHECK(same(*c.get_tensor("b"), a + 1));
}

TEST_CASE("tensor cache: a flipped bit or a truncated file is detected, reported once, removed and recomputed") {
  const std::uint64_t seed = accelkit::test::test_seed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  std::mt19937_64 rng(seed);
  // 600 KB of floats (three LZ4 blocks and a bit) and a small tensor.
  const std::vector<at::Tensor> sample{at::randn({300, 500}),
                                       at::arange(1000, at::TensorOptions().dtype(at::kLong))};

  struct Damage {
    std::string name;
    std::function<void(const fs::path&)> apply;
  };
  auto flip_at = [&rng](double where) {
    return [&rng, where](const fs::path& p) {
      std::string bytes = read_bytes(p);
      const std::size_t at = static_cast<std::size_t>(static_cast<double>(bytes.size()) * where);
      bytes[at] = static_cast<char>(bytes[at] ^ (1 << (rng() % 8)));
      write_bytes(p, bytes);
    };
  };
  auto truncate_to = [](std::function<std::uintmax_t(std::uintmax_t)> size) {
    return [size](const fs::path& p) { fs::resize_file(p, size(fs::file_size(p))); };
  };
  const std::vector<Damage> damages = {
      {"a bit flipped in the middle", flip_at(0.5)},
      {"a bit flipped near the start (in the metadata's block)", flip_at(0.0001)},
      {"a bit flipped near the end", flip_at(0.999)},
      {"truncated to half", truncate_to([](std::uintmax_t n) { return n / 2; })},
      {"truncated to nothing", truncate_to([](std::uintmax_t) { return 0; })},
      {"truncated inside the LZ4 frame header", truncate_to([](std::uintmax_t) { return 10; })},
      {"the content checksum missing", truncate_to([](std::uintmax_t n) { return n - 4; })},
      {"one byte short", truncate_to([](std::uintmax_t n) { return n - 1; })},
      {"bytes after the frame",
       [](const fs::path& p) { write_bytes(p, read_bytes(p) + std::string("\0\0\0", 3)); }},
  };
  for (const Damage& d : damages) {
    INFO(d.name);
    TempDir tmp("accelkit-tensor-cache");
    Warnings w;
    TensorCache c(options(tmp.str(), &w));
    c.put("k", sample);
    const std::string path = c.entry_path("k");
    REQUIRE(fs::exists(path));
    d.apply(path);

    CHECK_FALSE(c.get("k").has_value());
    CHECK_FALSE(fs::exists(path));
    CHECK(c.stats().corrupt == 1);
    REQUIRE(w.size() == 1);
    CHECK(contains(w.lines[0], path));
    CHECK(contains(w.lines[0], "bad entry"));
    // Gone: a plain miss now, no second report.
    CHECK_FALSE(c.get("k").has_value());
    CHECK(w.size() == 1);

    int computed = 0;
    auto compute = [&] {
      ++computed;
      return sample;
    };
    CHECK(same_sample(c.get_or_compute("k", compute), sample));
    CHECK(computed == 1);
    CHECK(fs::exists(path));
    CHECK(same_sample(c.get_or_compute("k", compute), sample));
    CHECK(computed == 1);
    CHECK(c.stats().corrupt == 1);
    CHECK(c.enabled());
  }

  // One bit anywhere past the frame descriptor (which only a 1-byte header checksum covers):
  // the block or content checksum (32 bits each) or the header checks catch it.
  TempDir tmp("accelkit-tensor-cache");
  Warnings w;
  TensorCache c(options(tmp.str(), &w));
  c.put("k", sample);
  const std::string good = read_bytes(c.entry_path("k"));
  constexpr int kFlips = 24;
  for (int i = 0; i < kFlips; ++i) {
    std::string bytes = good;
    const std::size_t at = 15 + rng() % (bytes.size() - 15);
    const int bit = static_cast<int>(rng() % 8);
    INFO("bit " << bit << " of byte " << at << " of " << bytes.size());
    bytes[at] = static_cast<char>(bytes[at] ^ (1 << bit));
    write_bytes(c.entry_path("k"), bytes);
    CHECK_FALSE(c.get("k").has_value());
    CHECK_FALSE(fs::exists(c.entry_path("k")));
    write_bytes(c.entry_path("k"), good);
  }
  CHECK(c.stats().corrupt == kFlips);
  CHECK(w.size() == kFlips);
  REQUIRE(c.get("k").has_value());
  CHECK(same_sample(*c.get("k"), sample));
}

// An entry's content as the format describes it (tensor_cache.hpp), for entries crafted here.
struct Crafted {
  std::string magic = "akTCache";
  std::uint32_t format = 1;
  std::string key = "k", version = "1";
  struct T {
    std::uint8_t code;
    std::vector<std::uint64_t> sizes;
  };
  std::vector<T> tensors;
  std::string payload;
  std::optional<std::uint32_t> meta_len, count;
  std::string meta_extra;

  std::string content() const {
    auto u32 = [](std::string& out, std::uint32_t v) {
      for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    };
    std::string meta;
    u32(meta, static_cast<std::uint32_t>(key.size()));
    meta += key;
    u32(meta, static_cast<std::uint32_t>(version.size()));
    meta += version;
    u32(meta, count.value_or(static_cast<std::uint32_t>(tensors.size())));
    for (const T& t : tensors) {
      meta.push_back(static_cast<char>(t.code));
      meta.push_back(static_cast<char>(t.sizes.size()));
      for (std::uint64_t s : t.sizes)
        for (int i = 0; i < 8; ++i) meta.push_back(static_cast<char>((s >> (8 * i)) & 0xff));
    }
    meta += meta_extra;
    std::string out = magic;
    u32(out, format);
    u32(out, meta_len.value_or(static_cast<std::uint32_t>(meta.size())));
    return out + meta + payload;
  }
};

std::string lz4_frame(const std::string& content, bool checksums = true, bool content_size = true) {
  LZ4F_preferences_t p{};
  if (checksums) {
    p.frameInfo.contentChecksumFlag = LZ4F_contentChecksumEnabled;
    p.frameInfo.blockChecksumFlag = LZ4F_blockChecksumEnabled;
  }
  if (content_size) p.frameInfo.contentSize = content.size();
  std::string out(LZ4F_compressFrameBound(content.size(), &p), '\0');
  const std::size_t n = LZ4F_compressFrame(out.data(), out.size(), content.data(), content.size(), &p);
  REQUIRE_FALSE(LZ4F_isError(n));
  out.resize(n);
  return out;
}

std::string floats_bytes(int n) {
  std::string out;
  for (int i = 0; i < n; ++i) {
    const float f = static_cast<float>(i);
    out.append(reinterpret_cast<const char*>(&f), sizeof f);
  }
  return out;
}

TEST_CASE("tensor cache: crafted entries whose headers lie are rejected") {
  TempDir tmp("accelkit-tensor-cache");
  Warnings w;
  TensorCache c(options(tmp.str(), &w));
  const std::string path = c.entry_path("k");
  const Crafted valid{"akTCache", 1, "k", "1", {{7, {2, 3}}}, floats_bytes(6), {}, {}, {}};

  // The crafted format is the cache's: a valid one reads back.
  write_bytes(path, lz4_frame(valid.content()));
  const auto hit = c.get_tensor("k");
  REQUIRE(hit.has_value());
  CHECK(same(*hit, at::arange(6, at::TensorOptions().dtype(at::kFloat)).view({2, 3})));
  Crafted bools = valid;
  bools.tensors = {{11, {4}}};
  bools.payload = std::string("\0\1\1\0", 4);
  write_bytes(path, lz4_frame(bools.content()));
  REQUIRE(c.get_tensor("k").has_value());
  CHECK(same(*c.get_tensor("k"), torch::tensor({false, true, true, false})));

  struct Case {
    std::string name;
    std::string bytes;
  };
  std::vector<Case> bad;
  auto add = [&](const std::string& name, const std::function<void(Crafted&)>& change) {
    Crafted x = valid;
    change(x);
    bad.push_back({name, lz4_frame(x.content())});
  };
  add("bad magic", [](Crafted& x) { x.magic = "akTCachX"; });
  add("format 2", [](Crafted& x) { x.format = 2; });
  add("metadata length 4 GiB", [](Crafted& x) { x.meta_len = 0xffffffffu; });
  add("metadata length one byte long", [](Crafted& x) { x.meta_len = 4 + 1 + 4 + 1 + 4 + 2 + 16 + 1; });
  add("metadata length one byte short", [](Crafted& x) { x.meta_len = 4 + 1 + 4 + 1 + 4 + 2 + 16 - 1; });
  add("a million tensors claimed", [](Crafted& x) { x.count = 1000000; });
  add("two tensors claimed, one described", [](Crafted& x) { x.count = 2; });
  add("unknown dtype code 99", [](Crafted& x) { x.tensors[0].code = 99; });
  add("dtype code 0", [](Crafted& x) { x.tensors[0].code = 0; });
  add("200 dimensions", [](Crafted& x) { x.tensors[0].sizes.assign(200, 1); });
  add("a size of 2^62", [](Crafted& x) { x.tensors[0].sizes = {1ull << 62}; });
  add("a negative size", [](Crafted& x) { x.tensors[0].sizes = {~0ull}; });
  add("sizes whose product overflows", [](Crafted& x) { x.tensors[0].sizes = {1ull << 32, 1ull << 32, 6}; });
  add("an empty tensor whose other sizes overflow", [](Crafted& x) {
    x.tensors.push_back({7, {1ull << 40, 1ull << 40, 0}});
  });
  add("sizes for more bytes than the payload", [](Crafted& x) { x.tensors[0].sizes = {2, 4}; });
  add("a payload one byte short", [](Crafted& x) { x.payload.pop_back(); });
  add("a payload one byte long", [](Crafted& x) { x.payload.push_back('x'); });
  add("stray bytes in the metadata", [](Crafted& x) {
    x.meta_extra = "xy";
    x.payload.resize(x.payload.size() - 2);
  });
  add("a bool byte of 2", [](Crafted& x) {
    x.tensors = {{11, {3}}};
    x.payload = std::string("\0\2\1", 3);
  });
  bad.push_back({"an LZ4 frame without checksums", lz4_frame(valid.content(), false)});
  bad.push_back({"an LZ4 frame without its content size", lz4_frame(valid.content(), true, false)});
  bad.push_back({"not LZ4 at all", "hello, this is not a tensor cache entry"});
  bad.push_back({"an empty file", ""});
  std::uint64_t corrupt = c.stats().corrupt;
  for (const Case& b : bad) {
    INFO(b.name);
    write_bytes(path, b.bytes);
    CHECK_FALSE(c.get("k").has_value());
    CHECK_FALSE(fs::exists(path));
    CHECK(c.stats().corrupt == ++corrupt);
  }
  CHECK(w.size() == bad.size());
  INFO(w.text());

  // Another key's or version's entry under this name: a miss, the file kept, nothing reported.
  for (const auto& change : std::vector<std::function<void(Crafted&)>>{[](Crafted& x) { x.key = "other"; },
                                                                      [](Crafted& x) { x.version = "2"; }}) {
    Crafted x = valid;
    change(x);
    write_bytes(path, lz4_frame(x.content()));
    CHECK_FALSE(c.get("k").has_value());
    CHECK(fs::exists(path));
  }
  CHECK(c.stats().corrupt == corrupt);
  CHECK(w.size() == bad.size());
}

TEST_CASE("tensor cache: over budget, the least recently used entry goes first; the one just written stays") {
  const std::uint64_t seed = accelkit::test::test_seed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  TempDir tmp("accelkit-tensor-cache");
  Warnings w;
  // Random bytes do not compress: each entry is a little over 20000 bytes; two fit, not three.
  // Two caches on the directory (as two processes would be) share its size total.
  TensorCache c(options(tmp.str(), &w, 50000)), c2(options(tmp.str(), &w, 50000));
  auto evictions = [&] { return c.stats().evictions + c2.stats().evictions; };
  auto entry = [] { return random_of(c10::ScalarType::Byte, {20000}); };
  const at::Tensor a = entry(), b = entry(), c3 = entry(), d = entry(), e = entry();
  auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); };
  c.put("a", a);
  pause();
  c2.put("b", b);
  pause();
  CHECK(evictions() == 0);
  REQUIRE(c.get("a").has_value());  // a is now more recent than b
  pause();
  c2.put("c", c3);
  CHECK(c2.stats().evictions == 1);
  CHECK(fs::exists(c.entry_path("a")));
  CHECK_FALSE(fs::exists(c.entry_path("b")));
  CHECK(fs::exists(c.entry_path("c")));
  pause();
  c.put("d", d);  // a (used before c was written) goes
  CHECK(evictions() == 2);
  CHECK_FALSE(fs::exists(c.entry_path("a")));
  CHECK(fs::exists(c.entry_path("c")));
  CHECK(fs::exists(c.entry_path("d")));
  CHECK(c.stats().bytes_on_disk == fs::file_size(c.entry_path("c")) + fs::file_size(c.entry_path("d")));
  CHECK(c.stats().bytes_on_disk <= 50000);
  CHECK(same(*c.get_tensor("c"), c3));
  CHECK(same(*c.get_tensor("d"), d));

  // get() makes an entry recent: an old modification time becomes now.
  const timespec old[2] = {{946684800, 0}, {946684800, 0}};  // 2000-01-01
  REQUIRE(::utimensat(AT_FDCWD, c.entry_path("c").c_str(), old, 0) == 0);
  REQUIRE(c.get("c").has_value());
  struct stat st {};
  REQUIRE(::stat(c.entry_path("c").c_str(), &st) == 0);
  CHECK(st.st_mtim.tv_sec > ::time(nullptr) - 60);

  // A budget smaller than one entry: everything else goes, the entry just written stays.
  TensorCache tiny(options(tmp.str(), &w, 1000));
  tiny.put("e", e);
  CHECK(files_in(tmp.path(), false) == std::vector<std::string>{fs::path(tiny.entry_path("e")).filename().string()});
  CHECK(tiny.stats().evictions == 2);
  REQUIRE(tiny.get_tensor("e").has_value());
  CHECK(same(*tiny.get_tensor("e"), e));
  CHECK(w.size() == 0);
}

TEST_CASE("tensor cache: the size total kept in .lock is a hint that a scan corrects") {
  const std::uint64_t seed = accelkit::test::test_seed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  TempDir tmp("accelkit-tensor-cache");
  Warnings w;
  TensorCache c(options(tmp.str(), &w, 50000));
  auto entry = [] { return random_of(c10::ScalarType::Byte, {20000}); };
  auto size_of = [&](const std::string& key) { return fs::file_size(c.entry_path(key)); };
  auto pause = [] { std::this_thread::sleep_for(std::chrono::milliseconds(5)); };
  c.put("a", entry());
  pause();
  c.put("b", entry());
  CHECK(c.stats().bytes_on_disk == size_of("a") + size_of("b"));
  const fs::path lock = tmp.path() / ".lock";
  REQUIRE(fs::file_size(lock) == 16);

  // An entry removed by hand and an unreadable total: the next put lists the directory.
  fs::remove(c.entry_path("a"));
  write_bytes(lock, "garbage");
  pause();
  c.put("c", entry());
  CHECK(c.stats().bytes_on_disk == size_of("b") + size_of("c"));
  CHECK(c.stats().evictions == 0);

  // A total far too large: the put finds the real one, over budget by one entry, and evicts
  // the oldest.
  std::string huge = "akTCsize";
  for (int i = 0; i < 8; ++i) huge.push_back(static_cast<char>(((1ull << 40) >> (8 * i)) & 0xff));
  write_bytes(lock, huge);
  pause();
  c.put("d", entry());
  CHECK(c.stats().evictions == 1);
  CHECK_FALSE(fs::exists(c.entry_path("b")));
  CHECK(c.stats().bytes_on_disk == size_of("c") + size_of("d"));
  CHECK(w.size() == 0);
}

TEST_CASE("tensor cache: a writer killed with SIGKILL mid-write leaves no visible partial entry") {
  const std::uint64_t seed = accelkit::test::test_seed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  std::mt19937_64 rng(seed);
  TempDir tmp("accelkit-tensor-cache");
  Warnings w;
  TensorCache c(options(tmp.str(), &w));
  // 16 MB of floats with some structure: tens of milliseconds to compress and write. The
  // entries hold an older sample first, so that every round has entries to replace.
  const at::Tensor big =
      at::arange(4 << 20, at::TensorOptions().dtype(at::kFloat)).remainder(977.0) + at::randn({4 << 20}) * 0.01;
  const std::vector<at::Tensor> sample{big}, older{big + 1, at::ones({3})};
  const std::vector<std::string> keys{"big0", "big1", "big2"};
  for (const std::string& key : keys) c.put(key, older);
  constexpr int kRounds = 6;
  int replaced = 0;
  for (int round = 0; round < kRounds; ++round) {
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::alarm(60);  // never outlives the test
      try {
        for (int i = 0;; ++i) c.put(keys[static_cast<std::size_t>(i) % keys.size()], sample);
      } catch (...) {
        ::_exit(3);
      }
    }
    const int delay_ms = 2 + static_cast<int>(rng() % 150);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    REQUIRE(::kill(pid, SIGKILL) == 0);
    const int status = wait_for(pid);
    INFO("round " << round << ", killed after " << delay_ms << " ms");
    CHECK(WIFSIGNALED(status));
    CHECK(WTERMSIG(status) == SIGKILL);

    // Every entry is complete, the older sample or the new one; temporary files are not entries.
    TensorCache reader(options(tmp.str(), &w));
    CHECK(files_in(tmp.path(), false).size() == keys.size());
    for (const std::string& key : keys) {
      const auto got = reader.get(key);
      REQUIRE(got.has_value());
      const bool is_new = same_sample(*got, sample);
      CHECK((is_new || same_sample(*got, older)));
      if (is_new) {
        ++replaced;
        c.put(key, older);  // for the next round
      }
    }
    CHECK(reader.stats().corrupt == 0);
  }
  MESSAGE("entries replaced before the kill: " << replaced << "; temporary files left by the " << kRounds
                                               << " killed writers: " << files_in(tmp.path(), true).size());
  CHECK(w.size() == 0);
  INFO(w.text());

  // Temporary files untouched for 5 minutes are a dead writer's: the next cache or put removes
  // them; recent ones (a writer at work) stay.
  const std::string stale = ".0123456789abcdef.tc.tmp-999999-0", fresh = ".0123456789abcdef.tc.tmp-999999-1";
  write_bytes(tmp.path() / stale, "partial");
  write_bytes(tmp.path() / fresh, "partial");
  const timespec hour_ago[2] = {{::time(nullptr) - 3600, 0}, {::time(nullptr) - 3600, 0}};
  for (const std::string& t : files_in(tmp.path(), true))
    if (t != fresh) REQUIRE(::utimensat(AT_FDCWD, (tmp.path() / t).c_str(), hour_ago, 0) == 0);
  TensorCache cleaner(options(tmp.str(), &w));
  CHECK(files_in(tmp.path(), true) == std::vector<std::string>{fresh});
  // So does a put that takes the cache over budget (it lists the directory).
  TensorCache full(options(tmp.str(), &w, 1));
  write_bytes(tmp.path() / stale, "partial");
  REQUIRE(::utimensat(AT_FDCWD, (tmp.path() / stale).c_str(), hour_ago, 0) == 0);
  full.put("small", at::ones({4}));
  CHECK(files_in(tmp.path(), true) == std::vector<std::string>{fresh});
}

TEST_CASE("tensor cache: two processes writing one key at once leave one complete entry") {
  const std::uint64_t seed = accelkit::test::test_seed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  const std::vector<at::Tensor> samples[2] = {
      {at::randn({1 << 20}), at::zeros({3})},
      {at::randn({1 << 20}), at::ones({5}, at::TensorOptions().dtype(at::kInt))}};
  for (int round = 0; round < 3; ++round) {
    INFO("round " << round);
    TempDir tmp("accelkit-tensor-cache");
    Warnings w;
    TensorCache c(options(tmp.str(), &w));
    int go[2];
    REQUIRE(::pipe(go) == 0);
    pid_t kids[2];
    for (int i = 0; i < 2; ++i) {
      kids[i] = ::fork();
      REQUIRE(kids[i] >= 0);
      if (kids[i] == 0) {
        ::alarm(60);
        ::close(go[1]);
        char byte = 0;
        if (::read(go[0], &byte, 1) != 1) ::_exit(2);
        try {
          c.put("same", samples[i]);
        } catch (...) {
          ::_exit(3);
        }
        ::_exit(c.enabled() ? 0 : 4);
      }
    }
    ::close(go[0]);
    REQUIRE(::write(go[1], "gg", 2) == 2);
    ::close(go[1]);
    for (const pid_t kid : kids) {
      const int status = wait_for(kid);
      CHECK(WIFEXITED(status));
      CHECK(WEXITSTATUS(status) == 0);
    }
    CHECK(files_in(tmp.path(), false) == std::vector<std::string>{fs::path(c.entry_path("same")).filename().string()});
    CHECK(files_in(tmp.path(), true).empty());
    const auto got = c.get("same");
    REQUIRE(got.has_value());
    CHECK((same_sample(*got, samples[0]) || same_sample(*got, samples[1])));
    CHECK(c.stats().corrupt == 0);
  }
}

TEST_CASE("tensor cache: threads sharing one cache") {
  const std::uint64_t seed = accelkit::test::test_seed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  TempDir tmp("accelkit-tensor-cache");
  Warnings w;
  // A budget of about four of the eight entries: puts evict while other threads read.
  TensorCache c(options(tmp.str(), &w, 4 * 40100));
  std::vector<std::vector<at::Tensor>> expected;
  for (int k = 0; k < 8; ++k) expected.push_back({at::randn({10000}), at::full({2}, k)});
  std::atomic<int> wrong{0}, computed{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 r(static_cast<unsigned>(seed) + static_cast<unsigned>(t));
      for (int i = 0; i < 40; ++i) {
        const std::size_t k = r() % expected.size();
        const auto got = c.get_or_compute("k" + std::to_string(k), [&] {
          computed.fetch_add(1);
          return expected[k];
        });
        if (!same_sample(got, expected[k])) wrong.fetch_add(1);
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(wrong.load() == 0);
  const TensorCache::Stats s = c.stats();
  CHECK(s.hits + s.misses == 160);
  CHECK(s.misses == static_cast<std::uint64_t>(computed.load()));
  CHECK(s.corrupt == 0);
  CHECK(s.bytes_on_disk <= 4 * 40100);
  CHECK(w.size() == 0);
  INFO(w.text());
}

TEST_CASE("tensor cache: a missing directory is created; an unusable one turns the cache off with one warning") {
  TempDir tmp("accelkit-tensor-cache");
  const at::Tensor t = at::arange(5, at::TensorOptions().dtype(at::kFloat));

  SUBCASE("missing, with its parents") {
    Warnings w;
    const fs::path dir = tmp.path() / "a" / "b" / "c";
    TensorCache c(options(dir.string(), &w));
    CHECK(c.enabled());
    CHECK(fs::is_directory(dir));
    c.put("k", t);
    REQUIRE(c.get_tensor("k").has_value());
    CHECK(same(*c.get_tensor("k"), t));
    CHECK(w.size() == 0);
  }

  SUBCASE("the default directory: <cache root>/tensors") {
    accelkit::test::ScopedEnv env("ACCELKIT_CACHE_DIR", (tmp.path() / "root").string());
    Warnings w;
    TensorCache c(options("", &w));
    CHECK(c.enabled());
    CHECK(c.dir() == (tmp.path() / "root" / "tensors").string());
    CHECK(fs::is_directory(tmp.path() / "root" / "tensors"));
  }

  // Disabled (by the constructor, or by the first put): get misses, put does nothing,
  // get_or_compute computes every time; one warning, naming `why`.
  auto check_disabled = [&t](TensorCache& c, Warnings& w, const std::string& why) {
    int computed = 0;
    for (int i = 0; i < 3; ++i) {
      c.put("k", t);
      CHECK_FALSE(c.get("k").has_value());
      CHECK(same(c.get_or_compute_tensor("k",
                                         [&] {
                                           ++computed;
                                           return t;
                                         }),
                 t));
    }
    CHECK(computed == 3);
    CHECK_FALSE(c.enabled());
    CHECK(contains(c.disabled_reason(), why));
    CHECK(c.stats().puts == 0);
    REQUIRE(w.size() == 1);
    CHECK(contains(w.lines[0], why));
  };

  SUBCASE("a path through a regular file") {
    accelkit::test::write_file(tmp.path() / "afile", "not a directory");
    Warnings w;
    const std::string dir = (tmp.path() / "afile" / "sub").string();
    TensorCache c(options(dir, &w));
    CHECK_FALSE(c.enabled());
    check_disabled(c, w, (tmp.path() / "afile").string());
  }

  SUBCASE("read-only") {
    if (::geteuid() == 0) {
      MESSAGE("skipped: running as root, which writes into a mode 0555 directory all the same "
              "(the unusable-directory case is covered by a path through a regular file)");
      return;
    }
    const fs::path ro = tmp.make_dir("ro");
    accelkit::test::set_mode(ro, 0555);
    Warnings w;
    TensorCache c(options(ro.string(), &w));
    CHECK_FALSE(c.enabled());
    check_disabled(c, w, ro.string());

    // Made read-only after the cache started: the first put fails, removes its temporary file
    // and turns the cache off, with one warning.
    const fs::path later = tmp.make_dir("later");
    Warnings w2;
    TensorCache c2(options(later.string(), &w2));
    REQUIRE(c2.enabled());
    accelkit::test::set_mode(later, 0555);
    check_disabled(c2, w2, later.string());
    CHECK(files_in(later, true).empty());
    CHECK(files_in(later, false).empty());
  }
}

TEST_CASE("tensor cache: the default directory under a cache root that cannot be used: off, said by the root's one warning") {
  TempDir tmp("accelkit-tensor-cache");
  const at::Tensor t = at::arange(5, at::TensorOptions().dtype(at::kFloat));
  accelkit::test::write_file(tmp.path() / "rootfile", "not a directory");
  accelkit::test::ScopedEnv env("ACCELKIT_CACHE_DIR", (tmp.path() / "rootfile").string());
  Warnings w;
  TensorCache c(options("", &w));
  CHECK_FALSE(c.enabled());
  CHECK(contains(c.disabled_reason(), (tmp.path() / "rootfile").string() + ": Not a directory"));
  c.put("k", t);
  CHECK_FALSE(c.get("k").has_value());
  CHECK(w.size() == 0);  // decision_cache_dir's warning, once for the process, says it
}

// Runs `get` on a thread of its own; false when it has not returned within a minute. A get stuck
// opening the FIFO `fifo` (waiting for a writer) is then released by opening it for writing
// here, so that a hang fails the test instead of blocking it.
bool returns_in_time(const fs::path& fifo, const std::function<void()>& get) {
  std::atomic<bool> done{false};
  std::thread worker([&] {
    get();
    done = true;
  });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!done && std::chrono::steady_clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const bool in_time = done;
  if (!in_time) {
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  }
  worker.join();
  return in_time;
}

TEST_CASE("tensor cache: a FIFO, a directory or an oversized file under an entry's name is never waited on or read") {
  TempDir tmp("accelkit-tensor-cache");
  const at::Tensor t = at::arange(6, at::TensorOptions().dtype(at::kFloat));
  Warnings w;
  TensorCache c(options(tmp.str(), &w, 1u << 20));
  REQUIRE(c.enabled());

  // A FIFO: the read neither waits for a writer nor reads; one line names it, it is removed,
  // and the entry computed again takes its name.
  const fs::path fifo = c.entry_path("fifo");
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  std::optional<std::vector<at::Tensor>> got;
  REQUIRE(returns_in_time(fifo, [&] { got = c.get("fifo"); }));
  CHECK_FALSE(got.has_value());
  REQUIRE(w.size() == 1);
  CHECK(contains(w.lines[0], fifo.string()));
  CHECK(contains(w.lines[0], "not a regular file (a FIFO)"));
  CHECK(same(c.get_or_compute_tensor("fifo", [&] { return t; }), t));
  CHECK(fs::is_regular_file(fifo));
  REQUIRE(c.get_tensor("fifo").has_value());
  CHECK(same(*c.get_tensor("fifo"), t));

  // An empty directory: removed the same way, then replaced.
  const fs::path dir = c.entry_path("dir");
  fs::create_directory(dir);
  CHECK_FALSE(c.get("dir").has_value());
  REQUIRE(w.size() == 2);
  CHECK(contains(w.lines[1], dir.string()));
  CHECK(contains(w.lines[1], "not a regular file (a directory)"));
  c.put("dir", t);
  CHECK(c.enabled());
  REQUIRE(c.get_tensor("dir").has_value());

  // A file larger than both the budget and 1 GiB (sparse: no disk taken) is not read.
  const fs::path big = c.entry_path("big");
  {
    const int fd = ::open(big.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    REQUIRE(fd >= 0);
    REQUIRE(::ftruncate(fd, static_cast<off_t>((1ull << 30) + 1)) == 0);
    ::close(fd);
  }
  CHECK_FALSE(c.get("big").has_value());
  REQUIRE(w.size() == 3);
  CHECK(contains(w.lines[2], big.string()));
  CHECK(contains(w.lines[2], "larger (1073741825 bytes) than the cache keeps (1073741824 bytes)"));
  CHECK_FALSE(fs::exists(big));
  CHECK(c.stats().corrupt == 3);
}

// Restores RLIMIT_FSIZE and SIGXFSZ's disposition when it goes.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    REQUIRE(::getrlimit(RLIMIT_FSIZE, &old_) == 0);
    rlimit l = old_;
    l.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &l) == 0);
    old_handler_ = ::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG instead
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    ::signal(SIGXFSZ, old_handler_);
  }
  FileSizeLimit(const FileSizeLimit&) = delete;
  FileSizeLimit& operator=(const FileSizeLimit&) = delete;

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
};

TEST_CASE("tensor cache: a write that fails part way turns the cache off, leaving no temporary file") {
  // A full disk (ENOSPC) needs a small file system of its own, which a test cannot mount
  // without privileges; RLIMIT_FSIZE fails the same write() calls part way, with EFBIG.
  MESSAGE("ENOSPC itself is not produced; the same failing-write path runs under RLIMIT_FSIZE (EFBIG)");
  const std::uint64_t seed = accelkit::test::test_seed();
  INFO("seed " << seed);
  torch::manual_seed(seed);
  TempDir tmp("accelkit-tensor-cache");
  Warnings w;
  TensorCache c(options(tmp.str(), &w));
  const at::Tensor small = at::arange(8, at::TensorOptions().dtype(at::kFloat));
  c.put("small", small);
  const at::Tensor large = random_of(c10::ScalarType::Byte, {1 << 20});  // incompressible
  {
    FileSizeLimit limit(64 << 10);
    c.put("large", large);
    c.put("large2", large);
  }
  CHECK_FALSE(c.enabled());
  CHECK(contains(c.disabled_reason(), "cannot write"));
  CHECK(contains(c.disabled_reason(), tmp.str()));
  REQUIRE(w.size() == 1);
  CHECK(contains(w.lines[0], "disabled"));
  CHECK(files_in(tmp.path(), true).empty());
  CHECK(files_in(tmp.path(), false) == std::vector<std::string>{fs::path(c.entry_path("small")).filename().string()});
  CHECK(c.stats().puts == 1);
  // The entry written before is intact for a cache that can write.
  TensorCache again(options(tmp.str(), &w));
  REQUIRE(again.get_tensor("small").has_value());
  CHECK(same(*again.get_tensor("small"), small));
}

TEST_CASE("tensor cache: put rejects what it cannot store, naming it") {
  TempDir tmp("accelkit-tensor-cache");
  accelkit::test::write_file(tmp.path() / "afile", "x");
  TensorCache on(options(tmp.str(), nullptr));
  TensorCache off(options((tmp.path() / "afile" / "sub").string(), nullptr));
  REQUIRE(on.enabled());
  REQUIRE_FALSE(off.enabled());
  const at::Tensor meta = at::empty({2}, at::TensorOptions().device(c10::Device(c10::DeviceType::Meta)));
  const at::Tensor sparse = at::eye(3).to_sparse();
  const at::Tensor complex_half = at::empty({2}, at::TensorOptions().dtype(c10::ScalarType::ComplexHalf));
  for (TensorCache* c : {&on, &off}) {
    CHECK_THROWS_WITH_AS(c->put("k", meta), doctest::Contains("is on meta"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(c->put("k", std::vector<at::Tensor>{at::ones({1}), at::Tensor()}),
                         doctest::Contains("tensor 1 is undefined"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(c->put("k", sparse), doctest::Contains("layout Sparse"), std::invalid_argument);
    CHECK_THROWS_WITH_AS(c->put("k", complex_half), doctest::Contains("dtype ComplexHalf"), std::invalid_argument);
  }
  CHECK(files_in(tmp.path(), false).empty());
}

TEST_CASE("tensor cache: counters") {
  TempDir tmp("accelkit-tensor-cache");
  TensorCache c(options(tmp.str(), nullptr));
  c.put("k", at::arange(10, at::TensorOptions().dtype(at::kFloat)));
  CHECK_FALSE(c.get("nope").has_value());
  CHECK(c.get("k").has_value());
  CHECK(c.get("k").has_value());
  const TensorCache::Stats s = c.stats();
  CHECK(s.hits == 2);
  CHECK(s.misses == 1);
  CHECK(s.puts == 1);
  CHECK(s.corrupt == 0);
  CHECK(s.evictions == 0);
  // 16 bytes of prefix, metadata (key and version of one byte, one 1-d tensor), 40 of floats.
  CHECK(s.bytes_raw_written == 16 + (4 + 1 + 4 + 1 + 4 + 1 + 1 + 8) + 40);
  CHECK(s.bytes_compressed_written == fs::file_size(c.entry_path("k")));
  CHECK(s.bytes_on_disk == fs::file_size(c.entry_path("k")));
}

}  // namespace tensor_cache_suite
