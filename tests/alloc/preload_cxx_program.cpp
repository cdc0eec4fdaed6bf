// A C++ program for the LD_PRELOAD comparison (alloc_preload_cxx): std containers, strings,
// shared_ptr, std::thread and over-aligned new (alignas(64), alignas(4096)). It prints only
// figures that depend on the computation, never on addresses, so its output must be the same
// with and without liblarder.so preloaded.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

struct alignas(64) Line { std::uint64_t v[8]; };
struct alignas(4096) Page { std::uint64_t v[512]; };

static std::uint64_t mix(std::uint64_t h, std::uint64_t x) {
  h ^= x + 0x9E3779B97F4A7C15ULL + (h << 6) + (h >> 2);
  return h;
}

// One thread's work: returns a checksum and counts misaligned objects.
static std::uint64_t work(int id, int *misaligned) {
  std::uint64_t h = static_cast<std::uint64_t>(id);
  std::map<std::string, std::vector<int>> m;
  std::unordered_map<int, std::string> um;
  std::list<std::shared_ptr<std::string>> l;
  std::deque<std::unique_ptr<Line>> lines;
  std::vector<std::unique_ptr<Page>> pages;
  std::vector<Line> line_vec;  // std::allocator<Line> uses aligned operator new
  for (int i = 0; i < 30000; i++) {
    std::string key = "k" + std::to_string((i * 7919 + id) % 5003) + std::string(i % 40, 'x');
    auto &v = m[key];
    v.push_back(i);
    if (v.size() > 20) v.erase(v.begin(), v.begin() + 10);
    um[i % 4001] = key + std::to_string(i);
    if (i % 3 == 0) l.push_back(std::make_shared<std::string>(key));
    if (l.size() > 500) l.pop_front();
    if (i % 5 == 0) {
      lines.push_back(std::make_unique<Line>());
      if (reinterpret_cast<std::uintptr_t>(lines.back().get()) % 64) (*misaligned)++;
      lines.back()->v[7] = static_cast<std::uint64_t>(i);
      if (lines.size() > 300) lines.pop_front();
    }
    if (i % 97 == 0) {
      pages.push_back(std::make_unique<Page>());
      if (reinterpret_cast<std::uintptr_t>(pages.back().get()) % 4096) (*misaligned)++;
      pages.back()->v[511] = static_cast<std::uint64_t>(i);
      if (pages.size() > 40) pages.erase(pages.begin());
    }
    if (i % 11 == 0) {
      line_vec.push_back(Line{});
      if (reinterpret_cast<std::uintptr_t>(line_vec.data()) % 64) (*misaligned)++;
    }
  }
  for (auto &kv : m) {
    h = mix(h, kv.first.size());
    for (int x : kv.second) h = mix(h, static_cast<std::uint64_t>(x));
  }
  std::set<std::string> sorted;
  for (auto &kv : um) sorted.insert(kv.second);
  for (auto &s : sorted) h = mix(h, s.size() + static_cast<unsigned char>(s.back()));
  for (auto &p : l) h = mix(h, p->size());
  for (auto &p : lines) h = mix(h, p->v[7]);
  for (auto &p : pages) h = mix(h, p->v[511]);
  h = mix(h, line_vec.size());
  return h;
}

int main() {
  const int nthreads = 6;
  std::vector<std::uint64_t> sums(nthreads);
  std::vector<int> mis(nthreads);
  for (int round = 0; round < 3; round++) {
    std::vector<std::thread> ts;
    for (int t = 0; t < nthreads; t++)
      ts.emplace_back([t, round, &sums, &mis] { sums[t] = work(t + round * 100, &mis[t]); });
    for (auto &t : ts) t.join();
    std::printf("round %d:", round);
    for (int t = 0; t < nthreads; t++) std::printf(" %016llx", static_cast<unsigned long long>(sums[t]));
    std::printf("\n");
  }
  int bad = 0;
  for (int m : mis) bad += m;
  std::printf("misaligned objects: %d\n", bad);
  return bad == 0 ? 0 : 1;
}
