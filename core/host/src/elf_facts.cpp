#include "accelkit/host/elf_facts.hpp"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <map>

#include "accelkit/sdk/plugin.hpp"

namespace accelkit {
namespace {

constexpr std::size_t kMaxSections = 1 << 16;
constexpr std::size_t kMaxNote = 4096;
constexpr std::size_t kMaxDynamic = 1 << 20;  // bytes of .dynamic and of its string table
constexpr std::size_t kMaxDynsym = 64 << 20;  // bytes of .dynsym and of .dynstr

class File {
 public:
  explicit File(const std::string& path) : fd_(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK)) {}
  ~File() {
    if (fd_ >= 0) ::close(fd_);
  }
  File(const File&) = delete;
  File& operator=(const File&) = delete;
  int fd() const { return fd_; }

  // Reads [offset, offset + n) or says why it cannot.
  bool read(std::uint64_t offset, void* out, std::uint64_t n, std::uint64_t file_size, std::string* error) const {
    if (offset > file_size || n > file_size - offset) {
      *error = "ELF data out of the file's bounds (offset " + std::to_string(offset) + ", " + std::to_string(n) +
               " bytes, file " + std::to_string(file_size) + " bytes)";
      return false;
    }
    auto* p = static_cast<char*>(out);
    while (n > 0) {
      ssize_t got = ::pread(fd_, p, n, static_cast<off_t>(offset));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) {
        *error = got < 0 ? std::string("read error: ") + std::strerror(errno) : std::string("unexpected end of file");
        return false;
      }
      p += got;
      offset += static_cast<std::uint64_t>(got);
      n -= static_cast<std::uint64_t>(got);
    }
    return true;
  }

 private:
  int fd_;
};

// Reads whole sections of one file, each bounded by a cap.
struct SectionReader {
  const File& file;
  std::uint64_t file_size;
  std::string* error;

  // The section's bytes into *out (nothing for SHT_NOBITS); false, with *error set, when it is
  // larger than `cap` or cannot be read.
  bool blob(const Elf64_Shdr& s, std::size_t cap, std::string* out) const {
    if (s.sh_type == SHT_NOBITS) return true;
    if (s.sh_size > cap) {
      *error = "ELF section larger than expected (" + std::to_string(s.sh_size) + " bytes)";
      return false;
    }
    out->assign(s.sh_size, '\0');
    return file.read(s.sh_offset, out->data(), s.sh_size, file_size, error);
  }

  // The section `s` and the string table it links to.
  bool with_strings(const std::vector<Elf64_Shdr>& sections, const Elf64_Shdr& s, std::size_t cap, std::string* data,
                    std::string* strings) const {
    return blob(s, cap, data) && blob(sections[s.sh_link], cap, strings);
  }
};

// The DT_NEEDED entries of the .dynamic section `dyn`, whose string table is `strings`.
void add_needed(const std::string& dyn, const std::string& strings, ElfFacts& facts) {
  for (std::size_t at = 0; at + sizeof(Elf64_Dyn) <= dyn.size(); at += sizeof(Elf64_Dyn)) {
    Elf64_Dyn d{};
    std::memcpy(&d, dyn.data() + at, sizeof d);
    if (d.d_tag == DT_NULL) break;
    if (d.d_tag == DT_NEEDED && d.d_un.d_val < strings.size()) facts.needed.emplace_back(strings.c_str() + d.d_un.d_val);
  }
}

// The strong undefined symbols of the .dynsym section `syms` (its first entry is the null
// symbol), whose string table is `strings`.
void add_undefined(const std::string& syms, const std::string& strings, ElfFacts& facts) {
  for (std::size_t at = sizeof(Elf64_Sym); at + sizeof(Elf64_Sym) <= syms.size(); at += sizeof(Elf64_Sym)) {
    Elf64_Sym sym{};
    std::memcpy(&sym, syms.data() + at, sizeof sym);
    if (sym.st_shndx != SHN_UNDEF || sym.st_name == 0 || sym.st_name >= strings.size() ||
        ELF64_ST_BIND(sym.st_info) == STB_WEAK)
      continue;
    facts.undefined.emplace_back(strings.c_str() + sym.st_name);
  }
}

// What the sections hold: the plugin note, the libraries needed and (with `want_undefined`)
// the undefined symbols. False, with *error set, when one cannot be read.
bool read_sections(const SectionReader& r, const std::vector<Elf64_Shdr>& sections, std::size_t names_index,
                   bool want_undefined, ElfFacts& facts) {
  std::string names;
  if (!r.blob(sections[names_index], kMaxDynamic, &names)) return false;
  for (const auto& s : sections) {
    if (s.sh_name >= names.size()) continue;
    const char* name = names.c_str() + s.sh_name;
    if (std::strcmp(name, ACCELKIT_PLUGIN_NOTE_SECTION) == 0) {
      std::string text;
      if (!r.blob(s, kMaxNote, &text)) return false;
      facts.note = text.substr(0, text.find('\0'));
    } else if (s.sh_type == SHT_DYNAMIC) {
      if (s.sh_link >= sections.size()) continue;
      std::string dyn, strings;
      if (!r.with_strings(sections, s, kMaxDynamic, &dyn, &strings)) return false;
      add_needed(dyn, strings, facts);
    } else if (s.sh_type == SHT_DYNSYM && want_undefined) {
      if (s.sh_link >= sections.size()) continue;
      std::string syms, strings;
      if (!r.with_strings(sections, s, kMaxDynsym, &syms, &strings)) return false;
      add_undefined(syms, strings, facts);
    }
  }
  return true;
}

}  // namespace

