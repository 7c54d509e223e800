// One parser's contract, checked on every input a fuzzer makes (fuzz/README.md). A target is
// written once: built with clang it is a libFuzzer target (LLVMFuzzerTestOneInput), built with g++
// (-DUNBOUNDED_FUZZ_REPLAY) it registers itself with replay_main.cpp, which the unit tier runs over
// the checked-in corpora and regression inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

namespace unbounded {
struct Context;
}

namespace unbounded::fuzz {

using OneInput = int (*)(const std::uint8_t *data, std::size_t size);

// The replay's table of targets; unused by libFuzzer builds.
bool register_target(const char *name, OneInput f);

// Prints what was violated and the detail (escaped), then aborts: libFuzzer saves the input as a
// crash, the replay fails.
[[noreturn]] void violated(const char *target, std::string_view what, std::string_view detail);

// The message contract of every parser here: one line, not empty, printable (bounded_parse.hpp).
bool one_printable_line(std::string_view s);

// Bytes as C escapes: the reproducer printed on a failure.
std::string escaped(std::string_view s);

// This process's private directory (0700, created on first use, removed at exit).
const std::string &scratch();
// Empties `dir` (created when missing); files are written with mode 0644 as their owner.
void reset_dir(const std::string &dir);
void write_file(const std::string &path, std::string_view data);  // aborts when it cannot
// For trees the input names: false where a name cannot be a file (a directory is in the way).
bool try_write_file(const std::string &path, std::string_view data);

// A machine for the parsers that read files under ctx.root: the target's own root under scratch()
// (one per target, so the replay's targets, which share a process, never see each other's files),
// emptied and given `dirs` (relative, "dev") on first use, then kept. The config is the default.
const Context &machine_context(const char *target, std::initializer_list<const char *> dirs = {});

// The over-cap half of a contract (fuzz/README.md, "Caps"). An input whose last byte is
// OVER_CAP_FLAG asks for it: no real file ends in \x01, so the seeds keep their meaning, and the
// fuzzer finds the flag at once (a compared constant). The first input a target sees asks for it
// too, so every run, the replay's included, checks each cap at least once.
inline constexpr char OVER_CAP_FLAG = '\x01';
bool over_cap_wanted(std::string_view text, bool &checked_once);
// The input (without its flag byte) followed by `fill` up to cap + 1 bytes, or cut to cap + 1: one
// byte over whatever the input's length, so it is the cap that refuses it.
std::string over_cap(std::string_view text, std::size_t cap, char fill);

}  // namespace unbounded::fuzz

#define FUZZ_REQUIRE(cond, detail)                                               \
	do {                                                                     \
		if (!(cond))                                                     \
			::unbounded::fuzz::violated(FUZZ_NAME, #cond, (detail)); \
	} while (0)

// A message must be one printable line.
#define FUZZ_REQUIRE_LINE(msg) FUZZ_REQUIRE(::unbounded::fuzz::one_printable_line(msg), (msg))

#ifdef UNBOUNDED_FUZZ_REPLAY
#define FUZZ_ENTRY_ static const bool fuzz_registered_ = ::unbounded::fuzz::register_target(FUZZ_NAME, fuzz_one_input_);
#else
#define FUZZ_ENTRY_                                                                       \
	extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t *data, std::size_t size) \
	{                                                                                 \
		return fuzz_one_input_(data, size);                                       \
	}
#endif

// FUZZ_TARGET { body using `data`, `size` and `text` (the input as a string_view) }
#define FUZZ_TARGET                                                                                          \
	static int fuzz_one_input_(const std::uint8_t *data, std::size_t size);                              \
	static int fuzz_body_(const std::uint8_t *data, std::size_t size, std::string_view text);            \
	static int fuzz_one_input_(const std::uint8_t *data, std::size_t size)                               \
	{                                                                                                    \
		return fuzz_body_(data, size, std::string_view(reinterpret_cast<const char *>(data), size)); \
	}                                                                                                    \
	FUZZ_ENTRY_                                                                                          \
	static int fuzz_body_([[maybe_unused]] const std::uint8_t *data, [[maybe_unused]] std::size_t size,  \
			      [[maybe_unused]] std::string_view text)
