// A temporary directory for a unit test, removed with everything in it when the test ends.
#pragma once

#include "fs.hpp"

#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <stdexcept>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace unbounded::test {

class TempDir {
public:
	TempDir()
	{
		char tmpl[] = "/tmp/unbounded-unit-XXXXXX";
		if (!::mkdtemp(tmpl))
			throw std::runtime_error("mkdtemp failed");
		path_ = tmpl;
	}
	~TempDir() { (void)fs::remove_tree_at(AT_FDCWD, path_, path_); }
	TempDir(const TempDir &) = delete;
	TempDir &operator=(const TempDir &) = delete;

	const std::string &path() const { return path_; }
	std::string operator/(const std::string &rel) const { return path_ + "/" + rel; }

	void write(const std::string &rel, const std::string &content, mode_t mode = 0644) const
	{
		(void)fs::mkdir_p(fs::dirname(*this / rel), 0755);
		std::ofstream(*this / rel, std::ios::binary) << content;
		::chmod((*this / rel).c_str(), mode);
	}
	bool exists(const std::string &rel) const { return ::access((*this / rel).c_str(), F_OK) == 0; }
	void link(const std::string &target, const std::string &rel) const
	{
		(void)fs::mkdir_p(fs::dirname(*this / rel), 0755);
		if (::symlink(target.c_str(), (*this / rel).c_str()) < 0)
			throw std::runtime_error("symlink failed");
	}
	void mkdir(const std::string &rel) const { (void)fs::mkdir_p(*this / rel, 0755); }

private:
	std::string path_;
};

}  // namespace unbounded::test

namespace unbounded::test {
// Catch2's TAP reporter prints INFO() text as is: keep it on one line.
inline std::string one_line(std::string s)
{
	for (std::size_t i = 0; (i = s.find('\n', i)) != std::string::npos;)
		s.replace(i, 1, "\\n");
	return s;
}
}  // namespace unbounded::test