std::optional<ElfFacts> read_elf_facts(const std::string& path, std::string* error, bool want_undefined) {
  std::string ignored;
  if (!error) error = &ignored;
  File f(path);
  if (f.fd() < 0) {
    *error = std::string("cannot be read: ") + std::strerror(errno);
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(f.fd(), &st) != 0 || !S_ISREG(st.st_mode)) {
    *error = "not a regular file";
    return std::nullopt;
  }
  const auto size = static_cast<std::uint64_t>(st.st_size);
  ElfFacts facts;
  unsigned char ident[EI_NIDENT] = {};
  if (!f.read(0, ident, sizeof ident, size, error)) return std::nullopt;
  if (std::memcmp(ident, ELFMAG, SELFMAG) != 0) {
    *error = "no ELF header";
    return std::nullopt;
  }
  if (ident[EI_CLASS] != ELFCLASS64 || ident[EI_DATA] != ELFDATA2LSB) return facts;  // not read further
  facts.elf64_le = true;

  Elf64_Ehdr eh{};
  if (!f.read(0, &eh, sizeof eh, size, error)) return std::nullopt;
  if (eh.e_shoff == 0 || eh.e_shnum == 0) return facts;  // no section table: nothing to learn
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum > kMaxSections || eh.e_shstrndx >= eh.e_shnum) {
    *error = "damaged ELF section table";
    return std::nullopt;
  }
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  if (!f.read(eh.e_shoff, sections.data(), sections.size() * sizeof(Elf64_Shdr), size, error)) return std::nullopt;
  if (!read_sections(SectionReader{f, size, error}, sections, eh.e_shstrndx, want_undefined, facts)) return std::nullopt;
  return facts;
}

std::string torch_library_stem(const std::string& file) {
  static const char* const kStems[] = {"libc10.so", "libtorch_cpu.so", "libtorch.so", "libc10_cuda.so",
                                       "libtorch_cuda.so", "libc10_hip.so", "libtorch_hip.so"};
  for (const char* stem : kStems) {
    const std::size_t n = std::strlen(stem);
    if (file.compare(0, n, stem) == 0 && (file.size() == n || file[n] == '.')) return stem;
  }
  return {};
}

namespace {
// The LibTorch libraries of this process, by stem: "libc10.so" -> "libc10.so.1.13": those
// loaded (the name each was loaded by: its DT_NEEDED entry in the program), and for c10 and
// torch_cpu, when not loaded yet, the ones this core was linked against.
const std::map<std::string, std::string>& host_torch_libraries() {
  static const auto* libs = [] {
    auto* m = new std::map<std::string, std::string>();
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
          if (info->dlpi_name && *info->dlpi_name) {
            std::string file = std::filesystem::path(info->dlpi_name).filename().string();
            if (auto stem = torch_library_stem(file); !stem.empty())
              static_cast<std::map<std::string, std::string>*>(data)->emplace(stem, file);
          }
          return 0;
        },
        m);
    m->emplace("libc10.so", ACCELKIT_C10_SONAME);
    m->emplace("libtorch_cpu.so", ACCELKIT_TORCH_CPU_SONAME);
    return m;
  }();
  return *libs;
}
}  // namespace

std::string foreign_torch_library(const ElfFacts& facts, const std::string& host_version) {
  const auto& host = host_torch_libraries();
  for (const auto& needed : facts.needed) {
    const std::string stem = torch_library_stem(needed);
    if (stem.empty()) continue;
    if (auto it = host.find(stem); it != host.end() && it->second != needed)
      return "built against another LibTorch: it needs " + needed + ", this process's LibTorch " + host_version +
             " is " + it->second;
  }
  return {};
}

std::vector<std::pair<std::string, std::string>> parse_plugin_note(const std::string& text) {
  std::vector<std::pair<std::string, std::string>> out;
  std::size_t begin = 0;
  while (begin < text.size()) {
    std::size_t end = text.find('\n', begin);
    if (end == std::string::npos) end = text.size();
    const std::string line = text.substr(begin, end - begin);
    if (auto sp = line.find(' '); sp != std::string::npos && sp > 0) out.emplace_back(line.substr(0, sp), line.substr(sp + 1));
    begin = end + 1;
  }
  return out;
}

}  // namespace accelkit
