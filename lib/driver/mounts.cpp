#include "mounts.hpp"

#include "fs.hpp"

#include <climits>
#include <cstdlib>
#include <fcntl.h>
#include <libmount/libmount.h>
#include <string_view>
#include <unistd.h>

namespace unbounded {
namespace {

// The longest mountinfo line kept: two paths of PATH_MAX and the options. A longer one is no
// staging mount point of ours and is skipped, never buffered whole.
constexpr std::size_t MAX_LINE = 3 * PATH_MAX;

// libmount's (un)mangled copy, malloc()ed: taken into a string; the input when it could not make one.
std::string taken(char *copy, std::string input)
{
	if (!copy)
		return input;
	std::string out(copy);
	std::free(copy);
	return out;
}

std::string mangle(const std::string &s) { return taken(mnt_mangle(s.c_str()), s); }

std::string unmangle(std::string_view s)
{
	std::string in(s);
	char *u = mnt_unmangle(in.c_str());
	return taken(u, std::move(in));
}

// Field n (0-based, space-separated) of a mountinfo line. fuzz/broken_mounts.cpp, which includes
// this file, has its own, broken on purpose.
#ifndef UNBOUNDED_FUZZ_BROKEN_MOUNTS
std::string_view field(std::string_view line, int n)
{
	for (int i = 0; i < n; i++) {
		auto sp = line.find(' ');
		if (sp == std::string_view::npos)
			return {};
		line.remove_prefix(sp + 1);
	}
	return line.substr(0, line.find(' '));
}
#endif

// A mountinfo line (proc(5)): "36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw".
// Kept when its mount point, still escaped as the kernel writes it, is `prefix` + one component.
std::optional<MountEntry> parse_line(std::string_view line, const std::string &prefix)
{
	const std::string_view target = field(line, 4);
	if (!target.starts_with(prefix) || target.size() == prefix.size() || target.find('/', prefix.size()) != std::string_view::npos)
		return std::nullopt;
	auto dash = line.find(" - ");
	if (dash == std::string_view::npos)
		return std::nullopt;
	return MountEntry{unmangle(target), unmangle(field(line, 3)), unmangle(field(line.substr(dash + 3), 0))};
}

}  // namespace

std::string MountTable::canonical(const std::string &path)
{
	char buf[PATH_MAX];
	if (::realpath(path.c_str(), buf))
		return buf;
	return path;
}

Result<MountTable> MountTable::load(const std::string &parent, const std::string &mountinfo)
{
	// Compared with the escaped field, so only the mounts kept are ever unescaped.
	std::string prefix = mangle(parent);
	while (!prefix.empty() && prefix.back() == '/')
		prefix.pop_back();
	prefix += '/';
	MountTable t;
	auto read = scan(mountinfo, [&](std::string_view line) {
		if (auto e = parse_line(line, prefix))
			t.entries_.push_back(std::move(*e));
	});
	if (!read)
		return fail(read.error());
	return t;
}

Result<MountTable> MountTable::load_if(const std::function<bool(const std::string &target)> &keep, const std::string &mountinfo)
{
	MountTable t;
	auto read = scan(mountinfo, [&](std::string_view line) {
		auto target = unmangle(field(line, 4));
		const auto dash = line.find(" - ");
		if (dash != std::string_view::npos && keep(target))
			t.entries_.push_back(MountEntry{std::move(target), unmangle(field(line, 3)), unmangle(field(line.substr(dash + 3), 0))});
	});
	if (!read)
		return fail(read.error());
	return t;
}

Result<void> MountTable::scan(const std::string &mountinfo, const std::function<void(std::string_view line)> &each)
{
	UniqueFd fd(::open(mountinfo.c_str(), O_RDONLY | O_CLOEXEC | O_NOFOLLOW));
	if (!fd)
		return fail(last_errno_error("Failed to open " + mountinfo));
	std::string line;
	bool skipping = false;  // inside a line longer than MAX_LINE
	char buf[1 << 16];
	for (;;) {
		ssize_t n = ::read(fd.get(), buf, sizeof(buf));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return fail(last_errno_error("Failed to read " + mountinfo));
		if (n == 0)
			break;
		std::string_view chunk(buf, static_cast<std::size_t>(n));
		while (!chunk.empty()) {
			auto nl = chunk.find('\n');
			const std::string_view part = chunk.substr(0, nl);
			if (!skipping) {
				if (line.size() + part.size() > MAX_LINE) {
					skipping = true;
					line.clear();
				} else {
					line.append(part);
				}
			}
			if (nl == std::string_view::npos)
				break;
			if (!skipping)
				each(line);
			line.clear();
			skipping = false;
			chunk.remove_prefix(nl + 1);
		}
	}
	return {};
}

std::optional<MountEntry> MountTable::mount_at(const std::string &p) const
{
	for (auto it = entries_.rbegin(); it != entries_.rend(); ++it)  // later mounts shadow earlier ones
		if (it->target == p)
			return *it;
	return std::nullopt;
}

}  // namespace unbounded
