// Starting the load of a cache line a while before it is read (the flow states
// of a many-QP capture are misses: docs/performance.md, issue 16).
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace rdmadiag::decode {

// The instruction itself, not __builtin_prefetch: GCC (12, -O2 and above,
// with LTO) deleted the builtin where the address is computed for the prefetch
// alone, e.g. a flow's cell from its slot (FlowSlots::prefetch compiled to
// nothing: session 32), as it did after a probe loop (session 13). Check the
// disassembly of any new use (`objdump -d rdmadiag | grep prefetch`).
inline void prefetch_line(const void* p) {
#if defined(__x86_64__) || defined(__i386__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p);
#endif
}

// Starts loading every line from `first`'s through `last`'s (the part of a
// state a step reads, wherever the allocator put it).
inline void prefetch_lines(const void* first, const void* last) {
  const auto to = reinterpret_cast<std::uintptr_t>(last);
  for (auto a = reinterpret_cast<std::uintptr_t>(first) & ~std::uintptr_t{63}; a <= to; a += 64)
    prefetch_line(reinterpret_cast<const void*>(a));
}

// Streams the bytes of a buffer ahead of a reader into the cache, each line
// once: the lines from offset `pos` (or from `done`, past it) up to `until`
// (buffer offsets); `done` keeps how far it got, for the next call.
inline void prefetch_ahead(const std::uint8_t* base, std::size_t pos, std::size_t until, std::size_t& done) {
  if (done < pos || done > until) done = pos;
  for (; done < until; done += 64) prefetch_line(base + done);
}

}  // namespace rdmadiag::decode
