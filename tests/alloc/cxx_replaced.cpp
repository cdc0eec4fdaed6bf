// A program that replaces only the four base operators, as the standard allows
// ([replacement.functions]): new(size_t), delete(void *), and their aligned forms. Every other
// form has a default that calls one of these ([new.delete.single], [new.delete.array]), so every
// block this program gets from any new-expression or operator call must come from its own new,
// and every delete must reach its own delete. Its blocks are not the allocator's block starts
// (a header of 64 bytes, or of the alignment, before each), so a derived form that went to the
// allocator instead would be caught: under LD_PRELOAD a sized delete used to end in larder's
// free, which stopped the program ("invalid free"), and linked with liblarder.a the program did
// not link at all (larder's strong definitions: "multiple definition of operator new").
//
// Checks: each of the sixteen derived forms, called directly, and the compiler's own calls
// (a sized delete of a complete type, new[] and delete[] of an array with a destructor), each
// counted by the program's base operators, and nothing left live.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <new>

static long plain_news, plain_deletes, aligned_news, aligned_deletes, live;
static int failures;

#define CHECK(cond)                                                              \
  do {                                                                           \
    if (!(cond)) {                                                               \
      std::fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      failures++;                                                                \
    }                                                                            \
  } while (0)

static const std::size_t HEADER = 64;

void *operator new(std::size_t n) {
  char *p = static_cast<char *>(std::malloc(n + HEADER));
  if (!p) throw std::bad_alloc();
  plain_news++;
  live++;
  return p + HEADER;
}
void operator delete(void *p) noexcept {
  if (!p) return;
  plain_deletes++;
  live--;
  std::free(static_cast<char *>(p) - HEADER);
}
void *operator new(std::size_t n, std::align_val_t al) {
  std::size_t a = static_cast<std::size_t>(al);
  char *p = static_cast<char *>(std::aligned_alloc(a, (n + a + a - 1) / a * a));
  if (!p) throw std::bad_alloc();
  aligned_news++;
  live++;
  return p + a;
}
void operator delete(void *p, std::align_val_t al) noexcept {
  if (!p) return;
  aligned_deletes++;
  live--;
  std::free(static_cast<char *>(p) - static_cast<std::size_t>(al));
}

struct Counted {
  long v[5];
  ~Counted() { v[0] = 0; }  // a destructor: new[] stores the count (an array cookie)
};
struct alignas(128) Wide {
  long v[4];
};

// Calls one form; checks that it reached the program's base operator (the counter moved by 1).
#define EXPECT_STEP(counter, call)                    \
  do {                                                \
    long before = counter;                            \
    call;                                             \
    if (counter != before + 1) {                      \
      std::fprintf(stderr, "not the program's: %s\n", #call); \
      failures++;                                     \
    }                                                 \
  } while (0)

int main() {
  const std::align_val_t al{128};
  void *volatile p;
  // the derived forms of new
  EXPECT_STEP(plain_news, p = ::operator new[](40));
  EXPECT_STEP(plain_deletes, ::operator delete[](p));
  EXPECT_STEP(plain_news, p = ::operator new(40, std::nothrow));
  EXPECT_STEP(plain_deletes, ::operator delete(p, std::nothrow));
  EXPECT_STEP(plain_news, p = ::operator new[](40, std::nothrow));
  EXPECT_STEP(plain_deletes, ::operator delete[](p, std::nothrow));
  EXPECT_STEP(aligned_news, p = ::operator new[](40, al));
  EXPECT_STEP(aligned_deletes, ::operator delete[](p, al));
  EXPECT_STEP(aligned_news, p = ::operator new(40, al, std::nothrow));
  EXPECT_STEP(aligned_deletes, ::operator delete(p, al, std::nothrow));
  EXPECT_STEP(aligned_news, p = ::operator new[](40, al, std::nothrow));
  EXPECT_STEP(aligned_deletes, ::operator delete[](p, al, std::nothrow));
  // the sized deletes
  EXPECT_STEP(plain_news, p = ::operator new(40));
  EXPECT_STEP(plain_deletes, ::operator delete(p, 40));
  EXPECT_STEP(plain_news, p = ::operator new[](40));
  EXPECT_STEP(plain_deletes, ::operator delete[](p, 40));
  EXPECT_STEP(aligned_news, p = ::operator new(40, al));
  EXPECT_STEP(aligned_deletes, ::operator delete(p, 40, al));
  EXPECT_STEP(aligned_news, p = ::operator new[](40, al));
  EXPECT_STEP(aligned_deletes, ::operator delete[](p, 40, al));

  // what the compiler calls for new- and delete-expressions, many times over
  for (int i = 0; i < 10000; i++) {
    Counted *volatile one = new Counted();
    delete one;  // a sized delete (C++14)
    Counted *volatile many = new Counted[1 + i % 7];
    delete[] many;  // delete[] with the array's size
    Wide *volatile wide = new Wide();
    delete wide;  // sized, aligned
    Wide *volatile wides = new Wide[1 + i % 3];
    delete[] wides;
    int *volatile nothrow_one = new (std::nothrow) int(i);
    delete nothrow_one;
  }
  CHECK(plain_news == plain_deletes);
  CHECK(aligned_news == aligned_deletes);
  CHECK(plain_news == 5 + 3 * 10000);   // the direct calls, then 3 a round
  CHECK(aligned_news == 5 + 2 * 10000);
  CHECK(live == 0);
  std::printf("program's operators: new %ld, delete %ld, aligned new %ld, aligned delete %ld, live %ld\n",
              plain_news, plain_deletes, aligned_news, aligned_deletes, live);
  if (failures) std::fprintf(stderr, "%d check(s) failed\n", failures);
  return failures ? 1 : 0;
}
