#include "fuzz_target.hpp"

#include "bounded_parse.hpp"
#include "context.hpp"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <sys/stat.h>
#include <unistd.h>

namespace unbounded::fuzz {

bool one_printable_line(std::string_view s)
{
	return !s.empty() && s.find('\n') == std::string_view::npos && is_printable(s);
}

std::string escaped(std::string_view s)
{
	static const char hex[] = "0123456789abcdef";
	std::string out;
	for (unsigned char c : s) {
		if (c == '\\')
			out += "\\\\";
		else if (c == '\n')
			out += "\\n";
		else if (c >= 0x20 && c < 0x7f)
			out += static_cast<char>(c);
		else {
			out += "\\x";
			out += hex[c >> 4];
			out += hex[c & 15];
		}
	}
	return out;
}

void violated(const char *target, std::string_view what, std::string_view detail)
{
	std::string d(detail.substr(0, 2000));
	std::fprintf(stderr, "fuzz target %s: contract violated: %.*s: \"%s\"%s\n", target, static_cast<int>(what.size()), what.data(),
		     escaped(d).c_str(), detail.size() > d.size() ? " (cut)" : "");
	std::abort();
}

namespace {

struct Scratch {
	std::string path;
	Scratch()
	{
		::umask(022);  // files 0644, directories 0755: what fs::check_trusted believes
		std::string tmpl = std::filesystem::temp_directory_path() / "unbounded-fuzz-XXXXXX";
		if (!::mkdtemp(tmpl.data())) {
			std::perror("mkdtemp");
			std::abort();
		}
		path = tmpl;
	}
	~Scratch()
	{
		std::error_code ec;
		std::filesystem::remove_all(path, ec);
	}
};

}  // namespace

const std::string &scratch()
{
	static Scratch s;
	return s.path;
}

void reset_dir(const std::string &dir)
{
	std::error_code ec;
	std::filesystem::remove_all(dir, ec);
	std::filesystem::create_directories(dir, ec);
	if (ec) {
		std::fprintf(stderr, "Failed to create %s: %s\n", dir.c_str(), ec.message().c_str());
		std::abort();
	}
}

bool try_write_file(const std::string &path, std::string_view data)
{
	std::error_code ec;
	std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
	std::FILE *f = std::fopen(path.c_str(), "wb");
	if (!f)
		return false;
	const bool written = std::fwrite(data.data(), 1, data.size(), f) == data.size();
	return std::fclose(f) == 0 && written;
}

void write_file(const std::string &path, std::string_view data)
{
	if (!try_write_file(path, data)) {
		std::fprintf(stderr, "Failed to write %s\n", path.c_str());
		std::abort();
	}
}

const Context &machine_context(const char *target, std::initializer_list<const char *> dirs)
{
	static std::map<std::string, Context> machines;  // nodes: references stay valid
	auto [it, made] = machines.try_emplace(target);
	if (made) {
		it->second.root = scratch() + "/" + target + "/root";
		reset_dir(it->second.root);
		for (const char *d : dirs)
			reset_dir(it->second.root + "/" + d);
	}
	return it->second;
}

bool over_cap_wanted(std::string_view text, bool &checked_once)
{
	const bool first = !checked_once;
	checked_once = true;
	return first || (!text.empty() && text.back() == OVER_CAP_FLAG);
}

std::string over_cap(std::string_view text, std::size_t cap, char fill)
{
	if (!text.empty() && text.back() == OVER_CAP_FLAG)
		text.remove_suffix(1);
	std::string out(text.substr(0, cap + 1));
	out.resize(cap + 1, fill);
	return out;
}

}  // namespace unbounded::fuzz
